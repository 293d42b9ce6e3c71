"""Workspace discovery shared by the repo tools: members, names and the dependency graph.

Requires Python 3.11+ (``tomllib``); the CI jobs that run these tools use 3.11.
Members are found from the filesystem (``packages/*/pyproject.toml``), never from
a hard-coded list, so new distributions are picked up without touching the tools.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

if sys.version_info >= (3, 11):
    import tomllib
else:
    # The tools target 3.11+; this branch exists so the repo's mypy target (3.10)
    # type-checks, and it happens to work where tomli is installed.
    try:
        import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
    except ModuleNotFoundError as exc:
        raise SystemExit("tools/ need Python 3.11+ (tomllib); on 3.10 install tomli") from exc

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES_DIR = "packages"

SEPARATE_ENVIRONMENTS: Mapping[str, str] = {
    "ext-semantic-kernel": "semantic-kernel pins mcp<2 (and pydantic<2.14); ext-tools-mcp needs mcp>=2.3",
}
"""The distributions that cannot be installed next to every other one, with the reason. Each is tested, typed and
linted in its own hatch env only; every other distribution is a member of the shared envs (``hatch-test``, ``dev``),
which install them all together (tools/checks/check_wheels.py holds hatch.toml to this)."""

_NAME_RE = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def canonical_name(name: str) -> str:
    """PEP 503 normalisation: ``Ext_Models.Openai`` -> ``ext-models-openai``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def import_name(folder: Path) -> str:
    """The import name of the distribution in ``folder``: its shallowest package under ``src/`` (the one with an
    ``__init__.py``: ``src/ext/models/llama_cpp`` -> ``ext.models.llama_cpp``), else the folder's name with dots
    (``ext-models-openai`` -> ``ext.models.openai``)."""
    src = folder / "src"
    inits = sorted(src.rglob("__init__.py"), key=lambda p: (len(p.parts), p)) if src.is_dir() else []
    if inits:
        return ".".join(inits[0].parent.relative_to(src).parts)
    return folder.name.replace("-", ".")


def requirement_name(requirement: str) -> str | None:
    """Canonical project name of a PEP 508 requirement string, or None if unparsable."""
    match = _NAME_RE.match(requirement)
    return canonical_name(match.group(1)) if match else None


@dataclass(frozen=True)
class Package:
    """One workspace member.

    ``deps`` holds the workspace members named in ``[project].dependencies`` or any
    ``[project.optional-dependencies]`` group; ``test_deps`` those named only in PEP 735
    ``[dependency-groups]`` (e.g. ``test = ["ext-testing>=0.1,<0.2"]``), which are needed
    to run the member's tests but are not shipped in its metadata. Self-references are
    removed from both.
    """

    name: str
    folder: str
    deps: frozenset[str] = frozenset()
    test_deps: frozenset[str] = frozenset()
    requirements: tuple[str, ...] = field(default=(), compare=False)
    group_requirements: tuple[str, ...] = field(default=(), compare=False)


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


def _group_requirements(groups: Any) -> list[str]:
    """Every requirement string in a PEP 735 ``[dependency-groups]`` table.

    ``{include-group = ...}`` entries need no resolving: every group is read anyway.
    """
    if not isinstance(groups, Mapping):
        return []
    return [r for group in groups.values() if isinstance(group, list) for r in group if isinstance(r, str)]


def _member_names(reqs: Iterable[str], members: set[str], own: str) -> frozenset[str]:
    names = (requirement_name(r) for r in reqs)
    return frozenset(n for n in names if n is not None and n in members and n != own)


