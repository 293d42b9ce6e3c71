"""Fail when a distribution's code imports a package it does not declare; exits 1 on any.

Usage (Python 3.11+, nothing else installed)::

    python tools/checks/check_declared_imports.py            # the repository
    python tools/checks/check_declared_imports.py --root DIR # another checkout (the tests use a temporary tree)

Every import in a distribution's ``src/`` (at any depth: in a function, under ``TYPE_CHECKING``, in a ``try``)
of a module outside the standard library must be provided by a requirement of that distribution's
``[project].dependencies`` or of one of its extras (``[project.optional-dependencies]``), never only by what a
requirement pulls in: a dependency's dependencies change without notice. ``ext.*`` imports likewise need the
distribution that ships the module (the longest matching ``packages/ext-*`` folder: ``ext.models.openai`` is
``ext-models-openai``); the distribution's own modules need nothing. Test dependencies (``[dependency-groups]``, the
hatch environments) do not count: ``src`` is what a user installs.

Which distribution provides an import comes from the pyproject files alone, so the check runs anywhere (the CI
guard job installs no project environment) and gives the same answer everywhere: an import name is its
distribution's name normalised (``langchain_core`` -> ``langchain-core``), except the names in ``IMPORT_NAMES``,
which differ (``yaml`` -> ``pyyaml``). ``tools/tests/checks/test_check_declared_imports.py`` holds that table to
the installed packages' own metadata (``importlib.metadata.packages_distributions()``) wherever they are installed.
Each finding is printed as ``file:line: ...`` with the requirement to add.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from _workspace import Finding, canonical_name, discover, import_name, python_files, requirement_name, run_check

IMPORT_NAMES: Mapping[str, str] = {
    "a2a": "a2a-sdk",
    "azure.ai.inference": "azure-ai-inference",
    "azure.core": "azure-core",
    "dotenv": "python-dotenv",
    "google.protobuf": "protobuf",
    "grpc": "grpcio",
    "grpc_health": "grpcio-health-checking",
    "grpc_tools": "grpcio-tools",
    "llama_cpp": "llama-cpp-python",
    "opentelemetry": "opentelemetry-api",
    "opentelemetry.sdk": "opentelemetry-sdk",
    "opentelemetry.semconv": "opentelemetry-semantic-conventions",
    "yaml": "pyyaml",
}
"""Import names (a module or a namespace package's subpackage; the longest match wins) whose distribution is not the
name normalised."""

_VERSION = re.compile(r"""^__version__\s*=\s*["'](\d+)\.(\d+)""", re.M)


@dataclass(frozen=True)
class Distribution:
    name: str  # ext-models-openai
    module: str  # ext.models.openai
    folder: Path
    declared: frozenset[str]  # canonical names of [project].dependencies and every extra's requirements


def provider(module: str) -> str:
    """The distribution that provides ``module`` (a dotted import name outside ext and the standard library)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = IMPORT_NAMES.get(".".join(parts[:end]))
        if name is not None:
            return name
    return canonical_name(parts[0])


def distributions(root: Path) -> dict[str, Distribution]:
    """Every workspace member, keyed by its import name (``ext.models.openai``)."""
    found: dict[str, Distribution] = {}
    for name, package in discover(root).items():
        folder = root / package.folder
        declared = frozenset(n for n in map(requirement_name, package.requirements) if n is not None)
        module = import_name(folder)
        found[module] = Distribution(name, module, folder, declared)
    return found


def _imported_modules(tree: ast.Module) -> Iterator[tuple[int, str, str]]:
    """(line, the module as written, the name to look up) of every absolute import: ``from a import b`` looks up
    ``a.b``, which may be a submodule (``from google import protobuf``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield node.lineno, node.module, node.module if alias.name == "*" else f"{node.module}.{alias.name}"


def _owner(module: str, dists: Mapping[str, Distribution]) -> Distribution | None:
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        dist = dists.get(".".join(parts[:end]))
        if dist is not None:
            return dist
    return None


def _member_range(dist: Distribution) -> str:
    """``>=X.Y,<X.(Y+1)`` from the member's ``__about__.py`` (the workspace's convention), or a placeholder."""
    about = dist.folder / "src" / Path(*dist.module.split(".")) / "__about__.py"
    match = _VERSION.search(about.read_text(encoding="utf-8")) if about.is_file() else None
    if match is None:
        return ">=X.Y,<X.(Y+1)"
    major, minor = int(match.group(1)), int(match.group(2))
    return f">={major}.{minor},<{major}.{minor + 1}"


def _installed(name: str) -> str:
    """Where this runs, the installed version of ``name`` (a hint for the range to declare), or nothing."""
    try:
        return f"; {importlib.metadata.version(name)} is installed where this ran"
    except importlib.metadata.PackageNotFoundError:
        return ""


def check_distribution(dist: Distribution, dists: Mapping[str, Distribution], root: Path) -> list[Finding]:
    findings: list[Finding] = []
    pyproject = (dist.folder / "pyproject.toml").relative_to(root) if dist.folder.is_relative_to(root) else dist.folder
    for path in python_files(dist.folder / "src"):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            findings.append(Finding(path, exc.lineno or 0, f"cannot parse: {exc.msg}"))
            continue
        reported: set[tuple[int, str]] = set()
        for line, shown, module in _imported_modules(tree):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            if top == "ext":
                owner = _owner(module, dists)
                if owner is None:
                    if module.startswith(dist.module + ".") or module == dist.module:
                        continue  # its own module, or a name in its own package
                    message = f"{dist.name} imports {shown}, which no distribution in packages/ provides"
                    needed = module
                elif owner is dist or owner.name in dist.declared:
                    continue
                else:
                    needed = owner.name
                    message = (
                        f"{dist.name} imports {shown}, from {owner.name}, which it does not declare: add "
                        f'"{owner.name}{_member_range(owner)}" to [project].dependencies in {pyproject} (or to an '
                        "extra if the import is optional)"
                    )
            else:
                needed = provider(module)
                if needed in dist.declared:
                    continue
                message = (
                    f"{dist.name} imports {shown}, which none of its requirements provides: add {needed} with a "
                    f"range (>=lowest that works,<next major{_installed(needed)}) to [project].dependencies in "
                    f"{pyproject}, or to an extra if the import is optional"
                )
            if (line, needed) not in reported:
                reported.add((line, needed))
                findings.append(Finding(path, line, message))
    return findings


def check(root: Path) -> list[Finding]:
    dists = distributions(root)
    findings: list[Finding] = []
    for dist in sorted(dists.values(), key=lambda d: d.name):
        findings.extend(check_distribution(dist, dists, root))
    return findings


def main(argv: list[str] | None = None) -> int:
    return run_check(
        argv,
        __doc__,
        check,
        "import(s) of undeclared packages",
        lambda root: f"every import is declared ({len(distributions(root))} distributions checked)",
    )


if __name__ == "__main__":
    sys.exit(main())
