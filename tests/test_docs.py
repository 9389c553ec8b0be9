"""The user guide: the README's commands run as written, the docs site builds with warnings as
errors, and neither points outside the repository.

The README's ```bash blocks run in order, in one scratch folder that holds the repository's
``examples/`` (their outputs -- ``out/``, ``runs/``, ``sweeps/`` -- land there, as they would in
the repository root), with this checkout's ``okl`` first on the PATH; each block's outputs are
then checked. ```sh blocks need a cloud project or a cluster and are only shown (their flags are
checked by tests/test_readme_flags.py). ```python blocks run too.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", flags=re.S | re.M)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text()) if lang == language]


BASH = _blocks("bash")


def _marks(block: str) -> list:
    """Slow and runner marks of a README block, from what it runs."""
    if "make test" in block:
        return [pytest.mark.skip(reason="`make test` runs this suite; `make run`'s command is the next block")]
    if "PrismRunner" in block:
        return [pytest.mark.slow, pytest.mark.prism]
    if "multi_processing" in block or "PortableRunner" in block:
        return [pytest.mark.slow]
    return []


def _check_outputs(block: str, cwd: pathlib.Path) -> None:
    """What the block promises is there (beyond its exit status)."""
    if "okl prepare csv" in block:
        meta = json.loads((cwd / "out/churn/dataset.json").read_text())
        assert (meta["task"], meta["n_rows"], meta["classes"]) == ("binary", 2000, ["no", "yes"])
        assert json.loads((cwd / "out/churn-test/dataset.json").read_text())["n_rows"] == 500
    if re.search(r"--output runs/churn\s", block) and "okl train" in block:
        metrics = json.loads((cwd / "runs/churn/metrics.json").read_text())
        assert metrics["rows"]["trained"] == 2000
        assert (cwd / "runs/churn/model.npz").stat().st_size > 0
    if "okl predict" in block:
        prepared, raw = (
            pq.read_table(sorted((cwd / "runs/churn" / name).glob("predictions-*.parquet"))).sort_by("row")
            for name in ("predictions", "predictions-raw")
        )
        assert prepared.num_rows == 500
        # each prediction carries its customer id and class name, raw records score as prepared ones
        assert prepared.column("customer").to_pylist()[:3] == ["c2001", "c2002", "c2003"]
        assert set(prepared.column("label").to_pylist()) == {"no", "yes"}
        assert raw.to_pylist() == prepared.to_pylist()
    if "okl sweep" in block:
        best = json.loads((cwd / "sweeps/churn/best.json").read_text())
        assert best["learner"] == "fogd"
        assert any((cwd / "figures/churn").glob("*.png"))
        assert (cwd / "runs/churn-best/model.npz").exists()
    if "--streaming" in block:
        assert any((cwd / "runs/churn-live").glob("model-v*.npz"))
    if "--runner=DirectRunner --overwrite" in block:
        assert (cwd / "runs/synthetic-fogd_r/model.npz").exists()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> pathlib.Path:
    """A scratch folder standing for the repository root: ``examples/`` and nothing else."""
    cwd = tmp_path_factory.mktemp("readme")
    (cwd / "examples").symlink_to(ROOT / "examples")
    return cwd


def _environment() -> dict:
    """This checkout's code first (PYTHONPATH), the okl script of this Python first on PATH."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("OKL_PROGRESS", None)
    return env


@pytest.mark.parametrize("block", [pytest.param(b, marks=_marks(b), id=f"bash{i}") for i, b in enumerate(BASH)])
def test_readme_bash_block_runs_as_written(block, workdir, request):
    if "PrismRunner" in block:
        request.getfixturevalue("prism_location")  # skips without Go; builds Prism when missing
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=workdir, env=_environment(),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"README block failed:\n{block}\n--- stderr:\n{result.stderr[-3000:]}"
    _check_outputs(block, workdir)


