"""The tree's structural rules (issue 26), read from the source with ``ast``: nothing is imported.

The layer rules between packages live in ``pyproject.toml`` (``[tool.importlinter]``, run by
``lint-imports`` in ``scripts/test.sh``); these are the rules import-linter does not state, or
states less exactly:

- no file-level import cycle among ``det_jupyter`` modules;
- no module over ``MAX_LINES`` lines in ``det_jupyter``, ``det_agent`` or ``harness``;
- no module imports another package's private module (the rule is in
  ``test_no_module_imports_another_packages_private_module``);
- ``det_jupyter/services/`` keeps at most ``MAX_SERVICES_TOP`` modules at its top, the rest in
  domain subpackages;
- ``det_jupyter.scheduler`` and ``det_jupyter.searcher`` import the standard library only.

Each failure names the files and imports to change.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The top-level packages of the tree and where they live.
ROOTS = {
    "det_jupyter": REPO / "det_jupyter",
    "det_agent": REPO / "det_agent",
    "det_harness": REPO / "harness" / "det_harness",
}
#: Where modules may not grow past ``MAX_LINES`` (STYLE.md aims at 400).
SIZE_CHECKED = ("det_jupyter", "det_agent", "harness")
MAX_LINES = 600
MAX_SERVICES_TOP = 5
#: The packages that import the standard library only (and themselves).
PURE = ("det_jupyter.scheduler", "det_jupyter.searcher")


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to a dotted module name."""

    importer: str
    target: str  # a module of the tree when ``internal``, else the name as written
    line: int
    runtime: bool  # executed when the importer is imported: not in a function, not TYPE_CHECKING
    internal: bool  # the target is a module (file) of the tree


def _module_name(root: str, path: Path) -> str:
    parts = path.relative_to(ROOTS[root]).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((root, *parts))


