"""Fail when code imports another distribution's private modules or names; exits 1 on any.

Usage (Python 3.11+)::

    python tools/checks/check_private_imports.py            # the repository
    python tools/checks/check_private_imports.py --root DIR # another checkout (the tests use a temporary tree)

A distribution reaches another only through its public names: ``ext.<dist>._<x>`` (a private module) and
``from ext.<dist> import _<x>`` (a private name) are private to ``<dist>``. The files checked are every ``.py``
under ``packages/<folder>/`` (belonging to that folder's distribution), ``tests-integration/`` and ``tools/``
(belonging to none). A distribution's import name is its shallowest package under ``src/``
(``packages/ext-models-llama-cpp`` -> ``ext.models.llama_cpp``), so new distributions are covered without touching
this script. Each finding is printed as ``file:line: ...`` with the public name to use when the distribution exports
it (its ``__init__``'s ``__all__``), or what to do when it does not.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from _workspace import Finding, import_name, python_files, run_check


@dataclass(frozen=True)
class Distribution:
    name: str  # ext-models-openai
    module: str  # ext.models.openai
    folder: Path  # packages/ext-models-openai

    def public_names(self, module: str) -> frozenset[str]:
        """The names in `module`'s `__all__` (a package's `__init__.py` or a module file of this distribution;
        empty if it has none)."""
        base = self.folder / "src" / Path(*module.split("."))
        source = base / "__init__.py" if (base / "__init__.py").is_file() else base.with_suffix(".py")
        try:
            tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
        except (OSError, SyntaxError):
            return frozenset()
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                try:
                    names = ast.literal_eval(value)
                except ValueError:
                    return frozenset()
                return frozenset(v for v in names if isinstance(v, str))
        return frozenset()


def distributions(root: Path) -> dict[str, Distribution]:
    """Every `packages/ext-*` folder with a pyproject.toml, keyed by import name."""
    found: dict[str, Distribution] = {}
    packages = root / "packages"
    if not packages.is_dir():
        return found
    for folder in sorted(packages.iterdir()):
        if folder.name.startswith("ext-") and (folder / "pyproject.toml").is_file():
            module = import_name(folder)
            found[module] = Distribution(folder.name, module, folder)
    return found


def files_to_check(root: Path, dists: Mapping[str, Distribution]) -> Iterator[tuple[Path, Distribution | None]]:
    for dist in dists.values():
        for path in python_files(dist.folder):
            yield path, dist
    for shared in ("tests-integration", "tools"):
        for path in python_files(root / shared):
            yield path, None


def _owner(dotted: str, dists: Mapping[str, Distribution]) -> Distribution | None:
    """The distribution a dotted module name belongs to (the longest matching import name)."""
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        dist = dists.get(".".join(parts[:end]))
        if dist is not None:
            return dist
    return None


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_part(dotted: str, dist: Distribution) -> str | None:
    rest = dotted[len(dist.module) + 1 :].split(".") if dotted != dist.module else []
    return next((part for part in rest if _is_private(part)), None)


def _public_parent(dotted: str) -> str:
    """The module path up to its first private part: where the public names live."""
    parts = dotted.split(".")
    end = next((i for i, part in enumerate(parts) if _is_private(part)), len(parts))
    return ".".join(parts[:end])


def _advice(dist: Distribution, module: str, names: list[str]) -> str:
    """The public import to use instead, from the nearest public package that exports the names, or else what
    to do."""
    candidates = [module]
    while candidates[-1] != dist.module and "." in candidates[-1]:
        candidates.append(candidates[-1].rsplit(".", 1)[0])
    advice = []
    remaining = list(names)
    for candidate in candidates:
        public = dist.public_names(candidate)
        exported = [n for n in remaining if n in public]
        if exported:
            advice.append(f"use `from {candidate} import {', '.join(exported)}`")
            remaining = [n for n in remaining if n not in exported]
    if remaining:
        one = len(remaining) == 1
        advice.append(
            f"{', '.join(remaining)} {'is' if one else 'are'} not public in {module}: export "
            f"{'it' if one else 'them'} from {module} (`__all__`) or keep the use inside {dist.name}"
        )
    return "; ".join(advice)


def check_file(path: Path, own: Distribution | None, dists: Mapping[str, Distribution]) -> list[Finding]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        return [Finding(path, exc.lineno or 0, f"cannot parse: {exc.msg}")]
    findings: list[Finding] = []
    where = f"{own.name}" if own is not None else "code outside any distribution"

    def foreign(dotted: str) -> Distribution | None:
        dist = _owner(dotted, dists)
        return dist if dist is not None and dist != own else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                dist = foreign(alias.name)
                private = _private_part(alias.name, dist) if dist is not None else None
                if dist is not None and private is not None:
                    findings.append(
                        Finding(
                            path,
                            node.lineno,
                            f"{where} imports {alias.name}, private to {dist.name}; import the public names you need "
                            f"from {_public_parent(alias.name)} instead",
                        )
                    )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            dist = foreign(node.module)
            if dist is None:
                continue
            names = [a.name for a in node.names if a.name != "*"]
            if _private_part(node.module, dist) is not None:
                findings.append(
                    Finding(
                        path,
                        node.lineno,
                        f"{where} imports from {node.module}, private to {dist.name}; "
                        f"{_advice(dist, _public_parent(node.module), names)}"
                        if names
                        else f"{where} imports * from {node.module}, private to {dist.name}",
                    )
                )
            elif node.module == dist.module or _owner(node.module, dists) == dist:
                private_names = [n for n in names if _is_private(n)]
                if private_names:
                    findings.append(
                        Finding(
                            path,
                            node.lineno,
                            f"{where} imports {', '.join(private_names)} from {node.module}, private to "
                            f"{dist.name}; import the public names you need from {node.module} instead",
                        )
                    )
    return findings


def check(root: Path) -> list[Finding]:
    dists = distributions(root)
    findings: list[Finding] = []
    for path, own in files_to_check(root, dists):
        findings.extend(check_file(path, own, dists))
    return findings


def main(argv: list[str] | None = None) -> int:
    return run_check(
        argv,
        __doc__,
        check,
        "import(s) of another distribution's private modules or names",
        lambda root: f"no private imports across distributions ({len(distributions(root))} distributions checked)",
    )


if __name__ == "__main__":
    sys.exit(main())
