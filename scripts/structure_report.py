"""The structure of ``det_jupyter`` in numbers: modules and lines per package, imports that
cross packages, ``Any`` in each module, SQL statement builders outside ``store/``, and
file-level import cycles.

    python scripts/structure_report.py [ROOT]          # ROOT: the folder holding det_jupyter/
    python scripts/structure_report.py --json [ROOT]

Used for issue 26's before/after figures; it reads source only (``ast``), imports nothing.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

CLIENT_SIDE = {"det_jupyter.client", "det_jupyter.widgets", "det_jupyter.magics", "det_jupyter.cli"}
SQL_BUILDER = re.compile(r"\bsa\.(select|insert|update|delete|text)\(")


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted((root / "det_jupyter").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(name: str, mods: dict[str, Path]) -> bool:
    return mods[name].name == "__init__.py"


def imports(name: str, path: Path, mods: dict[str, Path], *, top_level_only: bool) -> set[str]:
    """The det_jupyter modules ``name`` imports (a ``from pkg import mod`` counts as ``pkg.mod``)."""
    tree = ast.parse(path.read_text())
    package = name if _is_package(name, mods) else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("det_jupyter"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith("det_jupyter"):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    found.add(sub if sub in mods else target)
            elif not top_level_only or isinstance(node, (ast.If, ast.Try, ast.With)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit([n for n in inner if isinstance(n, ast.stmt)] +
                              [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body])

    visit(tree.body)
    found.discard(name)
    return {m for m in found if m in mods}


_SERVICE_DOMAINS: set[str] = set()  # det_jupyter.services.<domain> packages of the tree read


def area(name: str) -> str:
    """The package a module belongs to for these counts (services' domains count apart)."""
    parts = name.split(".")
    if len(parts) >= 3 and ".".join(parts[:3]) in _SERVICE_DOMAINS:
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def report(root: Path) -> dict:
    mods = modules(root)
    _SERVICE_DOMAINS.clear()
    _SERVICE_DOMAINS.update(n for n in mods if n.count(".") == 2 and n.startswith("det_jupyter.services.")
                            and _is_package(n, mods))
    per_pkg: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    any_count: dict[str, int] = {}
    sql_outside_store = Counter()
    for name, path in mods.items():
        text = path.read_text()
        pkg = area(name)
        per_pkg[pkg][0] += 1
        per_pkg[pkg][1] += text.count("\n")
        any_count[name] = len(re.findall(r"\bAny\b", text)) - text.count("import Any")
        if not name.startswith("det_jupyter.store"):
            n = len(SQL_BUILDER.findall(text))
            if n:
                sql_outside_store[area(name)] += n
    graph = {n: imports(n, p, mods, top_level_only=True) for n, p in mods.items()}
    crossing = Counter()
    for n, targets in graph.items():
        for m in targets:
            if area(n) != area(m):
                crossing[f"{area(n)} -> {area(m)}"] += 1
    services_top = [n for n in mods if n.count(".") == 2 and n.startswith("det_jupyter.services.")
                    and not _is_package(n, mods)]
    return {
        "modules": len(mods),
        "packages": {k: {"modules": v[0], "lines": v[1]} for k, v in sorted(per_pkg.items())},
        "services_top_level_modules": sorted(services_top),
        "largest_modules": sorted(((p.read_text().count("\n"), n) for n, p in mods.items()), reverse=True)[:5],
        "import_edges_across_packages": sum(crossing.values()),
        "rm_imports_services": sum(v for k, v in crossing.items()
                                   if k.startswith("det_jupyter.rm") and "services" in k.split(" -> ")[1]),
        "server_ext_imports_store": sum(v for k, v in crossing.items()
                                        if k.startswith("det_jupyter.server_ext") and k.endswith("det_jupyter.store")),
        "client_side_imports_services": sum(
            v for k, v in crossing.items()
            if k.split(" -> ")[0] in CLIENT_SIDE and k.split(" -> ")[1].startswith("det_jupyter.services")),
        "sql_builders_outside_store": dict(sql_outside_store.most_common()),
        "sql_builders_outside_store_total": sum(sql_outside_store.values()),
        "any_total": sum(any_count.values()),
        "file_level_import_cycles": cycles(graph),
    }


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    args = [a for a in argv if a != "--json"]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    rep = report(root)
    if as_json:
        print(json.dumps(rep, indent=1))
        return 0
    print(f"{rep['modules']} modules")
    for pkg, v in rep["packages"].items():
        print(f"  {pkg:45} {v['modules']:3} modules {v['lines']:6} lines")
    print(f"services/ top-level modules: {len(rep['services_top_level_modules'])}")
    print(f"largest modules: {rep['largest_modules']}")
    print(f"import edges across packages: {rep['import_edges_across_packages']}")
    print(f"rm -> services imports: {rep['rm_imports_services']}; server_ext -> store: "
          f"{rep['server_ext_imports_store']}; client side -> services: {rep['client_side_imports_services']}")
    print(f"SQL statement builders outside store/: {rep['sql_builders_outside_store_total']} "
          f"{rep['sql_builders_outside_store']}")
    print(f"'Any' occurrences: {rep['any_total']}")
    print(f"file-level import cycles: {len(rep['file_level_import_cycles'])}")
    for c in rep["file_level_import_cycles"]:
        print("   ", " <-> ".join(c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
