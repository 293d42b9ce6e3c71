from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import changed_packages as cp
import pytest
from _workspace import Package, dependants_closure, dependencies_closure, dependency_graph, discover

MakePackage = Callable[..., Path]


def _pkg(name: str, *deps: str, test: tuple[str, ...] = ()) -> Package:
    return Package(name=name, folder=f"packages/{name}", deps=frozenset(deps), test_deps=frozenset(test))


@pytest.fixture
def packages() -> dict[str, Package]:
    pkgs = [
        _pkg("ext-core"),
        _pkg("ext-testing", "ext-core"),
        _pkg("ext-models-openai", "ext-core", test=("ext-testing",)),
        _pkg("ext-tools-langchain", "ext-core", "ext-models-openai"),
        _pkg("ext-runtime-grpc", "ext-core"),
        _pkg("ext-runtime-local", "ext-runtime-grpc"),
    ]
    return {p.name: p for p in pkgs}


ALL = [
    "ext-core",
    "ext-models-openai",
    "ext-runtime-grpc",
    "ext-runtime-local",
    "ext-testing",
    "ext-tools-langchain",
]


def test_core_change_selects_every_dependant(packages: dict[str, Package]) -> None:
    assert cp.select(["packages/ext-core/src/ext/core/__init__.py"], packages) == ALL


def test_leaf_change_selects_only_itself(packages: dict[str, Package]) -> None:
    assert cp.select(["packages/ext-tools-langchain/tests/t.py"], packages) == ["ext-tools-langchain"]


def test_middle_change_selects_transitive_dependants(packages: dict[str, Package]) -> None:
    assert cp.select(["packages/ext-runtime-grpc/pyproject.toml"], packages) == [
        "ext-runtime-grpc",
        "ext-runtime-local",
    ]
    assert cp.select(["packages/ext-models-openai/README.md"], packages) == [
        "ext-models-openai",
        "ext-tools-langchain",
    ]


def test_test_only_dependency_selects_without_propagating(packages: dict[str, Package]) -> None:
    # openai's tests use ext-testing; langchain depends on openai's code, not its tests.
    assert cp.select(["packages/ext-testing/src/ext/testing/x.py"], packages) == [
        "ext-models-openai",
        "ext-testing",
    ]


def test_several_paths_union(packages: dict[str, Package]) -> None:
    paths = ["packages/ext-testing/x.py", "packages/ext-runtime-local/y.py", "README.md"]
    assert cp.select(paths, packages) == ["ext-models-openai", "ext-runtime-local", "ext-testing"]


@pytest.mark.parametrize(
    "path",
    [
        "hatch.toml",
        "pyproject.toml",
        "tools/checks/check_wheels.py",
        "tools/bench/_harness.py",
        ".github/workflows/ci.yml",
        ".ci/run",
        "tests-integration/test_x.py",
        "Makefile",  # unknown top-level input: over-test rather than miss
        "packages/ext-deleted/src/ext/deleted/__init__.py",  # no longer a member
    ],
)
def test_shared_inputs_select_all(path: str, packages: dict[str, Package]) -> None:
    assert cp.select([path], packages) == ALL


@pytest.mark.parametrize("path", ["README.md", ".gitignore", "CONTRIBUTING.md", "docs/index.md", "packages/README.md"])
def test_docs_select_nothing(path: str, packages: dict[str, Package]) -> None:
    assert cp.select([path], packages) == []


def test_proto_selects_grpc_and_dependants(packages: dict[str, Package]) -> None:
    assert cp.select(["proto/ext/runtime/v1/runtime.proto"], packages) == [
        "ext-runtime-grpc",
        "ext-runtime-local",
    ]
    without_grpc = {k: v for k, v in packages.items() if not k.startswith("ext-runtime")}
    assert cp.select(["proto/x.proto"], without_grpc) == []


def test_no_changes_selects_nothing(packages: dict[str, Package]) -> None:
    assert cp.select([], packages) == []


def test_paths_are_normalised(packages: dict[str, Package]) -> None:
    assert cp.select(["./packages/ext-runtime-local/a.py"], packages) == ["ext-runtime-local"]
    assert cp.select(["packages\\ext-runtime-local\\a.py"], packages) == ["ext-runtime-local"]


def test_classify_returns_direct_hits_only(packages: dict[str, Package]) -> None:
    assert cp.classify("packages/ext-core/x", packages) == {"ext-core"}
    assert cp.classify("hatch.toml", packages) is cp.ALL


def test_closures_handle_cycles() -> None:
    pkgs = {p.name: p for p in (_pkg("a", "b"), _pkg("b", "a"), _pkg("c", "b"))}
    assert dependencies_closure("c", pkgs) == {"a", "b"}
    assert dependencies_closure("a", pkgs) == {"b"}
    assert dependants_closure(["a"], pkgs) == {"a", "b", "c"}