def discover(root: Path = REPO_ROOT) -> dict[str, Package]:
    """Map canonical distribution name -> Package for every ``packages/*/pyproject.toml``."""
    raw: dict[str, tuple[str, list[str], list[str]]] = {}
    base = root / PACKAGES_DIR
    if not base.is_dir():
        return {}
    for pyproject in sorted(base.glob("*/pyproject.toml")):
        data = load_toml(pyproject)
        project = data.get("project", {})
        folder = pyproject.parent.relative_to(root).as_posix()
        # A member without a name is broken, but the folder name keeps it visible
        # (check_wheels reports the mismatch) instead of silently dropping it.
        name = canonical_name(str(project.get("name") or pyproject.parent.name))
        raw[name] = (folder, _project_requirements(project), _group_requirements(data.get("dependency-groups")))
    members = set(raw)
    packages: dict[str, Package] = {}
    for name, (folder, reqs, group_reqs) in raw.items():
        deps = _member_names(reqs, members, name)
        packages[name] = Package(
            name=name,
            folder=folder,
            deps=deps,
            test_deps=_member_names(group_reqs, members, name) - deps,
            requirements=tuple(reqs),
            group_requirements=tuple(group_reqs),
        )
    return packages


def dependency_graph(packages: Mapping[str, Package]) -> dict[str, list[str]]:
    """Direct workspace dependencies (shipped and test-only) of each member, as JSON-able data."""
    return {name: sorted(packages[name].deps | packages[name].test_deps) for name in sorted(packages)}


def dependencies_closure(name: str, packages: Mapping[str, Package], *, include_test: bool = False) -> set[str]:
    """Transitive workspace dependencies of ``name`` (excluding itself).

    With ``include_test`` the member's own test-only deps are added at the first level
    (and their shipped deps transitively); other members' test-only deps never are,
    since running ``name``'s tests does not run theirs.
    """
    if name not in packages:
        return set()
    first = packages[name].deps | (packages[name].test_deps if include_test else frozenset())
    seen: set[str] = set()
    stack = list(first)
    while stack:
        dep = stack.pop()
        if dep in seen or dep not in packages:
            continue
        seen.add(dep)
        stack.extend(packages[dep].deps)
    seen.discard(name)
    return seen


def dependants_closure(names: Iterable[str], packages: Mapping[str, Package]) -> set[str]:
    """``names``, every member depending on them transitively, and members whose tests use any of those.

    A test-only edge selects its member but does not propagate further: the member's
    own code did not change, so its dependants are unaffected.
    """
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
    result |= {pkg.name for pkg in packages.values() if pkg.test_deps & result}
    return result


class Rendered(Protocol):
    """A finding of a repository check: it renders itself as a line (or a few) naming the file and the fix."""

    def render(self, root: Path) -> str: ...


def run_check(
    argv: list[str] | None,
    doc: str | None,
    check: Callable[[Path], Sequence[Rendered]],
    failed: str,
    passed: Callable[[Path], str],
) -> int:
    """The command line every `check_*.py` shares: `--root DIR` (default: this checkout), each finding printed, then
    `N <failed>` on stderr and exit 1, or `passed(root)` and exit 0 (exit 2 when `root` has no packages/ folder)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0] if doc else None)
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    if not (root / "packages").is_dir():
        print(f"{root}: no packages/ folder", file=sys.stderr)
        return 2
    findings = check(root)
    for finding in findings:
        print(finding.render(root))
    if findings:
        print(f"{len(findings)} {failed}", file=sys.stderr)
        return 1
    print(passed(root))
    return 0


SKIPPED_DIRS = frozenset({"__pycache__", "build", "dist", "node_modules", "site-packages"})


def python_files(directory: Path) -> Iterator[Path]:
    """The `.py` files under `directory`, sorted, leaving out build output, caches and hidden folders."""
    if not directory.is_dir():
        return
    for path in sorted(directory.rglob("*.py")):
        parts = path.relative_to(directory).parts[:-1]
        if not any(p in SKIPPED_DIRS or p.startswith(".") for p in parts):
            yield path


@dataclass(frozen=True)
class Finding:
    """A check's finding at a line of a file: `file:line: message`, the file relative to the checked root."""

    path: Path
    line: int
    message: str

    def render(self, root: Path) -> str:
        try:
            shown = self.path.relative_to(root)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}: {self.message}"
