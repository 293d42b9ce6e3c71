"""tools/checks/check_declared_imports.py: on planted trees it catches third-party and ext imports a distribution
does not declare (at any depth, extras counting), names the file, line and the requirement to add, maps import names
to distributions as the installed packages' metadata does, and passes on the repository."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import check_declared_imports as cdi
import pytest
from _workspace import REPO_ROOT, canonical_name

MakePackage = Callable[..., Path]


def _write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def tree(tmp_path: Path, make_package: MakePackage) -> Path:
    """ext-core (pydantic) and ext-tools-mcp (ext-core, mcp; an extra `http` with httpx2), each importing only what it
    declares."""
    make_package("ext-core", deps=["pydantic>=2.9,<3"])
    make_package(
        "ext-tools-mcp",
        deps=["ext-core>=0.1,<0.2", "mcp>=2.3,<3", "pyyaml>=6,<7"],
        optional={"http": ["httpx2>=2.10,<3"]},
    )
    _write(tmp_path, "packages/ext-core/src/ext/core/_m.py", "import json\nfrom pydantic import BaseModel\n")
    _write(
        tmp_path,
        "packages/ext-tools-mcp/src/ext/tools/mcp/_c.py",
        "from __future__ import annotations\n\nimport os.path\n\nimport mcp.types\nimport yaml\n\n"
        "from ext.core import X\nfrom ext.tools.mcp._other import Y\n\n\ndef f() -> None:\n    import httpx2\n",
    )
    return tmp_path


def test_a_tree_that_declares_what_it_imports_passes(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cdi.check(tree) == []
    assert cdi.main(["--root", str(tree)]) == 0
    assert "every import is declared (2 distributions checked)" in capsys.readouterr().out


def test_undeclared_imports_are_named_with_file_line_and_the_requirement_to_add(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(
        tree,
        "packages/ext-tools-mcp/src/ext/tools/mcp/_bad.py",
        '"""Doc."""\n\nfrom typing import TYPE_CHECKING\n\nimport anyio\n\nif TYPE_CHECKING:\n'
        "    from google.protobuf import message\n\n\ndef f() -> None:\n    import zz_not_installed_anywhere.sub\n",
    )
    _write(
        tree,
        "packages/ext-core/src/ext/core/_bad.py",
        "try:\n    from ext.tools.mcp import McpWorkbench\nexcept ImportError:\n    pass\n",
    )

    assert cdi.main(["--root", str(tree)]) == 1
    out = capsys.readouterr().out.splitlines()

    def fix(name: str, dist: str) -> str:
        return (
            f"add {name} with a range (>=lowest that works,<next major{cdi._installed(name)}) to "
            f"[project].dependencies in packages/{dist}/pyproject.toml, or to an extra if the import is optional"
        )

    assert out == [
        "packages/ext-core/src/ext/core/_bad.py:2: ext-core imports ext.tools.mcp, from ext-tools-mcp, which it does "
        'not declare: add "ext-tools-mcp>=0.1,<0.2" to [project].dependencies in packages/ext-core/pyproject.toml (or '
        "to an extra if the import is optional)",
        "packages/ext-tools-mcp/src/ext/tools/mcp/_bad.py:5: ext-tools-mcp imports anyio, which none of its "
        f"requirements provides: {fix('anyio', 'ext-tools-mcp')}",
        "packages/ext-tools-mcp/src/ext/tools/mcp/_bad.py:8: ext-tools-mcp imports google.protobuf, which none of its "
        f"requirements provides: {fix('protobuf', 'ext-tools-mcp')}",
        "packages/ext-tools-mcp/src/ext/tools/mcp/_bad.py:12: ext-tools-mcp imports zz_not_installed_anywhere.sub, "
        "which none of its requirements provides: add zz-not-installed-anywhere with a range (>=lowest that "
        "works,<next major) to [project].dependencies in packages/ext-tools-mcp/pyproject.toml, or to an extra if "
        "the import is optional",
    ]


def test_a_requirement_of_a_requirement_is_not_enough(tree: Path) -> None:
    # mcp depends on anyio and httpx2: ext-tools-mcp still declares what it imports itself.
    _write(tree, "packages/ext-tools-mcp/src/ext/tools/mcp/_x.py", "from anyio import Event\n")

    (finding,) = cdi.check(tree)
    assert "imports anyio, which none of its requirements provides" in finding.message


def test_an_ext_import_nobody_ships_is_named(tree: Path) -> None:
    _write(tree, "packages/ext-core/src/ext/core/_x.py", "import ext.models.nothing\n")

    (finding,) = cdi.check(tree)
    assert finding.message == "ext-core imports ext.models.nothing, which no distribution in packages/ provides"


def test_test_only_groups_do_not_count(tmp_path: Path, make_package: MakePackage) -> None:
    make_package("ext-core", groups={"test": ["pytest>=8"]})
    _write(tmp_path, "packages/ext-core/src/ext/core/_t.py", "import pytest\n")

    (finding,) = cdi.check(tmp_path)
    assert "imports pytest, which none of its requirements provides" in finding.message


def test_the_import_name_of_a_distribution_comes_from_its_source(tmp_path: Path, make_package: MakePackage) -> None:
    # ext-models-llama-cpp imports as ext.models.llama_cpp, not ext.models.llama.cpp.
    make_package("ext-models-llama-cpp", leaf="ext/models/llama_cpp")
    make_package("ext-cli", deps=["ext-models-llama-cpp>=0.1,<0.2"])
    _write(tmp_path, "packages/ext-cli/src/ext/cli/_m.py", "from ext.models.llama_cpp import default_model_path\n")

    assert cdi.check(tmp_path) == []


@pytest.mark.parametrize(
    ("module", "distribution"),
    [
        ("yaml", "pyyaml"),
        ("google.protobuf.message", "protobuf"),
        ("grpc.aio", "grpcio"),
        ("grpc_health.v1", "grpcio-health-checking"),
        ("opentelemetry.trace", "opentelemetry-api"),
        ("opentelemetry.sdk.trace", "opentelemetry-sdk"),
        ("langchain_core.tools", "langchain-core"),
        ("azure.core.credentials", "azure-core"),
        ("httpx2", "httpx2"),
    ],
)
def test_import_names_map_to_their_distribution(module: str, distribution: str) -> None:
    assert cdi.provider(module) == distribution


def _repository_imports() -> set[str]:
    found: set[str] = set()
    for src in sorted(REPO_ROOT.glob("packages/*/src")):
        for path in src.rglob("*.py"):
            for _line, _shown, module in cdi._imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("__future__", "ext"):
                    found.add(module)
    return found


def test_the_mapping_agrees_with_the_installed_packages_metadata() -> None:
    # For each module the repository imports that is installed where this runs, the distribution the check names
    # is one that installs that top-level name (importlib.metadata's own answer). pytest always is.
    installed = importlib.metadata.packages_distributions()
    checked = []
    for module in sorted(_repository_imports()):
        top = module.split(".")[0]
        if top not in installed or importlib.util.find_spec(top) is None:
            continue
        owners = {canonical_name(d) for d in installed[top]}
        assert cdi.provider(module) in owners, (module, owners)
        checked.append(module)
    assert "pytest" in checked


def test_the_repository_declares_what_it_imports() -> None:
    findings = cdi.check(REPO_ROOT)
    assert [f.render(REPO_ROOT) for f in findings] == []
