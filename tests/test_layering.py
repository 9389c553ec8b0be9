"""The layers of DESIGN.md and the README's "Layout": imports point down only.

    pipelines/        CLIs (and the plumbing they share)  -> any package below
    transforms/       Beam PTransforms and DoFns           -> okl_experiments, okl_core
    okl_experiments/  experiments: params, sweeps, figures -> okl_core (dask, matplotlib)
    okl_core/         numpy/scipy learners                 -> nothing of okl, no Beam, no Dask

and no CLI module of pipelines imports another one.
"""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# package -> top-level names its modules must not import
FORBIDDEN = {
    "okl_core": {"apache_beam", "dask", "distributed", "okl_experiments", "transforms", "pipelines"},
    "okl_experiments": {"apache_beam", "transforms", "pipelines"},
    "transforms": {"pipelines", "dask", "distributed"},
}


def _imports(path: pathlib.Path) -> set[str]:
    """Every module name imported anywhere in ``path`` (top level, functions, conditionals)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package):
    offenders = {
        str(path.relative_to(ROOT)): sorted(name for name in _imports(path) if name.split(".")[0] in FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def _cli_modules() -> set[str]:
    return {p.stem for p in (ROOT / "pipelines").glob("*.py") if 'if __name__ == "__main__":' in p.read_text()}


def test_no_cli_imports_another_cli():
    clis = _cli_modules()
    assert {"train", "predict", "prepare", "sweep", "report", "reproduce"} <= clis
    offenders = {}
    for name in clis:
        imported = {n.split(".")[1] for n in _imports(ROOT / "pipelines" / f"{name}.py") if n.startswith("pipelines.")}
        if imported & (clis - {name}):
            offenders[name] = sorted(imported & (clis - {name}))
    assert offenders == {}


def test_no_library_module_imports_a_cli():
    """The CLIs are shells: packages and the plumbing of pipelines never import one."""
    clis = _cli_modules()
    offenders = {}
    for directory in ("okl_core", "okl_experiments", "transforms", "pipelines"):
        for path in (ROOT / directory).rglob("*.py"):
            if directory == "pipelines" and path.stem in clis:
                continue  # covered by test_no_cli_imports_another_cli
            used = {n.split(".")[1] for n in _imports(path) if n.startswith("pipelines.")}
            if used & clis:
                offenders[str(path.relative_to(ROOT))] = sorted(used & clis)
    assert offenders == {}


def test_importing_every_library_module_loads_nothing_above_it_and_changes_no_logging():
    code = (
        "import importlib, logging, pkgutil, sys\n"
        "root = logging.getLogger(); before = (list(root.filters), list(root.handlers), root.level)\n"
        "import okl_core, okl_experiments\n"
        "for pkg in (okl_core, okl_experiments):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "for name in okl_core.learner_names():\n"
        "    okl_core.learner_class(name)\n"
        "bad = sorted({k.split('.')[0] for k in sys.modules} & {'apache_beam', 'dask', 'distributed', 'transforms', 'pipelines', 'matplotlib'})\n"
        "import pipelines\n"
        "changed = (list(root.filters), list(root.handlers), root.level) != before\n"
        "print(bad, changed)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[] False", out.stdout + out.stderr
