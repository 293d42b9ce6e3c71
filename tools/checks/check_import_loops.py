"""Fail when a distribution's modules import one another in a loop; exits 1 on any.

Usage (Python 3.10+)::

    python tools/checks/check_import_loops.py            # the repository
    python tools/checks/check_import_loops.py --root DIR # another checkout (the tests use a temporary tree)

For each distribution (every ``packages/<folder>/`` with a ``pyproject.toml``) it builds the graph of its own
modules under ``src/``: ``ext.x._a`` -> ``ext.x._b`` when ``_a`` imports ``_b``, absolutely or relatively
(``from . import _b`` too). Every import counts, wherever it stands: inside a function and under ``if
TYPE_CHECKING:`` as well, because a deferred import still ties the two modules (neither can be read, tested or
moved without the other). A package is its ``__init__``: ``from ext.x import Y`` is an edge to ``ext.x``, so a
module that imports its own package's ``__init__``, which imports it back, is a loop. Importing a submodule does
not count as importing its parent packages (Python runs their ``__init__`` first, but they are normally already
imported: that is how packages work, not a tie between modules).

Each loop is printed as a chain, with the ``file:line`` of the import that makes each edge (and whether it is lazy
or type-only), then what to do. A loop is reported once per group of modules that reach one another (a strongly
connected component): the shortest cycle through its first module, then through each module no reported cycle
passes yet, so a group of five tangled modules reads as a few short chains rather than every path.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from _workspace import python_files, run_check

REPO_ROOT = Path(__file__).resolve().parents[2]
_FIX = (
    "break the loop: move what both sides need into a module of its own that imports neither, or pass it in "
    "(a parameter, a callback, a Protocol the callee declares) instead of importing it"
)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: Path
    line: int
    kind: str  # "" (at import time), "lazy" (inside a function) or "type-only" (under TYPE_CHECKING)

    def render(self, root: Path) -> str:
        try:
            shown = self.path.relative_to(root)
        except ValueError:
            shown = self.path
        how = f" ({self.kind})" if self.kind else ""
        return f"{shown}:{self.line}: {self.source} imports {self.target}{how}"


@dataclass(frozen=True)
class Loop:
    distribution: str
    edges: tuple[Edge, ...]

    def render(self, root: Path) -> str:
        chain = " -> ".join([*(e.source for e in self.edges), self.edges[0].source])
        lines = [f"{self.distribution}: import loop {chain}"]
        lines += [f"  {edge.render(root)}" for edge in self.edges]
        lines.append(f"  fix: {_FIX}")
        return "\n".join(lines)


def modules_of(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``src`` (a package is its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for path in python_files(src):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement with how it runs: "" at import time, "lazy" in a function, "type-only"."""

    def visit(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, kind
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, kind or "lazy")
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), "type-only")
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                yield from visit(child, kind)

    yield from visit(tree, "")


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str | None:
    """The absolute name of ``from <level dots><name> import ...`` in ``module`` (None when it climbs out)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(package) - 1:
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: Mapping[str, Path]) -> set[str]:
    """The modules of this distribution one import statement ties ``module`` to."""

    def nearest(dotted: str) -> str | None:
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in known:
                return candidate
        return None

    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = nearest(alias.name)
            if target is not None:
                found.add(target)
        return found
    base = node.module if node.level == 0 else _resolve_relative(module, is_package, node.level, node.module)
    if not base:
        return found
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        target = submodule if alias.name != "*" and submodule in known else nearest(base)
        if target is not None:
            found.add(target)
    return found


def graph_of(src: Path) -> dict[str, dict[str, Edge]]:
    """module -> {imported module -> the first import that makes the edge}, for one ``src`` folder."""
    known = modules_of(src)
    graph: dict[str, dict[str, Edge]] = {m: {} for m in known}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, kind in _imports(tree):
            for target in _targets(node, module, is_package, known):
                if target == module:
                    continue
                edge = Edge(module, target, path, node.lineno, kind)
                previous = graph[module].get(target)
                if previous is None or (edge.line, edge.kind) < (previous.line, previous.kind):
                    graph[module][target] = edge
    return graph


def _components(graph: Mapping[str, Mapping[str, Edge]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return sorted(found)


def _shortest_cycle(graph: Mapping[str, Mapping[str, Edge]], start: str, within: set[str]) -> list[str]:
    """The shortest cycle from ``start`` back to itself inside one component (breadth first, sorted neighbours)."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph[node]):
            if target not in within:
                continue
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return path[::-1]
            if target not in previous:
                previous[target] = node
                queue.append(target)
    raise AssertionError(f"{start} is in a component but on no cycle")  # a component always has one


def loops_in(distribution: str, graph: Mapping[str, Mapping[str, Edge]]) -> list[Loop]:
    loops: list[Loop] = []
    for component in _components(graph):
        members = set(component)
        covered: set[str] = set()
        for start in component:
            if start in covered:
                continue
            cycle = _shortest_cycle(graph, start, members)
            covered.update(cycle)
            edges = tuple(graph[a][b] for a, b in zip(cycle, [*cycle[1:], cycle[0]], strict=True))
            loops.append(Loop(distribution, edges))
    return loops


def check(root: Path) -> list[Loop]:
    loops: list[Loop] = []
    packages = root / "packages"
    for folder in sorted(packages.iterdir()) if packages.is_dir() else []:
        if (folder / "pyproject.toml").is_file() and (folder / "src").is_dir():
            loops.extend(loops_in(folder.name, graph_of(folder / "src")))
    return loops


def _count(root: Path) -> int:
    return sum(1 for p in (root / "packages").iterdir() if (p / "pyproject.toml").is_file())


def main(argv: list[str] | None = None) -> int:
    return run_check(
        argv, __doc__, check, "import loop(s)", lambda root: f"no import loops ({_count(root)} distributions checked)"
    )


if __name__ == "__main__":
    sys.exit(main())