def test_discover_reads_deps_and_optional_deps(tmp_path: Path, make_package: MakePackage) -> None:
    make_package("ext-core", deps=["pydantic>=2.7,<3"])
    make_package("ext-models-openai", deps=["ext-core>=0.1,<0.2", "openai>=1"])
    make_package(
        "ext-tools-langchain",
        deps=["Ext_Core [extra] >=0.1,<0.2; python_version >= '3.10'"],
        optional={"openai": ["ext-models-openai>=0.1,<0.2"], "self": ["ext-tools-langchain[openai]"]},
        groups={"test": ["ext-testing>=0.1,<0.2", "ext-core", "pytest>=8"], "lint": ["ruff"]},
        leaf="ext/tools/langchain",
    )
    make_package("ext-testing", deps=["ext-core>=0.1,<0.2"])
    (tmp_path / "packages" / "not-a-package").mkdir()
    pkgs = discover(tmp_path)
    assert sorted(pkgs) == ["ext-core", "ext-models-openai", "ext-testing", "ext-tools-langchain"]
    assert pkgs["ext-core"].deps == frozenset()
    assert pkgs["ext-models-openai"].deps == {"ext-core"}
    assert pkgs["ext-models-openai"].folder == "packages/ext-models-openai"
    assert pkgs["ext-tools-langchain"].deps == {"ext-core", "ext-models-openai"}
    # ext-core is also a shipped dep, so only ext-testing is test-only.
    assert pkgs["ext-tools-langchain"].test_deps == {"ext-testing"}
    assert pkgs["ext-tools-langchain"].group_requirements == ("ext-testing>=0.1,<0.2", "ext-core", "pytest>=8", "ruff")
    assert dependency_graph(pkgs) == {
        "ext-core": [],
        "ext-models-openai": ["ext-core"],
        "ext-testing": ["ext-core"],
        "ext-tools-langchain": ["ext-core", "ext-models-openai", "ext-testing"],
    }
    assert dependencies_closure("ext-tools-langchain", pkgs) == {"ext-core", "ext-models-openai"}
    assert dependencies_closure("ext-tools-langchain", pkgs, include_test=True) == {
        "ext-core",
        "ext-models-openai",
        "ext-testing",
    }


def test_discover_real_repo_includes_core() -> None:
    pkgs = discover()
    assert "ext-core" in pkgs
    assert all(p.folder == f"packages/{p.name}" for p in pkgs.values())


# ------------------------------------------------------------------ git end to end

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def _git(root: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def repo(tmp_path: Path, make_package: MakePackage) -> Path:
    make_package("ext-core")
    make_package("ext-testing", deps=["ext-core>=0.1,<0.2"])
    make_package("ext-models-openai", deps=["ext-core>=0.1,<0.2"], leaf="ext/models/openai")
    (tmp_path / "README.md").write_text("hi\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "init")
    return tmp_path


def _run(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> object:
    assert cp.main(["--root", str(root), *args]) == 0
    return json.loads(capsys.readouterr().out)


@needs_git
def test_cli_committed_diff(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "packages/ext-models-openai/src/ext/models/openai/client.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "openai")
    assert _run(repo, capsys, "--base", "HEAD~1", "--head", "HEAD") == ["ext-models-openai"]
    # Default base is HEAD~1 when there is no origin/main.
    assert _run(repo, capsys, "--head", "HEAD") == ["ext-models-openai"]


@needs_git
def test_cli_work_tree_includes_untracked(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "packages/ext-core/src/ext/core/new.py").write_text("")
    assert _run(repo, capsys, "--base", "HEAD") == ["ext-core", "ext-models-openai", "ext-testing"]
    (repo / "packages/ext-core/src/ext/core/new.py").unlink()
    (repo / "README.md").write_text("changed\n")
    assert _run(repo, capsys, "--base", "HEAD") == []


@needs_git
def test_cli_move_between_packages_selects_both(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Without --no-renames git would report only the destination of the move.
    _git(
        repo,
        "mv",
        "packages/ext-testing/src/ext/testing/py.typed",
        "packages/ext-models-openai/src/ext/models/openai/moved.typed",
    )
    _git(repo, "commit", "-q", "-m", "mv")
    assert cp.changed_files(repo, "HEAD~1", "HEAD") == [
        "packages/ext-models-openai/src/ext/models/openai/moved.typed",
        "packages/ext-testing/src/ext/testing/py.typed",
    ]
    assert _run(repo, capsys, "--base", "HEAD~1", "--head", "HEAD") == [
        "ext-models-openai",
        "ext-testing",
    ]


@pytest.mark.parametrize("base", ["does-not-exist", "", "0" * 40, "HEAD~5"])
@needs_git
def test_cli_unresolvable_base_selects_all(repo: Path, capsys: pytest.CaptureFixture[str], base: str) -> None:
    assert _run(repo, capsys, "--base", base) == ["ext-core", "ext-models-openai", "ext-testing"]


@needs_git
def test_cli_all_and_graph(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(repo, capsys, "--all") == ["ext-core", "ext-models-openai", "ext-testing"]
    assert _run(repo, capsys, "--graph") == {
        "ext-core": [],
        "ext-models-openai": ["ext-core"],
        "ext-testing": ["ext-core"],
    }
