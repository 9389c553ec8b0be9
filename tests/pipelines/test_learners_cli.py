"""``okl learners [NAME]`` and ``okl train --learner NAME --help``: real subprocesses of the CLIs.

What they print is okl_core.catalog's text (tested against the learner classes in
tests/okl_core/test_catalog.py); here: the commands print exactly it, and refuse an unknown
learner in one line with exit status 2.
"""

import pathlib
import subprocess
import sys

import okl_core
from okl_core.catalog import learner_text, learners_markdown, learners_text

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _okl(*argv):
    """``okl ARGV`` as the console script runs it (``pipelines.okl.main``), from the checkout."""
    return subprocess.run([sys.executable, "-m", "pipelines.okl", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_okl_learners_lists_every_learner():
    done = _okl("learners")
    assert done.returncode == 0, done.stderr
    assert done.stdout == learners_text()
    listed = [line.split()[0] for line in done.stdout.splitlines()[1:1 + len(okl_core.learner_names())]]
    assert listed == okl_core.learner_names()
    assert done.stderr == ""


def test_okl_learners_name_prints_its_parameters():
    done = _okl("learners", "bogd")
    assert done.returncode == 0, done.stderr
    assert done.stdout == learner_text("bogd")
    for field in ("n_inputs", "kernel", "sigma", "budget", "seed", "eta", "lam", "decay", "gamma", "removal"):
        assert f"\n  {field} (" in done.stdout
    assert "  gamma (float, default inf): " in done.stdout and "      valid: (0, inf]\n" in done.stdout


def test_okl_learners_markdown_is_the_docs_page():
    done = _okl("learners", "--markdown")
    assert done.returncode == 0, done.stderr
    assert done.stdout == learners_markdown() == (ROOT / "docs" / "learners.md").read_text(encoding="utf-8")


def test_unknown_learner_is_one_line_listing_the_valid_names():
    done = _okl("learners", "nope")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"okl learners: error: unknown learner 'nope'; choose from {', '.join(okl_core.learner_names())}\n"
    both = _okl("learners", "fogd", "--markdown")
    assert both.returncode == 2 and both.stderr == "okl learners: error: give a learner NAME or --markdown, not both\n"


def test_train_help_with_a_learner_ends_with_its_parameters():
    done = _okl("train", "--learner", "nogd", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: okl train")
    assert done.stdout.endswith("\n" + learner_text("nogd"))
    plain = _okl("train", "--help")
    assert plain.returncode == 0 and "valid:" not in plain.stdout
    unknown = _okl("train", "--learner=nope", "-h")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.strip().splitlines() == [f"okl train: error: unknown learner 'nope'; choose from {', '.join(okl_core.learner_names())}"]
