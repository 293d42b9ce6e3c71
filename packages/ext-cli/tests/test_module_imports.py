"""The entry module `_main` (the click group) imports the subcommand modules; none of them imports it back, not even
inside a function or under TYPE_CHECKING (a deferred import still ties the two modules into a loop). What they
share (the context state, how a command runs) lives in `_context`."""

from __future__ import annotations

import ast
from pathlib import Path

import ext.cli

PACKAGE = Path(ext.cli.__file__).parent
ENTRY = "_main"
# The package's own front doors may import the entry module: they exist to expose it.
FRONT_DOORS = {"__init__", "__main__"}


def imported_siblings(source: str) -> set[str]:
    """The modules of ext.cli that `source` (a module of it) imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                found.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
            elif node.level == 0 and node.module == "ext.cli":
                found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module and node.module.startswith("ext.cli."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("ext.cli."))
    return found


def test_the_finder_sees_deferred_and_type_checking_imports() -> None:
    source = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ._main import State
def command():
    from . import _main
    import ext.cli._chat
    from ext.cli._tools import tool
"""
    assert imported_siblings(source) == {"_main", "_chat", "_tools"}


def test_no_subcommand_module_imports_the_entry_module() -> None:
    modules = sorted(p for p in PACKAGE.glob("*.py") if p.stem not in FRONT_DOORS | {ENTRY})
    assert {p.stem for p in modules} >= {"_eval", "_chat", "_context"}
    offenders = [p.name for p in modules if ENTRY in imported_siblings(p.read_text(encoding="utf-8"))]
    assert offenders == [], f"{offenders} import {ENTRY}: move what both need into its own module (like _context)"
    assert "_context" in imported_siblings((PACKAGE / "_eval.py").read_text(encoding="utf-8"))