@cache
def _modules() -> dict[str, Path]:
    """Every module of the tree: dotted name → file (a package is its ``__init__.py``)."""
    found = {}
    for root, top in ROOTS.items():
        for path in sorted(top.rglob("*.py")):
            found[_module_name(root, path)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement, with whether it runs when the module is imported.

    A function's body runs later (or never), and ``if TYPE_CHECKING:`` never; a class body,
    ``try``/``except`` and an ordinary ``if`` at module level run with the module.
    """
    stack: list[tuple[ast.AST, bool]] = [(tree, True)]
    while stack:
        node, runtime = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, runtime
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((child, False) for child in node.body)
            stack.extend((child, runtime) for child in node.orelse)
            continue
        deferred = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        stack.extend((child, runtime and not deferred) for child in ast.iter_child_nodes(node))


def _package_of(name: str) -> str:
    """The package a module's relative imports start from (a package's own name for its
    ``__init__``)."""
    if _modules()[name].name == "__init__.py":
        return name
    return name.rpartition(".")[0]


def _internal(name: str) -> str | None:
    """The longest prefix of ``name`` that is a module of the tree."""
    modules = _modules()
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


@cache
def _imports(name: str) -> tuple[Import, ...]:
    """What module ``name`` imports. ``import a.b`` targets ``a.b``; ``from a import b`` targets
    ``a.b`` when that is a module, else ``a`` (a name defined in ``a``)."""
    modules = _modules()
    tree = ast.parse(modules[name].read_text(encoding="utf-8"), str(modules[name]))
    found: list[Import] = []

    def add(target: str, node: ast.stmt, runtime: bool) -> None:
        resolved = _internal(target)
        if resolved is None:
            found.append(Import(name, target, node.lineno, runtime, internal=False))
        elif resolved != name:
            found.append(Import(name, resolved, node.lineno, runtime, internal=True))

    for node, runtime in _import_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, runtime)
            continue
        if node.level:
            base = _package_of(name).split(".")
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        if module == "__future__":
            continue
        submodules = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in modules]
        for submodule in submodules:
            add(submodule, node, runtime)
        if len(submodules) < len(node.names):
            add(module, node, runtime)
    return tuple(found)


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                connect(node)
    finally:
        sys.setrecursionlimit(limit)

    cycles = []
    for component in components:
        start = min(component)
        # the shortest way back to ``start`` inside the component (breadth first)
        came_from: dict[str, str] = {}
        frontier = [start]
        while start not in came_from:
            following = []
            for node in frontier:
                for succ in sorted(graph[node] & component):
                    if succ not in came_from:
                        came_from[succ] = node
                        following.append(succ)
            frontier = following
        path = [start]
        while path[-1] != start or len(path) == 1:
            path.append(came_from[path[-1]])
        cycles.append(path[::-1])
    return sorted(cycles)


def _runtime_graph(root: str) -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    graph: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], int] = {}
    for name in _modules():
        if not _in(name, root):
            continue
        graph[name] = set()
        for imp in _imports(name):
            if not (imp.runtime and imp.internal and _in(imp.target, root)):
                continue
            # importing a.b.c runs a/__init__ and a/b/__init__ first, unless the importer is
            # inside them (then they are already initialising)
            parts = imp.target.split(".")
            for end in range(1, len(parts) + 1):
                target = ".".join(parts[:end])
                if target in _modules() and not _in(name, target):
                    graph[name].add(target)
                    lines.setdefault((name, target), imp.line)
    return graph, lines


def test_no_file_level_import_cycles_in_det_jupyter() -> None:
    """No module of ``det_jupyter`` reaches itself through imports that run at import time.

    Imports inside functions and under ``if TYPE_CHECKING:`` do not count (they are the way to
    break such a cycle). Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``,
    so those count too, except for the packages the importer itself is in.
    """
    graph, lines = _runtime_graph("det_jupyter")
    cycles = _cycles(graph)
    shown = [
        " -> ".join(f"{a} (l.{lines[a, b]})" for a, b in zip(cycle, cycle[1:], strict=False))
        + f" -> {cycle[-1]}"
        for cycle in cycles
    ]
    assert not cycles, (
        "import cycles (move an import into the function that needs it, or move the shared "
        "names down a layer):\n" + "\n".join(shown)
    )


def test_cycle_finder_reports_the_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": set()}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"x": {"y"}, "y": set()}) == []


def test_import_resolution_runtime_and_relative() -> None:
    """The reading of import statements the rules rest on, on a source of known shape."""
    tree = ast.parse(
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import a\n"
        "else:\n"
        "    import b\n"
        "class C:\n"
        "    import c\n"
        "def f():\n"
        "    import d\n"
        "try:\n"
        "    import e\n"
        "except ImportError:\n"
        "    pass\n"
    )
    runtime = {alias.name: rt for node, rt in _import_nodes(tree) for alias in node.names}
    assert runtime == {
        "os": True, "TYPE_CHECKING": True, "a": False, "b": True, "c": True, "d": False, "e": True,
    }
    # relative imports from a module and from a package's __init__
    assert _package_of("det_jupyter.scheduler._fit") == "det_jupyter.scheduler"
    assert _package_of("det_jupyter.scheduler") == "det_jupyter.scheduler"


def test_no_module_over_the_line_limit() -> None:
    too_long = []
    for top in SIZE_CHECKED:
        for path in sorted((REPO / top).rglob("*.py")):
            count = len(path.read_text(encoding="utf-8").splitlines())
            if count > MAX_LINES:
                too_long.append(f"{path.relative_to(REPO)}: {count} lines")
    assert not too_long, f"modules over {MAX_LINES} lines (split them by concern):\n" + "\n".join(
        too_long
    )


def private_violation(importer: str, target: str) -> str | None:
    """The private package boundary ``importer`` crosses by importing module ``target``, or None.

    A module is private when a component of its dotted name starts with one underscore
    (``_warm_start``; dunder names such as ``__main__`` are not private). A private component
    belongs to the package just above it, and may be imported only from inside that package:
    the importer must be that package or one of its descendants. So
    ``det_jupyter.server_ext._a`` may import ``det_jupyter.server_ext._b`` and
    ``det_jupyter._version`` (packages on its own parent chain), and
    ``det_jupyter.store.metrics._series`` may import ``det_jupyter.store._tables``; but
    ``det_jupyter.services.interactive.commands`` may not import
    ``det_jupyter.services.experiments._warm_start``: it uses what
    ``det_jupyter.services.experiments`` names in its ``__init__``. Every private component
    of the target is checked, so ``a._b.c._d`` needs an importer inside ``a._b.c``.
    """
    parts = target.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:i])
            if not _in(importer, owner):
                return owner
    return None


def test_private_rule_examples() -> None:
    assert private_violation("det_jupyter.server_ext._a", "det_jupyter.server_ext._b") is None
    assert private_violation("det_jupyter.server_ext._a", "det_jupyter._version") is None
    assert private_violation("det_jupyter.server_ext", "det_jupyter.server_ext._b") is None
    assert private_violation("det_jupyter.store.metrics._s", "det_jupyter.store._tables") is None
    assert private_violation("det_agent.__main__", "det_agent._agent") is None
    assert (
        private_violation(
            "det_jupyter.services.interactive.commands",
            "det_jupyter.services.experiments._warm_start",
        )
        == "det_jupyter.services.experiments"
    )
    assert private_violation("det_jupyter.widgets._views", "det_jupyter.searcher._brackets") == (
        "det_jupyter.searcher"
    )
    assert private_violation("a.x", "a._b.c._d") == "a._b.c"
    assert private_violation("a._b.c.e", "a._b.c._d") is None


def _private_imports() -> list[str]:
    found = set()
    for name in sorted(_modules()):
        for imp in _imports(name):
            owner = private_violation(name, imp.target) if imp.internal else None
            if owner is not None:
                found.add(
                    f"{_modules()[name].relative_to(REPO)}:{imp.line}: {name} imports "
                    f"{imp.target} (private to {owner})"
                )
    return sorted(found)


def test_no_module_imports_another_packages_private_module() -> None:
    """Rule in ``private_violation``. Every import counts, in a function or under
    ``TYPE_CHECKING`` too: either way the importer depends on another package's insides."""
    found = _private_imports()
    assert not found, (
        "imports of another package's private module (import what the package's __init__ "
        "names, or make the module public):\n" + "\n".join(found)
    )