def test_make_run_is_the_documented_command():
    """`make run` is too heavy to run here; the README shows its command, which runs above."""
    recipe = re.search(r"^run: .*\n\t(.*)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1)
    assert recipe.replace("$(VENV)/bin/", "") in BASH[1]
    assert "make run" in BASH[0] and "make test" in BASH[0]


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_block_runs(index, tmp_path, monkeypatch):
    code = _blocks("python")[index]
    if "okl_core.sklearn" in code:
        pytest.importorskip("sklearn")
        pytest.importorskip("okl_core.sklearn", reason="okl_core.sklearn is not in this checkout")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, f"README python block {index}", "exec"), namespace)  # noqa: S102  (the README's own code)
    if "learner.update" in code:
        assert (namespace["learner"].to_labels(namespace["online_scores"]) != namespace["y"]).mean() < 0.2
        assert (tmp_path / "model.npz").exists()


def test_readme_is_a_guide_not_a_notebook():
    text = README.read_text()
    assert len(text.splitlines()) <= 400
    for needed in ("## The two commands", "## Your own CSV in three commands", "## The Python API", "## Runners",
                   "## Streaming", "## Sweeps", "## Deploying on Dataflow and Flink", "## Where the rest is"):
        assert needed in text
    # the three commands come early: in the first third of the README
    assert text.index("okl prepare csv") < len(text) // 3


FORBIDDEN = {
    "a folder outside the repository": re.compile(r"\.\./shared"),
    "a paper reading outside the repository": re.compile(r"\bspec/[\w*]+\.md"),
    "an issue number": re.compile(r"\b[Ii]ssue (?:#?\d+|#)"),
    "a dated measurement": re.compile(r"\b20\d\d-\d\d-\d\d\b|\b\d\d:\d\d(?:-\d\d:\d\d)? UTC\b"),
    "a benchmark run as a script (python -m bench.NAME works, python bench/NAME.py does not)": re.compile(r"python bench/"),
}


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_point_nowhere_outside_the_repository(page):
    text = page.read_text()
    for what, pattern in FORBIDDEN.items():
        found = pattern.search(text)
        assert found is None, f"{page.relative_to(ROOT)} names {what}: {found.group(0)!r}"


def test_no_documented_command_writes_into_tracked_docs():
    """A figure command writes into a folder of its own, never over the docs' tracked files."""
    text = "\n".join(p.read_text() for p in [README, *DOCS])
    for line in re.findall(r"okl report [^\n`]*", text):
        assert not re.search(r"--output[ =]docs\b|-o docs\b", line), line


def test_every_benchmark_imports_as_a_module_of_the_bench_package():
    """``python -m bench.NAME`` from the repository root (``python bench/NAME.py`` did not import)."""
    names = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__")
    code = "import importlib\nfor n in %r: importlib.import_module('bench.' + n)" % names
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "bench_fogd" in names and len(names) > 10


def test_the_site_builds_strict_with_the_api_reference(tmp_path):
    """``mkdocs build --strict`` (what `make docs` and `make test` run), browser-free."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                            cwd=ROOT, env=_environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    api = (site / "api" / "registry" / "index.html").read_text()
    assert "make_learner" in api and "learner_names" in api  # rendered from the docstrings
    for html in site.rglob("*.html"):  # the API reference too: the docstrings point nowhere outside
        text = html.read_text()
        for what, pattern in FORBIDDEN.items():
            found = pattern.search(text)
            if what != "a dated measurement":  # the theme stamps each page with the build date
                assert found is None, f"{html.relative_to(site)} names {what}: {found.group(0)!r}"
    index = (site / "index.html").read_text()
    assert "online kernel learning" in index
    for page in DOCS:  # every page is built (and mkdocs.yml's nav lists it: strict mode refuses omissions)
        rel = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / rel / "index.html" if rel.name != "index" else site / rel.parent / "index.html"
        assert built.exists(), rel
