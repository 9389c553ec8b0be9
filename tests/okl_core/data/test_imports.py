"""okl_core.data stays free of Beam and Dask, and RDKit is only imported when used."""

import subprocess
import sys


def test_okl_core_data_imports_no_beam_dask_or_rdkit():
    code = (
        "import sys, okl_core.data, okl_core.data.molecular, okl_core.data.download; "
        "bad = [m for m in ('apache_beam', 'dask', 'rdkit') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
