"""Workspace discovery shared by the repo tools: members, names and the dependency graph.

Requires Python 3.11+ (``tomllib``); the CI jobs that run these tools use 3.11.
Members are found from the filesystem (``packages/*/pyproject.toml``), never from
a hard-coded list, so new distributions are picked up without touching the tools.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    # The tools target 3.11+; this branch exists so the repo's mypy target (3.10)
    # type-checks, and it happens to work where tomli is installed.
    import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES_DIR = "packages"

_NAME_RE = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def canonical_name(name: str) -> str:
    """PEP 503 normalisation: ``Ext_Models.Openai`` -> ``ext-models-openai``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str | None:
    """Canonical project name of a PEP 508 requirement string, or None if unparsable."""
    match = _NAME_RE.match(requirement)
    return canonical_name(match.group(1)) if match else None


@dataclass(frozen=True)
class Package:
    """One workspace member.

    ``deps`` holds the workspace members named in ``[project].dependencies`` or any
    ``[project.optional-dependencies]`` group (self-references removed).
    """

    name: str
    folder: str
    deps: frozenset[str] = frozenset()
    requirements: tuple[str, ...] = field(default=(), compare=False)


def load_toml(path: Path) -> dict[str, Any]:
    with path.open("rb") as fh:
        data: dict[str, Any] = tomllib.load(fh)
    return data


def _project_requirements(project: Mapping[str, Any]) -> list[str]:
    reqs = [r for r in project.get("dependencies", []) if isinstance(r, str)]
    optional = project.get("optional-dependencies", {})
    if isinstance(optional, Mapping):
        for group in optional.values():
            if isinstance(group, list):
                reqs.extend(r for r in group if isinstance(r, str))
    return reqs


def discover(root: Path = REPO_ROOT) -> dict[str, Package]:
    """Map canonical distribution name -> Package for every ``packages/*/pyproject.toml``."""
    raw: dict[str, tuple[str, list[str]]] = {}
    base = root / PACKAGES_DIR
    if not base.is_dir():
        return {}
    for pyproject in sorted(base.glob("*/pyproject.toml")):
        project = load_toml(pyproject).get("project", {})
        folder = pyproject.parent.relative_to(root).as_posix()
        # A member without a name is broken, but the folder name keeps it visible
        # (check_wheels reports the mismatch) instead of silently dropping it.
        name = canonical_name(str(project.get("name") or pyproject.parent.name))
        raw[name] = (folder, _project_requirements(project))
    members = set(raw)
    packages: dict[str, Package] = {}
    for name, (folder, reqs) in raw.items():
        deps = {dep for r in reqs if (dep := requirement_name(r)) in members and dep != name}
        packages[name] = Package(
            name=name,
            folder=folder,
            deps=frozenset(d for d in deps if d is not None),
            requirements=tuple(reqs),
        )
    return packages


def dependency_graph(packages: Mapping[str, Package]) -> dict[str, list[str]]:
    """Direct workspace dependencies of each member, sorted, as plain JSON-able data."""
    return {name: sorted(packages[name].deps) for name in sorted(packages)}


def dependencies_closure(name: str, packages: Mapping[str, Package]) -> set[str]:
    """Transitive workspace dependencies of ``name`` (excluding itself)."""
    seen: set[str] = set()
    stack = list(packages[name].deps) if name in packages else []
    while stack:
        dep = stack.pop()
        if dep in seen or dep not in packages:
            continue
        seen.add(dep)
        stack.extend(packages[dep].deps)
    seen.discard(name)
    return seen


def dependants_closure(names: Iterable[str], packages: Mapping[str, Package]) -> set[str]:
    """``names`` plus every member that depends on any of them, transitively."""
    reverse: dict[str, set[str]] = {n: set() for n in packages}
    for pkg in packages.values():
        for dep in pkg.deps:
            reverse.setdefault(dep, set()).add(pkg.name)
    result: set[str] = set()
    stack = [n for n in names if n in packages]
    while stack:
        current = stack.pop()
        if current in result:
            continue
        result.add(current)
        stack.extend(reverse.get(current, ()))
    return result
