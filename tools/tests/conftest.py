"""Shared fixtures; puts tools/checks/ and tools/bench/ on sys.path so tests import the
scripts by bare name, exactly as they import each other when run as scripts.

``checks/`` tests the repository checks: they need only Python 3.11+ and the guard job's packages (pytest, hatch).
``bench/`` tests the benchmarks at a tiny size: they import ext, so they run where it is installed (``hatch test``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

TOOLS_DIR = Path(__file__).resolve().parent.parent
for _path in (TOOLS_DIR / "checks", TOOLS_DIR / "bench", TOOLS_DIR / "eval"):
    if str(_path) not in sys.path:
        # Appended, not prepended: these bare names must never shadow installed modules.
        sys.path.append(str(_path))

collect_ignore: list[str] = []
if sys.version_info < (3, 11):
    # The workspace tools read TOML with tomllib (3.11+); the harness tests still run.
    collect_ignore += [
        "checks/test_changed_packages.py",
        "checks/test_check_wheels.py",
        "checks/test_check_declared_imports.py",
    ]

MakePackage = Callable[..., Path]


def _toml_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def write_package(
    root: Path,
    name: str,
    *,
    deps: Sequence[str] = (),
    optional: Mapping[str, Sequence[str]] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    leaf: str | None = None,
    version: str = "0.1.0",
    folder: str | None = None,
    extra_files: Sequence[str] = (),
    with_typed: bool = True,
    with_about: bool = True,
) -> Path:
    """Write a minimal hatchling member under ``root/packages``; returns its folder."""
    pkg_dir = root / "packages" / (folder or name)
    leaf = leaf or name.replace("-", "/")
    src_leaf = pkg_dir / "src" / leaf
    src_leaf.mkdir(parents=True, exist_ok=True)
    (src_leaf / "__init__.py").write_text("")
    if with_about:
        (src_leaf / "__about__.py").write_text(f'__version__ = "{version}"\n')
    if with_typed:
        (src_leaf / "py.typed").write_text("")
    for rel in extra_files:
        target = pkg_dir / "src" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")
    lines = [
        "[project]",
        f'name = "{name}"',
        'dynamic = ["version"]',
        f"dependencies = {_toml_list(deps)}",
    ]
    if optional:
        lines.append("[project.optional-dependencies]")
        lines += [f"{group} = {_toml_list(reqs)}" for group, reqs in optional.items()]
    if groups:
        lines.append("[dependency-groups]")
        lines += [f"{group} = {_toml_list(reqs)}" for group, reqs in groups.items()]
    (pkg_dir / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return pkg_dir


@pytest.fixture
def make_package(tmp_path: Path) -> MakePackage:
    """Factory writing fake members into ``tmp_path`` (the fake repo root)."""
    return functools.partial(write_package, tmp_path)
