from __future__ import annotations

import shutil
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import check_wheels as cw
import pytest
from _workspace import REPO_ROOT, SEPARATE_ENVIRONMENTS, discover

MakePackage = Callable[..., Path]

MEMBERS: dict[str, str | None] = {"ext-core": "0.1.0", "ext-testing": "0.1.0", "ext-models-openai": "0.1.0"}


def make_wheel(
    directory: Path,
    dist: str,
    files: Sequence[str],
    *,
    version: str = "0.1.0",
    requires: Sequence[str] = (),
) -> Path:
    """A fake wheel: empty ``files`` plus a METADATA with Name/Version/Requires-Dist."""
    stem = f"{dist.replace('-', '_')}-{version}"
    path = directory / f"{stem}-py3-none-any.whl"
    meta = [f"Metadata-Version: 2.4\nName: {dist}\nVersion: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(path, "w") as zf:
        for name in files:
            zf.writestr(name, "")
        zf.writestr(f"{stem}.dist-info/METADATA", "\n".join(meta) + "\n\n# readme\n")
        zf.writestr(f"{stem}.dist-info/RECORD", "")
    return path


def good_files(leaf: str) -> list[str]:
    return [f"{leaf}/__init__.py", f"{leaf}/__about__.py", f"{leaf}/py.typed", f"{leaf}/_impl.py"]


# -------------------------------------------------------------------------- layout


@pytest.mark.parametrize(
    ("dist", "leaf"),
    [
        ("ext-core", "ext/core"),
        ("ext-models-openai", "ext/models/openai"),
        ("ext-models-llama-cpp", "ext/models/llama_cpp"),
        ("ext-models-azure-ai", "ext/models/azure_ai"),
        ("ext-runtime-grpc", "ext/runtime/grpc"),
    ],
)
def test_leaf_package_found_from_files(dist: str, leaf: str) -> None:
    files = [*good_files(leaf), f"{leaf}/sub/__init__.py"]
    assert cw.leaf_package(dist, files) == leaf
    assert cw.check_layout(dist, files, "src") == []


def test_leaf_package_missing() -> None:
    assert cw.leaf_package("ext-models-openai", ["ext/models/open_ai_x/__init__.py"]) is None
    problems = cw.check_layout("ext-models-openai", ["ext/models/other/__init__.py"], "w")
    assert len(problems) == 1
    assert "no leaf package for 'ext-models-openai'" in problems[0]


def test_namespace_root_init_is_rejected() -> None:
    problems = cw.check_layout("ext-core", ["ext/__init__.py", *good_files("ext/core")], "wheel x.whl")
    assert problems == [
        "ext-core: wheel x.whl: ships ext/__init__.py; the namespace package must not have one (PEP 420)"
    ]


def test_intermediate_namespace_init_is_rejected() -> None:
    files = ["ext/models/__init__.py", *good_files("ext/models/openai")]
    problems = cw.check_layout("ext-models-openai", files, "w")
    assert problems == [
        "ext-models-openai: w: ships ext/models/__init__.py; namespace level above ext/models/openai must not have one"
    ]


def test_foreign_top_level_and_stray_files_are_rejected() -> None:
    files = [
        *good_files("ext/core"),
        "tests/__init__.py",
        "conftest.py",
        "ext/helpers.py",
        "ext/testing/__init__.py",
        "ext_core-0.1.0.dist-info/METADATA",
        "ext_core-0.1.0.data/scripts/x",
    ]
    problems = cw.check_layout("ext-core", files, "w")
    assert problems == [
        "ext-core: w: ships top-level 'conftest.py'; only the 'ext' namespace is allowed",
        "ext-core: w: ships top-level 'tests'; only the 'ext' namespace is allowed",
        "ext-core: w: ships ext/helpers.py outside its leaf package ext/core/",
        "ext-core: w: ships ext/testing/__init__.py outside its leaf package ext/core/",
    ]


@pytest.mark.parametrize("missing", ["py.typed", "__about__.py"])
def test_leaf_requires_marker_files(missing: str) -> None:
    files = [f for f in good_files("ext/models/llama_cpp") if not f.endswith(missing)]
    problems = cw.check_layout("ext-models-llama-cpp", files, "w")
    assert problems == [f"ext-models-llama-cpp: w: leaf package ext/models/llama_cpp/ lacks {missing}"]


# -------------------------------------------------------------------- requirements


@pytest.mark.parametrize(
    "req",
    [
        "ext-core>=0.1,<0.2",
        "ext-core<0.2,>=0.1",
        "ext_core~=0.1.0",
        "ext-core>0.0.9,<=0.1.5",
        "ext-core[extra]>=0.1,<0.2; extra == 'openai'",
        "pydantic>=2.7",  # not a workspace member: any specifier is fine
        "ext-testing==9.9",  # a dist's requirement on itself is ignored
    ],
)
def test_requirement_ranges_accepted(req: str) -> None:
    assert cw.check_requirements("ext-testing", [req], MEMBERS, "w") == []


@pytest.mark.parametrize(
    ("req", "fragment"),
    [
        ("ext-core==0.1.0", "is an exact pin '==0.1.0'"),
        ("ext-core===0.1.0", "is an exact pin '===0.1.0'"),
        ("ext-core==0.1.*", "is an exact pin"),
        ("ext-core>=0.1", "has no upper bound"),
        ("ext-core", "'(no version constraint)' has no upper bound"),
        ("ext-core<0.2", "has no lower bound"),
        ("ext-core>=0.2,<0.3", "excludes its workspace version 0.1.0"),
        ("ext-core>=0.1,<0.2,!=0.1.0", "excludes its workspace version 0.1.0"),
        ("ext-core >=>= 0.1", "unparsable requirement"),
    ],
)
def test_requirement_problems(req: str, fragment: str) -> None:
    problems = cw.check_requirements("ext-testing", [req], MEMBERS, "w")
    assert len(problems) == 1
    assert problems[0].startswith("ext-testing: w: ")
    assert fragment in problems[0]


def test_unknown_member_version_skips_containment() -> None:
    assert cw.check_requirements("ext-testing", ["ext-core>=5,<6"], {"ext-core": None}, "w") == []


# -------------------------------------------------------------------------- wheels


def test_read_and_check_good_wheel(tmp_path: Path) -> None:
    path = make_wheel(
        tmp_path,
        "ext-models-openai",
        good_files("ext/models/openai"),
        requires=["ext-core<0.2,>=0.1", "openai>=1.40"],
    )
    info = cw.read_wheel(path)
    assert info.name == "ext-models-openai"
    assert info.version == "0.1.0"
    assert info.requires_dist == ("ext-core<0.2,>=0.1", "openai>=1.40")
    assert "ext/models/openai/py.typed" in info.files
    assert cw.check_wheel(info, MEMBERS) == []


def test_check_bad_wheel_reports_every_problem(tmp_path: Path) -> None:
    files = ["ext/__init__.py", "ext/models/__init__.py", "ext/models/openai/__init__.py", "foo.py"]
    path = make_wheel(tmp_path, "ext-models-openai", files, requires=["ext-core==0.1.0"])
    problems = cw.check_wheel(cw.read_wheel(path), MEMBERS)
    origin = f"ext-models-openai: wheel {path.name}: "
    assert problems == [
        origin + "ships top-level 'foo.py'; only the 'ext' namespace is allowed",
        origin + "ships ext/__init__.py; the namespace package must not have one (PEP 420)",
        origin + "ships ext/models/__init__.py; namespace level above ext/models/openai must not have one",
        origin + "leaf package ext/models/openai/ lacks py.typed",
        origin + "leaf package ext/models/openai/ lacks __about__.py",
        origin + "requirement on ext-core is an exact pin '==0.1.0'; use a range like '>=0.1,<0.2'",
    ]


def test_read_wheel_without_metadata(tmp_path: Path) -> None:
    path = tmp_path / "broken-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("ext/core/__init__.py", "")
    with pytest.raises(ValueError, match="expected one"):
        cw.read_wheel(path)


# -------------------------------------------------------------------- hatch envs

GOOD_SCRIPTS = 'test = "pytest"\ntypecheck = "mypy"\nlint = "ruff check"\n'


@pytest.fixture
def workspace(tmp_path: Path, make_package: MakePackage) -> Path:
    make_package("ext-core", deps=["pydantic>=2.7,<3"])
    make_package("ext-models-openai", deps=["ext-core>=0.1,<0.2"], leaf="ext/models/openai")
    make_package(
        "ext-tools-langchain",
        deps=["ext-core>=0.1,<0.2"],
        optional={"openai": ["ext-models-openai>=0.1,<0.2"]},
        leaf="ext/tools/langchain",
    )
    return tmp_path


def write_hatch(root: Path, envs: dict[str, Sequence[str] | None], default_scripts: bool = True) -> None:
    parts = ['[envs.default]\nworkspace.members = ["packages/*"]\n']
    if default_scripts:
        parts.append("[envs.default.scripts]\n" + GOOD_SCRIPTS)
    for name, members in envs.items():
        parts.append(f"[envs.{name}]\n")
        if members is not None:
            parts.append("workspace.members = [" + ", ".join(f'"{m}"' for m in members) + "]\n")
    (root / "hatch.toml").write_text("".join(parts))


GOOD_ENVS: dict[str, Sequence[str] | None] = {
    "ext-core": ["packages/ext-core"],
    "ext-models-openai": ["packages/ext-models-openai", "packages/ext-core"],
    "ext-tools-langchain": [
        "packages/ext-tools-langchain",
        "packages/ext-core",
        "./packages/ext-models-openai/",
    ],
}


def test_envs_ok(workspace: Path) -> None:
    write_hatch(workspace, GOOD_ENVS)
    assert cw.check_envs(workspace, discover(workspace)) == []


def test_env_missing_reports_expected_members(workspace: Path) -> None:
    write_hatch(workspace, {k: v for k, v in GOOD_ENVS.items() if k != "ext-tools-langchain"})
    assert cw.check_envs(workspace, discover(workspace)) == [
        "ext-tools-langchain: hatch.toml: no [envs.ext-tools-langchain] (needs workspace.members = "
        '["packages/ext-core", "packages/ext-models-openai", "packages/ext-tools-langchain"])'
    ]


def test_env_with_undeclared_or_missing_members(workspace: Path) -> None:
    envs = dict(GOOD_ENVS)
    envs["ext-core"] = ["packages/ext-core", "packages/ext-models-openai"]
    envs["ext-tools-langchain"] = ["packages/ext-tools-langchain", "packages/ext-core"]
    write_hatch(workspace, envs)
    problems = cw.check_envs(workspace, discover(workspace))
    assert len(problems) == 2
    assert problems[0].startswith("ext-core: hatch.toml: [envs.ext-core] workspace.members must be exactly")
    assert problems[0].endswith(
        "(unexpected ['packages/ext-models-openai']; a test-only member belongs in the dist's [dependency-groups])"
    )
    assert problems[1].endswith("(missing ['packages/ext-models-openai'])")


def test_env_inheriting_glob_members_is_a_mismatch(workspace: Path) -> None:
    envs = dict(GOOD_ENVS)
    envs["ext-core"] = None  # inherits packages/* from [envs.default]
    write_hatch(workspace, envs)
    problems = cw.check_envs(workspace, discover(workspace))
    assert len(problems) == 1
    assert "unexpected ['packages/ext-models-openai', 'packages/ext-tools-langchain']" in problems[0]


def test_test_only_member_declared_in_dependency_groups(workspace: Path, make_package: MakePackage) -> None:
    make_package("ext-testing", deps=["ext-core>=0.1,<0.2"])
    make_package(
        "ext-models-openai",
        deps=["ext-core>=0.1,<0.2"],
        groups={"test": ["ext-testing>=0.1,<0.2"]},
        leaf="ext/models/openai",
    )
    envs = dict(GOOD_ENVS)
    envs["ext-testing"] = ["packages/ext-testing", "packages/ext-core"]
    envs["ext-models-openai"] = ["packages/ext-models-openai", "packages/ext-core", "packages/ext-testing"]
    write_hatch(workspace, envs)
    # langchain depends on openai's code only, so its env must not gain ext-testing.
    assert cw.check_envs(workspace, discover(workspace)) == []
    envs["ext-models-openai"] = ["packages/ext-models-openai", "packages/ext-core"]
    write_hatch(workspace, envs)
    problems = cw.check_envs(workspace, discover(workspace))
    assert len(problems) == 1
    assert problems[0].endswith("(missing ['packages/ext-testing'])")


def test_dependency_group_pins_are_rejected(workspace: Path, make_package: MakePackage) -> None:
    make_package("ext-testing", deps=["ext-core>=0.1,<0.2"])
    make_package("ext-models-openai", deps=["ext-core>=0.1,<0.2"], groups={"test": ["ext-testing==0.1.0"]})
    write_hatch(workspace, GOOD_ENVS)
    report = cw.run(workspace, build=False, builder="auto")
    assert (
        "ext-models-openai: packages/ext-models-openai/pyproject.toml [dependency-groups]: "
        "requirement on ext-testing is an exact pin '==0.1.0'; use a range like '>=0.1,<0.2'"
    ) in report.problems


def test_env_missing_scripts(workspace: Path) -> None:
    write_hatch(workspace, GOOD_ENVS, default_scripts=False)
    problems = cw.check_envs(workspace, discover(workspace))
    assert problems == [
        f"{name}: hatch.toml: [envs.{name}.scripts] lacks test, typecheck, lint"
        for name in ("ext-core", "ext-models-openai", "ext-tools-langchain")
    ]


def test_effective_env_follows_hatch_inheritance() -> None:
    envs: dict[str, dict[str, Any]] = {
        "default": {"workspace": {"members": ["packages/*"]}, "scripts": {"test": "a", "lint": "b"}},
        "base": {"template": "base", "installer": "uv"},
        "child": {"template": "base", "scripts": {"test": "c"}},
        "plain": {"scripts": {"typecheck": "d"}},
        "alone": {"detached": True},
    }
    assert cw.effective_env(envs, "missing") is None
    child = cw.effective_env(envs, "child")
    assert child is not None
    assert child["installer"] == "uv"
    assert "workspace" not in child  # base is self-referential, so default is not reached
    plain = cw.effective_env(envs, "plain")
    assert plain is not None
    assert plain["workspace"] == {"members": ["packages/*"]}
    assert plain["scripts"] == {"typecheck": "d", "test": "a", "lint": "b"}
    alone = cw.effective_env(envs, "alone")
    assert alone is not None
    assert "workspace" not in alone


def test_workspace_members_forms(workspace: Path) -> None:
    env = {
        "workspace": {
            "members": ["packages/ext-*", {"path": "packages/ext-core", "features": ["x"]}],
            "exclude": ["packages/ext-tools-*"],
        }
    }
    assert cw.workspace_members(env, workspace) == {"packages/ext-core", "packages/ext-models-openai"}
    assert cw.workspace_members({"workspace": {"members": "x"}}, workspace) == (
        "workspace.members/exclude must be arrays"
    )


def test_folder_must_match_name(tmp_path: Path, make_package: MakePackage) -> None:
    make_package("ext-core", folder="core")
    assert cw.check_folder_names(discover(tmp_path)) == [
        "ext-core: packages/core: folder must be named after the distribution (packages/ext-core)"
    ]


def test_no_build_mode_checks_sources_and_pyproject(
    workspace: Path, make_package: MakePackage, capsys: pytest.CaptureFixture[str]
) -> None:
    write_hatch(workspace, {**GOOD_ENVS, "ext-testing": ["packages/ext-testing", "packages/ext-core"]})
    make_package("ext-testing", deps=["ext-core==0.1.0"], extra_files=["ext/__init__.py"], with_typed=False)
    report = cw.run(workspace, build=False, builder="auto")
    assert report.wheels == 0
    assert report.distributions == 4
    assert report.problems == [
        "ext-testing: packages/ext-testing/src: ships ext/__init__.py; "
        "the namespace package must not have one (PEP 420)",
        "ext-testing: packages/ext-testing/src: leaf package ext/testing/ lacks py.typed",
        "ext-testing: packages/ext-testing/pyproject.toml: requirement on ext-core is an exact pin '==0.1.0'; "
        "use a range like '>=0.1,<0.2'",
    ]
    assert cw.main(["--no-build", "--root", str(workspace)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAIL ext-testing: packages/ext-testing/src: ships ext/__init__.py")
    assert out[-1] == "check_wheels: 4 distribution(s), no-build: 3 problem(s)"


def test_no_build_mode_clean_workspace(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_hatch(workspace, GOOD_ENVS)
    assert cw.main(["--no-build", "--root", str(workspace)]) == 0
    assert capsys.readouterr().out == "check_wheels: 3 distribution(s), no-build: OK\n"


def test_source_files_skip_caches(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for rel in [
        "ext/core/__init__.py",
        "ext/core/__pycache__/x.cpython-311.pyc",
        ".mypy_cache/3.10/x.json",
        "ext_core.egg-info/PKG-INFO",
        "ext/core/.DS_Store",
        "ext/core/data/table.json",
    ]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("")
    assert cw._source_files(src) == ["ext/core/__init__.py", "ext/core/data/table.json"]


def test_source_version_reads_about(workspace: Path, make_package: MakePackage) -> None:
    make_package("ext-testing", version="0.3.0rc1")
    pkgs = discover(workspace)
    assert cw.source_version(workspace, pkgs["ext-testing"]) == "0.3.0rc1"
    assert cw.source_version(workspace, pkgs["ext-models-openai"]) == "0.1.0"


# ------------------------------------------------------------------ real build


@pytest.mark.skipif(shutil.which("uv") is None and shutil.which("hatch") is None, reason="no uv or hatch")
def test_real_ext_core_wheel(tmp_path: Path) -> None:
    pkgs = discover()
    builder = cw.pick_builder("auto")
    assert builder is not None
    path, error = cw.build_wheel(builder, REPO_ROOT, pkgs["ext-core"], tmp_path)
    assert path is not None, error
    info = cw.read_wheel(path)
    assert info.name == "ext-core"
    assert "ext/core/py.typed" in info.files
    assert "ext/__init__.py" not in info.files
    versions = {n: cw.source_version(REPO_ROOT, p) for n, p in pkgs.items()}
    assert cw.check_wheel(info, versions) == []


# -------------------------------------------------------------------- shared envs (any two install together)


def write_shared(root: Path, members: Sequence[str], exclude: Sequence[str] = ()) -> None:
    text = (root / "hatch.toml").read_text()
    text += "[envs.hatch-test]\nworkspace.members = [" + ", ".join(f'"{m}"' for m in members) + "]\n"
    if exclude:
        text += "workspace.exclude = [" + ", ".join(f'"{m}"' for m in exclude) + "]\n"
    (root / "hatch.toml").write_text(text)


def test_shared_env_holds_every_distribution(workspace: Path) -> None:
    write_hatch(workspace, GOOD_ENVS)
    write_shared(workspace, ["packages/*"])
    assert cw.check_shared_envs(workspace, discover(workspace), separate={}) == []


def test_shared_env_missing_a_distribution_without_a_reason(workspace: Path) -> None:
    write_hatch(workspace, GOOD_ENVS)
    write_shared(workspace, ["packages/*"], exclude=["packages/ext-tools-langchain"])
    assert cw.check_shared_envs(workspace, discover(workspace), separate={}) == [
        "hatch.toml: [envs.hatch-test] lacks ['packages/ext-tools-langchain']: every distribution installs together "
        "there, unless tools/checks/_workspace.py SEPARATE_ENVIRONMENTS says why not"
    ]


def test_a_separate_distribution_must_be_excluded(workspace: Path) -> None:
    separate = {"ext-tools-langchain": "pins something the others cannot take"}
    write_hatch(workspace, GOOD_ENVS)
    write_shared(workspace, ["packages/*"])
    assert cw.check_shared_envs(workspace, discover(workspace), separate=separate) == [
        "hatch.toml: [envs.hatch-test] must exclude packages/ext-tools-langchain (its own env only: pins something "
        "the others cannot take)"
    ]
    write_hatch(workspace, GOOD_ENVS)
    write_shared(workspace, ["packages/*"], exclude=["packages/ext-tools-langchain"])
    assert cw.check_shared_envs(workspace, discover(workspace), separate=separate) == []


def test_the_repository_states_its_exception() -> None:
    # The real hatch.toml: every distribution but the separate ones in hatch-test and dev, each exception named.
    packages = discover(REPO_ROOT)
    assert cw.check_shared_envs(REPO_ROOT, packages) == []
    assert "ext-semantic-kernel" in SEPARATE_ENVIRONMENTS
    assert set(SEPARATE_ENVIRONMENTS) <= set(packages)  # no stale exception
