"""Map a git diff to the ext distributions that need testing; prints a sorted JSON list.

Usage (Python 3.11+, run from anywhere)::

    python tools/checks/changed_packages.py                       # origin/main (or HEAD~1) vs work tree
    python tools/checks/changed_packages.py --base SHA --head HEAD
    python tools/checks/changed_packages.py --all                 # every distribution
    python tools/checks/changed_packages.py --graph               # {dist: [direct workspace deps]}

Rules (see ``classify``): a file in ``packages/<dist>/`` selects that dist, its
transitive dependants (``dependencies`` and ``optional-dependencies``) and the dists
whose tests use any of those (PEP 735 ``[dependency-groups]``); shared build/CI
inputs select everything; ``proto/`` selects ``ext-runtime-grpc`` and its
dependants; top-level docs select nothing; any other path selects everything,
because an unknown input is safer to over-test than to miss.
When the base ref cannot be resolved (first commit, zeroed ``before`` SHA, shallow
clone) every distribution is selected.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from _workspace import REPO_ROOT, Package, dependants_closure, dependency_graph, discover

__all__ = ["ALL", "classify", "select", "changed_files", "main"]

GRPC_DIST = "ext-runtime-grpc"

# Inputs shared by every distribution's build or test run.
ALL_FILES = frozenset({"hatch.toml", "pyproject.toml", "conftest.py", "uv.lock"})
ALL_DIRS = frozenset({"tools", ".github", ".ci", "tests-integration"})
# Top-level files and folders that no distribution's build or tests read.
DOC_FILES = frozenset({".gitignore", ".gitattributes", ".editorconfig", "LICENSE", "LICENSE.md", "LICENSE.txt"})
DOC_DIRS = frozenset({"docs"})
DOC_SUFFIXES = (".md", ".rst")


class _All:
    """Sentinel: the path affects every distribution."""

    def __repr__(self) -> str:
        return "ALL"


ALL = _All()


def _normalise(path: str) -> str:
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def classify(path: str, packages: Mapping[str, Package]) -> set[str] | _All:
    """Distributions directly selected by one changed path (before adding dependants)."""
    parts = [p for p in _normalise(path).split("/") if p]
    if not parts:
        return set()
    head = parts[0]
    if len(parts) == 1:
        if head in ALL_FILES:
            return ALL
        if head in DOC_FILES or head.endswith(DOC_SUFFIXES):
            return set()
        return ALL
    if head in ALL_DIRS:
        return ALL
    if head in DOC_DIRS:
        return set()
    if head == "proto":
        return {GRPC_DIST} if GRPC_DIST in packages else set()
    if head == "packages":
        folder = f"packages/{parts[1]}"
        for pkg in packages.values():
            if pkg.folder == folder:
                return {pkg.name}
        if len(parts) == 2:
            # A loose file next to the package folders (e.g. packages/README.md).
            return set() if parts[1].endswith(DOC_SUFFIXES) else ALL
        # A folder that is no longer (or not yet) a member, e.g. a deleted
        # distribution: we cannot tell who depended on it, so test everything.
        return ALL
    return ALL


def select(changed_paths: Iterable[str], packages: Mapping[str, Package]) -> list[str]:
    """Sorted distribution names to test for ``changed_paths``, dependants included."""
    direct: set[str] = set()
    for path in changed_paths:
        hit = classify(path, packages)
        if isinstance(hit, _All):
            return sorted(packages)
        direct |= hit
    return sorted(dependants_closure(direct, packages))


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)


def resolve(root: Path, ref: str) -> str | None:
    """Commit SHA for ``ref``, or None if git cannot resolve it."""
    if not ref.strip() or set(ref.strip()) == {"0"}:
        return None
    proc = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and sha else None


def default_base(root: Path) -> str:
    return "origin/main" if resolve(root, "origin/main") else "HEAD~1"


def _split_z(output: str) -> list[str]:
    return [p for p in output.split("\0") if p]


def changed_files(root: Path, base: str, head: str | None) -> list[str] | None:
    """Paths changed since the merge base of ``base`` and ``head``.

    ``head=None`` compares against the work tree (tracked edits plus untracked,
    non-ignored files) so the tool is useful before committing. Returns None when
    the diff cannot be computed, which callers treat as "select everything".
    """
    base_sha = resolve(root, base)
    head_sha = resolve(root, head if head is not None else "HEAD")
    if base_sha is None or head_sha is None:
        return None
    mb = _git(root, "merge-base", base_sha, head_sha)
    # Without a common ancestor (shallow or unrelated history) a two-point diff is
    # the best remaining approximation.
    start = mb.stdout.strip() if mb.returncode == 0 and mb.stdout.strip() else base_sha
    # --no-renames reports both sides of a move, so a file moved out of a package
    # still selects that package.
    diff_args = ["diff", "--name-only", "--no-renames", "-z", start]
    if head is not None:
        diff_args.append(head_sha)
    diff = _git(root, *diff_args)
    if diff.returncode != 0:
        return None
    paths = _split_z(diff.stdout)
    if head is None:
        untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
        if untracked.returncode != 0:
            return None
        paths.extend(_split_z(untracked.stdout))
    return sorted(set(paths))


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base", help="base ref (default: origin/main if it exists, else HEAD~1)")
    parser.add_argument("--head", help="head ref (default: the work tree, untracked files included)")
    parser.add_argument("--all", action="store_true", help="print every distribution")
    parser.add_argument("--graph", action="store_true", help="print {dist: [direct workspace deps]} as JSON")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    root: Path = args.root.resolve()
    packages = discover(root)
    if args.graph:
        print(json.dumps(dependency_graph(packages), indent=2))
        return 0
    if args.all:
        print(json.dumps(sorted(packages)))
        return 0
    base: str = args.base if args.base is not None else default_base(root)
    paths = changed_files(root, base, args.head)
    if paths is None:
        print(f"changed_packages: cannot diff against {base!r}; selecting all", file=sys.stderr)
        result = sorted(packages)
    else:
        print(f"changed_packages: {len(paths)} changed path(s) since {base}", file=sys.stderr)
        result = select(paths, packages)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
