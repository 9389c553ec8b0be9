"""The layers of DESIGN.md and the README's "Layout": imports point down only.

    pipelines/        CLIs (and the plumbing they share)  -> any package below
    transforms/       Beam PTransforms and DoFns           -> okl_core
    okl_experiments/  experiments: params, sweeps, figures -> okl_core (dask, matplotlib)
    okl_core/         numpy/scipy learners                 -> nothing of okl, no Beam, no Dask

and no CLI module of pipelines imports another one. Every import counts: at module level, in
functions, under conditions, and ``importlib.import_module`` / ``__import__`` of a constant name.
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
    "transforms": {"okl_experiments", "pipelines", "dask", "distributed"},  # of okl's packages: okl_core only
}


def _dynamic_import(node: ast.AST) -> str | None:
    """The constant module name of an ``importlib.import_module("...")`` or ``__import__("...")`` call."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return node.args[0].value if called in ("import_module", "__import__") else None


def _imports(path: pathlib.Path) -> set[str]:
    """Every module name imported anywhere in ``path`` (top level, functions, conditionals, constant dynamic imports)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (name := _dynamic_import(node)) is not None:
            names.add(name)
    return names


def test_imports_are_seen_wherever_they_are(tmp_path):
    """The checks below would pass vacuously if an import in a function or a dynamic one went unseen."""
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n"
        "def plot():\n"
        "    from okl_experiments.metrics import headline\n"
        "    if True:\n"
        "        import pipelines.common as c\n"
        "class K:\n"
        "    def m(self):\n"
        "        try:\n"
        "            import dask.distributed\n"
        "        except ImportError:\n"
        "            pass\n"
        "        return importlib.import_module('okl_experiments.text'), __import__('distributed'), importlib.import_module(name)\n"
        "from . import sibling\n"
    )
    assert _imports(module) == {"os", "okl_experiments.metrics", "okl_experiments.metrics.headline", "pipelines.common", "dask.distributed",
                                "okl_experiments.text", "distributed"}


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


_PRELUDE = (
    "import importlib, logging, pkgutil, sys\n"
    "def import_all(pkg):\n"
    "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
    "        importlib.import_module(m.name)\n"
    "def loaded(names):\n"
    "    return sorted({k.split('.')[0] for k in sys.modules} & set(names))\n"
)
"""Code run first in a fresh interpreter: ``import_all(package)`` imports every module of it,
``loaded(names)`` says which of the top-level ``names`` are then imported."""


def _fresh_python(code: str) -> str:
    """What ``code`` prints, run after :data:`_PRELUDE` in a new interpreter at the repository root."""
    out = subprocess.run([sys.executable, "-c", _PRELUDE + code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_every_transforms_module_loads_nothing_of_okl_but_okl_core():
    """What the static check cannot see (an import by a computed name): transforms stand on okl_core alone."""
    assert _fresh_python("import transforms\nimport_all(transforms)\nprint(loaded(['okl_experiments', 'pipelines', 'dask', 'distributed']))\n") == "[]"


def test_importing_every_library_module_loads_nothing_above_it_and_changes_no_logging():
    code = (
        "root = logging.getLogger(); before = (list(root.filters), list(root.handlers), root.level)\n"
        "import okl_core, okl_experiments\n"
        "import_all(okl_core)\n"
        "import_all(okl_experiments)\n"
        "for name in okl_core.learner_names():\n"
        "    okl_core.learner_class(name)\n"
        "bad = loaded(['apache_beam', 'dask', 'distributed', 'transforms', 'pipelines', 'matplotlib'])\n"
        "import pipelines\n"
        "changed = (list(root.filters), list(root.handlers), root.level) != before\n"
        "print(bad, changed)\n"
    )
    assert _fresh_python(code) == "[] False"


PACKAGES = ("okl_core", "okl_experiments", "transforms", "pipelines")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_only(node: ast.If) -> bool:
    """``if TYPE_CHECKING:``: imports for annotations only, never run."""
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: module level, in functions, in conditionals (not ``if TYPE_CHECKING``)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.If) and _type_only(node):
            children = list(node.orelse)
        stack.extend(children)
    return found


def _import_graph() -> dict[str, set[str]]:
    """Module -> the okl modules it imports (``from pkg import sub`` counts the submodule ``pkg.sub``)."""
    paths = {_module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in paths)
                continue
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                edges.add(target if target in paths else base)
        graph[name] = {e for e in edges if e in paths and e != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules larger than one (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest cycle through the group's first module, as a list ``[a, b, ..., a]``."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & group):
                if nxt == start:
                    return paths[node] + [start]
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group always has one


def test_no_import_circles():
    """No module imports (at module level or inside a function) a module that imports it back, by any path."""
    cycles = [" -> ".join(cycle) for cycle in _cycles(_import_graph())]
    assert cycles == [], "import circles:\n" + "\n".join(cycles)


def test_the_circle_finder_finds_a_circle_and_only_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
