"""tools/checks/check_import_loops.py: on planted trees it finds loops made by every kind of import (absolute,
relative, `from . import x`, in a function, under TYPE_CHECKING, through a package's `__init__`), names the file and
line of each edge, leaves loop-free trees and other distributions alone, and reports what the repository holds."""

from __future__ import annotations

from pathlib import Path

import check_import_loops as cil
import pytest
from _workspace import REPO_ROOT


def _write(root: Path, relative: str, text: str = "") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _dist(root: Path, folder: str = "ext-core") -> Path:
    _write(root, f"packages/{folder}/pyproject.toml", f'[project]\nname = "{folder}"\n')
    return root / "packages" / folder / "src"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """ext-core with three modules that import one another in a line, not a loop: `_a` -> `_b` -> `_c`."""
    src = _dist(tmp_path)
    _write(src, "ext/core/__init__.py", "from ext.core._a import A\n\n__all__ = ['A']\n")
    _write(src, "ext/core/_a.py", "from ext.core._b import B\n\nA = B\n")
    _write(src, "ext/core/_b.py", "from ._c import C\n\nB = C\n")
    _write(src, "ext/core/_c.py", "import json\n\nC = json\n")
    return tmp_path


def _chains(root: Path) -> list[str]:
    return [loop.render(root).splitlines()[0] for loop in cil.check(root)]


