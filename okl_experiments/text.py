"""Text in and out of experiments: Markdown tables, number formats, JSON files, files written whole.

Files are written with :func:`okl_core.state.atomic_write_bytes` (a temporary file in the
same directory, then a rename): a reader never sees half a table. JSON is strict
(:mod:`okl_core.jsonio`: numbers that are not finite written as strings, read back as floats).
"""

from __future__ import annotations

import math
import os

from okl_core.jsonio import loads_json, strict_json
from okl_core.state import atomic_write_bytes

# strict_json and loads_json are okl_core.jsonio's, named here too for the commands that import them from here
__all__ = ["markdown_table", "format_value", "mean_std_text", "percent", "write_text", "write_json", "read_json", "strict_json",
           "loads_json"]


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; ``|`` inside cells is escaped."""
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(head), "|" + "---|" * len(head), *(line(r) for r in rows)])


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def format_value(value) -> str:
    """A parameter value in a table: floats to 6 significant digits."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def mean_std_text(mean: float | None, std: float | None = None, scale: float = 1.0, digits: int = 4) -> str:
    """``mean ± std`` (times ``scale``), ``mean`` alone without a std, ``-`` without a mean."""
    if mean is None or _missing(mean):
        return "-"
    text = f"{scale * mean:.{digits}f}"
    return text if std is None or _missing(std) else f"{text} ± {scale * std:.{digits}f}"


def percent(value: float | None, std: float | None = None) -> str:
    """A fraction as percent with two decimals (``17.45 ± 0.07``)."""
    return mean_std_text(value, std, scale=100.0, digits=2)


def write_text(path: str, text: str) -> str:
    """Write ``text`` and a final newline to ``path`` atomically (directories made); returns ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write_bytes(path, (text + "\n").encode())
    return path


def write_json(path: str, value, **dumps) -> str:
    """Write ``value`` as strict JSON (:func:`strict_json`; ``json.dumps`` options in ``dumps``) with :func:`write_text`."""
    return write_text(path, strict_json(value, **dumps))


def read_json(path: str, what: str = "JSON"):
    """The JSON value in ``path``; a file that cannot be read or parsed is a ValueError naming ``what``."""
    try:
        with open(path) as f:
            return loads_json(f.read())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read {what} ({err})") from None
