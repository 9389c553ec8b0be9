"""okl_core stays numpy/scipy only: it never imports apache_beam or dask (DESIGN.md)."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_okl_core_sources_do_not_import_beam_or_dask():
    pattern = re.compile(r"^\s*(import|from)\s+(apache_beam|dask|distributed)\b", re.M)
    offenders = [str(p) for p in (ROOT / "okl_core").rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []


def test_importing_every_okl_core_module_loads_neither_beam_nor_dask():
    code = (
        "import importlib, pkgutil, sys, okl_core\n"
        "for m in pkgutil.walk_packages(okl_core.__path__, 'okl_core.'):\n"
        "    importlib.import_module(m.name)\n"
        "for name in okl_core.learner_names():\n"
        "    okl_core.learner_class(name)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('apache_beam', 'dask', 'distributed'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