def test_a_tree_without_loops_passes(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cil.check(tree) == []
    assert cil.main(["--root", str(tree)]) == 0
    assert "no import loops (1 distributions checked)" in capsys.readouterr().out


def test_a_loop_is_printed_as_a_chain_with_each_edges_file_and_line(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tree, "packages/ext-core/src/ext/core/_c.py", '"""Doc."""\n\nfrom ext.core._a import A\n')

    assert cil.main(["--root", str(tree)]) == 1
    out = capsys.readouterr().out.splitlines()

    assert out == [
        "ext-core: import loop ext.core._a -> ext.core._b -> ext.core._c -> ext.core._a",
        "  packages/ext-core/src/ext/core/_a.py:1: ext.core._a imports ext.core._b",
        "  packages/ext-core/src/ext/core/_b.py:1: ext.core._b imports ext.core._c",
        "  packages/ext-core/src/ext/core/_c.py:3: ext.core._c imports ext.core._a",
        f"  fix: {cil._FIX}",
    ]


@pytest.mark.parametrize(
    ("back", "kind"),
    [
        ("import ext.core._a\n", ""),
        ("import ext.core._a.inner\n", ""),  # a name inside the module: still the module
        ("from . import _a\n", ""),
        ("from ._a import A\n", ""),
        ("from ext.core import _a\n", ""),
        ("def f() -> None:\n    from ext.core._a import A\n", " (lazy)"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ext.core._a import A\n", " (type-only)"),
        ("import typing\nif typing.TYPE_CHECKING:\n    from . import _a\n", " (type-only)"),
        ("class K:\n    def m(self) -> None:\n        import ext.core._a\n", " (lazy)"),
    ],
)
def test_every_kind_of_import_makes_an_edge(tree: Path, back: str, kind: str) -> None:
    _write(tree, "packages/ext-core/src/ext/core/_c.py", back)

    (loop,) = cil.check(tree)
    assert [(e.source, e.target) for e in loop.edges] == [
        ("ext.core._a", "ext.core._b"),
        ("ext.core._b", "ext.core._c"),
        ("ext.core._c", "ext.core._a"),
    ]
    assert loop.render(tree).splitlines()[3].endswith(f"ext.core._c imports ext.core._a{kind}")


@pytest.mark.parametrize("back", ["from ext.core import A\n", "from .. import core\n", "import ext.core\n"])
def test_an_import_of_the_package_is_an_edge_to_its_init(tree: Path, back: str) -> None:
    # ext.core's __init__ imports _a, which reaches _c: _c importing the package closes the loop.
    _write(tree, "packages/ext-core/src/ext/core/_c.py", back)

    assert _chains(tree) == ["ext-core: import loop ext.core -> ext.core._a -> ext.core._b -> ext.core._c -> ext.core"]


def test_a_relative_import_that_climbs_out_of_the_tree_is_no_edge(tree: Path) -> None:
    _write(tree, "packages/ext-core/src/ext/core/_c.py", "from .... import nothing\n")

    assert cil.check(tree) == []


def test_a_submodule_import_is_not_an_import_of_its_parents(tmp_path: Path) -> None:
    src = _dist(tmp_path, "ext-testing")
    _write(src, "ext/testing/servers/__init__.py", "from ext.testing.servers.openai import S\n")
    _write(src, "ext/testing/servers/openai.py", "from ext.testing.servers._base import B\n\nS = B\n")
    _write(src, "ext/testing/servers/_base.py", "B = 1\n")

    assert cil.check(tmp_path) == []


def test_an_if_else_under_type_checking_is_not_type_only(tree: Path) -> None:
    _write(
        tree,
        "packages/ext-core/src/ext/core/_c.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\nelse:\n    from ._a import A\n",
    )

    (loop,) = cil.check(tree)
    assert loop.edges[-1].kind == "" and loop.edges[-1].line == 5


def test_the_first_import_of_a_pair_is_named(tree: Path) -> None:
    _write(
        tree,
        "packages/ext-core/src/ext/core/_c.py",
        "def f() -> None:\n    from ._a import A\n\n\nfrom ext.core._a import A\n",
    )

    (loop,) = cil.check(tree)
    assert (loop.edges[-1].line, loop.edges[-1].kind) == (2, "lazy")


def test_tangled_modules_read_as_short_chains_covering_each(tmp_path: Path) -> None:
    # One group: _hub imports _x and _y, each imports _hub back, and _y also imports _x.
    src = _dist(tmp_path)
    _write(src, "ext/core/_hub.py", "from . import _x, _y\n")
    _write(src, "ext/core/_x.py", "from . import _hub\n")
    _write(src, "ext/core/_y.py", "from . import _hub, _x\n")

    assert _chains(tmp_path) == [
        "ext-core: import loop ext.core._hub -> ext.core._x -> ext.core._hub",
        "ext-core: import loop ext.core._y -> ext.core._hub -> ext.core._y",
    ]


def test_each_distribution_is_its_own_graph(tmp_path: Path) -> None:
    # ext-models-openai imports ext.core, which is another distribution's: no edge, so no loop across the two.
    core = _dist(tmp_path)
    _write(core, "ext/core/_a.py", "from ext.models.openai import C\n")
    openai = _dist(tmp_path, "ext-models-openai")
    _write(openai, "ext/models/openai/__init__.py", "from ext.models.openai._client import C\n")
    _write(openai, "ext/models/openai/_client.py", "from ext.core._a import X\n\nC = X\n")
    _write(openai, "ext/models/openai/_loop.py", "import ext.models.openai._loop2\n")
    _write(openai, "ext/models/openai/_loop2.py", "import ext.models.openai._loop\n")

    assert _chains(tmp_path) == [
        "ext-models-openai: import loop ext.models.openai._loop -> ext.models.openai._loop2 -> ext.models.openai._loop"
    ]


def test_the_repository_loops_are_the_known_ones() -> None:
    # A check that sees nothing passes too: this proves it reads the real tree (ext-core's __init__ imports its
    # modules), and lists what the repository holds today. Each loop here is being fixed on its own branch; when
    # one is fixed, remove it from this list.
    graph = cil.graph_of(REPO_ROOT / "packages" / "ext-core" / "src")
    assert len(graph["ext.core"]) > 10
    known = {
        "ext-cli: import loop ext.cli._eval -> ext.cli._main -> ext.cli._eval",
        "ext-runtime-grpc: import loop ext.runtime.grpc._autogen_service -> ext.runtime.grpc._gateway -> "
        "ext.runtime.grpc._autogen_service",
    }
    assert set(_chains(REPO_ROOT)) <= known