def test_services_top_is_domain_packages() -> None:
    top = REPO / "det_jupyter" / "services"
    modules = sorted(p.name for p in top.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_SERVICES_TOP, (
        f"det_jupyter/services/ holds {len(modules)} modules at its top (at most "
        f"{MAX_SERVICES_TOP}; move them into the domain subpackages): {', '.join(modules)}"
    )


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_import_the_standard_library_only(package: str) -> None:
    """Policies and searchers are ``(snapshot, now) -> decisions``: no I/O library, no other
    det_jupyter package (STYLE.md). Every import counts, ``TYPE_CHECKING`` ones too."""
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    found = []
    for name in sorted(_modules()):
        if not _in(name, package):
            continue
        for imp in _imports(name):
            if imp.internal and _in(imp.target, package):
                continue
            if not imp.internal and imp.target.split(".")[0] in allowed:
                continue
            found.append(f"{_modules()[name].relative_to(REPO)}:{imp.line}: {imp.target}")
    assert not found, f"{package} imports beyond the standard library:\n" + "\n".join(found)


def test_rules_catch_violations_in_a_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scans above, run over a small tree with one violation of each kind, find exactly
    those (so a green run means the rules held, not that the scan saw nothing)."""
    files = {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "from .c import x\n",
        "c.py": "from typing import TYPE_CHECKING\nfrom .a import y\nx = 1\n",
        # imports that do not run with the module: no cycle through d
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import e\n",
        "e.py": "def f():\n    from . import d\n",
        "pkg/__init__.py": "from ._priv import z\n",
        "pkg/_priv.py": "from .. import _version\nz = 1\n",
        "_version.py": "",
        "other/__init__.py": "",
        "other/m.py": "from ..pkg import _priv\nimport os, sqlalchemy.orm\n",
        # a cycle through a package's __init__, which runs before its submodule
        "f.py": "from .pkg2.sub import h\n",
        "pkg2/__init__.py": "from .. import f\n",
        "pkg2/sub.py": "from . import h2\nh = 1\n",
        "pkg2/h2.py": "",
    }
    for rel, text in files.items():
        path = tmp_path / "det_jupyter" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOTS", {"det_jupyter": tmp_path / "det_jupyter"})
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    _modules.cache_clear()
    _imports.cache_clear()
    try:
        graph, _ = _runtime_graph("det_jupyter")
        assert _cycles(graph) == [
            ["det_jupyter.a", "det_jupyter.b", "det_jupyter.c", "det_jupyter.a"],
            ["det_jupyter.f", "det_jupyter.pkg2", "det_jupyter.f"],
        ]
        assert _private_imports() == [
            "det_jupyter/other/m.py:1: det_jupyter.other.m imports det_jupyter.pkg._priv "
            "(private to det_jupyter.pkg)"
        ]
        externals = {i.target for i in _imports("det_jupyter.other.m") if not i.internal}
        assert externals == {"os", "sqlalchemy.orm"}
    finally:
        _modules.cache_clear()
        _imports.cache_clear()
