"""tools/checks/check_private_imports.py: it catches imports of another distribution's private modules and names in a
planted tree, leaves a distribution's own private imports alone, and passes on the repository."""

from __future__ import annotations

from pathlib import Path

import check_private_imports as cpi
import pytest
from _workspace import REPO_ROOT


def _write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Two distributions: ext-core (exports Runtime from its private _runtime) and ext-models-openai."""
    for folder in ("ext-core", "ext-models-openai"):
        _write(tmp_path, f"packages/{folder}/pyproject.toml", f'[project]\nname = "{folder}"\n')
    _write(tmp_path, "packages/ext-core/src/ext/core/_runtime.py", "class Runtime: ...\nclass Hidden: ...\n")
    _write(
        tmp_path,
        "packages/ext-core/src/ext/core/__init__.py",
        'from ._runtime import Runtime\n\n__all__ = ["Runtime"]\n',
    )
    # Its own private modules are the distribution's business, in src and tests alike.
    _write(tmp_path, "packages/ext-core/tests/test_runtime.py", "from ext.core._runtime import Hidden\n")
    _write(
        tmp_path,
        "packages/ext-models-openai/src/ext/models/openai/_client.py",
        "from ext.core import Runtime\nfrom ext.models.openai._models import X\n",
    )
    return tmp_path


def test_clean_tree_passes(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cpi.check(tree) == []
    assert cpi.main(["--root", str(tree)]) == 0
    assert "2 distributions checked" in capsys.readouterr().out


def test_planted_violations_are_caught_with_file_line_and_public_name(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(
        tree,
        "packages/ext-models-openai/src/ext/models/openai/_bad.py",
        '"""Doc."""\n\nfrom ext.core._runtime import Hidden, Runtime\n',
    )
    _write(tree, "packages/ext-models-openai/tests/test_bad.py", "import ext.core._runtime\n")
    _write(tree, "tools/bench/bench_x.py", "x = 1\nfrom ext.core import _runtime\n")
    _write(tree, "tests-integration/test_y.py", "def f() -> None:\n    from ext.core._runtime import Runtime\n")

    assert cpi.main(["--root", str(tree)]) == 1
    out = capsys.readouterr().out.splitlines()

    assert out == [
        "packages/ext-models-openai/src/ext/models/openai/_bad.py:3: ext-models-openai imports from "
        "ext.core._runtime, private to ext-core; use `from ext.core import Runtime`; Hidden is not public in "
        "ext.core: export it from ext.core (`__all__`) or keep the use inside ext-core",
        "packages/ext-models-openai/tests/test_bad.py:1: ext-models-openai imports ext.core._runtime, private to "
        "ext-core; import the public names you need from ext.core instead",
        "tests-integration/test_y.py:2: code outside any distribution imports from ext.core._runtime, private to "
        "ext-core; use `from ext.core import Runtime`",
        "tools/bench/bench_x.py:2: code outside any distribution imports _runtime from ext.core, private to "
        "ext-core; import the public names you need from ext.core instead",
    ]


def test_distribution_names_come_from_the_folders(tree: Path) -> None:
    _write(tree, "packages/ext-tools-mcp/pyproject.toml", '[project]\nname = "ext-tools-mcp"\n')
    _write(tree, "packages/ext-core/src/ext/core/_uses_mcp.py", "from ext.tools.mcp._connection import C\n")

    (finding,) = cpi.check(tree)

    assert finding.render(tree).startswith(
        "packages/ext-core/src/ext/core/_uses_mcp.py:1: ext-core imports from ext.tools.mcp._connection, private "
        "to ext-tools-mcp;"
    )


def test_the_import_name_is_the_package_under_src_not_the_folder_name(tree: Path) -> None:
    # packages/ext-models-llama-cpp imports as ext.models.llama_cpp (an underscore, not a dot).
    _write(tree, "packages/ext-models-llama-cpp/pyproject.toml", '[project]\nname = "ext-models-llama-cpp"\n')
    _write(tree, "packages/ext-models-llama-cpp/src/ext/models/llama_cpp/__init__.py", "")
    _write(tree, "packages/ext-core/src/ext/core/_uses_llama.py", "from ext.models.llama_cpp._client import C\n")

    (finding,) = cpi.check(tree)

    assert finding.render(tree).startswith(
        "packages/ext-core/src/ext/core/_uses_llama.py:1: ext-core imports from ext.models.llama_cpp._client, "
        "private to ext-models-llama-cpp;"
    )


def test_the_repository_has_no_private_imports_across_distributions() -> None:
    findings = cpi.check(REPO_ROOT)
    assert [f.render(REPO_ROOT) for f in findings] == []
