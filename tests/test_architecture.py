"""The layers hold: no import cycle among rlmx's modules, counting imports made inside functions and
those under `if TYPE_CHECKING:` (a cycle that only type checkers follow is still a tangle of layers)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str], name: str | None = None) -> set[str]:
    """rlmx modules `path` imports anywhere in its body: at top level, inside functions, under
    `if TYPE_CHECKING:`. `from pkg import name` counts as importing `pkg.name` when that is a module,
    else `pkg`. `name`: the module's own name (default: from its path under src/)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = name or module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(nearest_module(alias.name, modules))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in modules else nearest_module(base, modules))
    return {module for module in found if module in modules and module != me}


def nearest_module(name: str, modules: set[str]) -> str:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> dict[str, set[str]]:
    """Every rlmx module and the rlmx modules it imports, the allowed imports included."""
    paths = {module_name(p): p for p in (SRC / "rlmx").rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules) for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_imports_under_type_checking(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from rlmx.a import Thing\n"
        "def f():\n"
        "    import rlmx.b\n",
        encoding="utf-8",
    )
    assert imports_of(module, {"rlmx.a", "rlmx.b", "rlmx.c"}, name="rlmx.m") == {"rlmx.a", "rlmx.b"}


def test_no_import_cycle_among_rlmx_modules() -> None:
    graph = import_graph()
    assert len(graph) > 50
    assert cycles(graph) == []


def test_no_import_cycle_among_rlmx_packages() -> None:
    """One direction between the layers: `context` never imports `sandbox` (the payload it hands the
    sandbox is its own), `typed` never imports the engine, and so on for every top-level package."""
    packages: dict[str, set[str]] = {}
    for module, imported in import_graph().items():
        top = ".".join(module.split(".")[:2])
        packages.setdefault(top, set()).update(
            ".".join(name.split(".")[:2])
            for name in imported
            if not name.startswith(top + ".") and name != top
        )
    assert cycles({name: deps - {"rlmx"} for name, deps in packages.items()}) == []
