"""ext-core's modules import one another without a loop: no module, at any depth, imports one that imports it back
(imports inside functions and under TYPE_CHECKING count too: a deferred import still ties the two modules)."""

from __future__ import annotations

import ast
from pathlib import Path

import ext.core

PACKAGE = Path(ext.core.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py"))


def _imports(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module and node.module.startswith("ext.core."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("ext.core."))
    return found & set(MODULES)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_loop() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_of_ext_core_imports_itself_back() -> None:
    graph = {m: _imports(m) - {m} for m in MODULES if m != "__init__"}
    assert _cycle(graph) is None
    assert graph["_builder"] >= {"_pipeline", "_middleware", "_cache", "_tool_loop"}  # the parser sees imports
