"""Guard the namespace-package contract of every ext distribution; exits 1 on any problem.

Usage (Python 3.11+)::

    python tools/checks/check_wheels.py                 # build every wheel, check wheels + hatch envs
    python tools/checks/check_wheels.py --no-build      # only pyproject/source-tree/hatch.toml checks
    python tools/checks/check_wheels.py --builder hatch # build with `hatch build -t wheel`

Wheels are built with ``uv build --wheel`` (falls back to ``hatch build -t wheel``
when uv is not on PATH). Both need only hatchling in their cache, so with a warm
cache the build works offline; each build takes about a second.

Checks per wheel: only the ``ext`` top-level package (plus ``*.dist-info``/``*.data``);
no ``__init__.py`` in ``ext/`` or in any namespace level above the leaf package; no
files outside the leaf; ``py.typed`` and ``__about__.py`` in the leaf; every
``Requires-Dist`` on a workspace member is a bounded range (``>=0.1,<0.2``), not a
pin, and admits that member's current version. Per workspace: each distribution's
folder is named after it, and ``hatch.toml`` has ``[envs.<dist>]`` whose effective
``workspace.members`` is exactly the dist's folder plus its transitive workspace
dependencies, with ``test``, ``typecheck`` and ``lint`` scripts. A member needed only
by the dist's tests (e.g. ``ext-testing``) is declared in the dist's PEP 735
``[dependency-groups]`` (not shipped in metadata); it joins that dist's env only, and
its requirement must be a bounded range too.

Any two distributions install together: the shared envs (``hatch-test``, ``dev``) hold every distribution, so
``hatch test`` resolves and runs them side by side, except those in ``SEPARATE_ENVIRONMENTS``
(tools/checks/_workspace.py, each with its reason), which must be left out of them (``workspace.exclude``) and have
only their own env.
"""

from __future__ import annotations

import argparse
import email.parser
import fnmatch
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from _workspace import (
    REPO_ROOT,
    SEPARATE_ENVIRONMENTS,
    Package,
    canonical_name,
    dependencies_closure,
    discover,
    load_toml,
)
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

NAMESPACE = "ext"
REQUIRED_SCRIPTS = ("test", "typecheck", "lint")
# The envs that install every distribution together (minus SEPARATE_ENVIRONMENTS).
SHARED_ENVS = ("hatch-test", "dev")
# A cold cache may have to download hatchling; anything slower than this is a hang.
BUILD_TIMEOUT_S = 300
_VERSION_RE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""", re.M)


# --------------------------------------------------------------------------- layout


def leaf_package(dist: str, files: Iterable[str]) -> str | None:
    """Directory (``ext/models/llama_cpp``) of the package whose dotted path maps to ``dist``.

    Found from the file list, not guessed: among directories under ``ext/`` holding an
    ``__init__.py``, the one whose path normalises to the distribution name.
    """
    target = canonical_name(dist)
    candidates = sorted(
        {str(PurePosixPath(f).parent) for f in files if PurePosixPath(f).name == "__init__.py"},
        key=lambda d: (d.count("/"), d),
    )
    for directory in candidates:
        if directory.startswith(f"{NAMESPACE}/") and canonical_name(directory.replace("/", "-")) == target:
            return directory
    return None


def check_layout(dist: str, files: Iterable[str], origin: str) -> list[str]:
    """Namespace-layout problems for one distribution's file list (wheel or ``src/``)."""
    names = sorted({f.replace("\\", "/") for f in files if f and not f.endswith("/")})
    problems: list[str] = []

    def report(msg: str) -> None:
        problems.append(f"{dist}: {origin}: {msg}")

    for top in sorted({n.split("/", 1)[0] for n in names}):
        if top.endswith((".dist-info", ".data")) or top == NAMESPACE:
            continue
        report(f"ships top-level {top!r}; only the {NAMESPACE!r} namespace is allowed")
    if f"{NAMESPACE}/__init__.py" in names:
        report(f"ships {NAMESPACE}/__init__.py; the namespace package must not have one (PEP 420)")

    leaf = leaf_package(dist, names)
    if leaf is None:
        dotted = canonical_name(dist).replace("-", ".")
        report(f"no leaf package for {dist!r} (expected a package like {dotted!r} with __init__.py)")
        return problems

    ancestors = [str(p) for p in PurePosixPath(leaf).parents if str(p) not in (".", NAMESPACE)]
    for level in sorted(ancestors):
        if f"{level}/__init__.py" in names:
            report(f"ships {level}/__init__.py; namespace level above {leaf} must not have one")
    namespace_inits = {f"{level}/__init__.py" for level in [NAMESPACE, *ancestors]}
    for name in names:
        outside = name.startswith(f"{NAMESPACE}/") and not name.startswith(f"{leaf}/")
        if outside and name not in namespace_inits:
            report(f"ships {name} outside its leaf package {leaf}/")
    for required in ("py.typed", "__about__.py"):
        if f"{leaf}/{required}" not in names:
            report(f"leaf package {leaf}/ lacks {required}")
    return problems


# --------------------------------------------------------------------- requirements


def check_requirements(
    dist: str,
    requirements: Iterable[str],
    versions: Mapping[str, str | None],
    origin: str,
) -> list[str]:
    """Problems with requirements on workspace members (keys of ``versions``).

    A member requirement must be a range with both a lower and an upper bound; an
    exact pin (``==``/``===``) or an open-ended ``>=`` is rejected. When the member's
    current version is known, the range must admit it.
    """
    problems: list[str] = []
    for raw in requirements:
        try:
            req = Requirement(raw)
        except InvalidRequirement as exc:
            problems.append(f"{dist}: {origin}: unparsable requirement {raw!r}: {exc}")
            continue
        member = canonical_name(req.name)
        if member not in versions or member == canonical_name(dist):
            continue
        spec = str(req.specifier) or "(no version constraint)"
        ops = {s.operator for s in req.specifier}
        if ops & {"==", "==="}:
            problems.append(
                f"{dist}: {origin}: requirement on {member} is an exact pin {spec!r}; use a range like '>=0.1,<0.2'"
            )
            continue
        has_upper = bool(ops & {"<", "<=", "~="})
        has_lower = bool(ops & {">", ">=", "~="})
        if not (has_upper and has_lower):
            missing = "upper" if not has_upper else "lower"
            problems.append(
                f"{dist}: {origin}: requirement on {member} {spec!r} has no {missing} bound; "
                "use a range like '>=0.1,<0.2'"
            )
            continue
        current = versions.get(member)
        if current is not None and not req.specifier.contains(current, prereleases=True):
            problems.append(
                f"{dist}: {origin}: requirement on {member} {spec!r} excludes its workspace version {current}"
            )
    return problems


# ---------------------------------------------------------------------------- wheels


@dataclass(frozen=True)
class WheelInfo:
    path: Path
    name: str
    version: str
    files: tuple[str, ...]
    requires_dist: tuple[str, ...]


def read_wheel(path: Path) -> WheelInfo:
    """File list and core metadata of a wheel; raises ValueError if it has no METADATA."""
    with zipfile.ZipFile(path) as zf:
        files = tuple(zf.namelist())
        metadata_names = [f for f in files if f.count("/") == 1 and f.endswith(".dist-info/METADATA")]
        if len(metadata_names) != 1:
            raise ValueError(f"{path.name}: expected one *.dist-info/METADATA, found {len(metadata_names)}")
        text = zf.read(metadata_names[0]).decode("utf-8")
    msg = email.parser.HeaderParser().parsestr(text)
    return WheelInfo(
        path=path,
        name=canonical_name(msg.get("Name", "")),
        version=msg.get("Version", ""),
        files=files,
        requires_dist=tuple(msg.get_all("Requires-Dist") or ()),
    )


def check_wheel(info: WheelInfo, versions: Mapping[str, str | None]) -> list[str]:
    """All wheel-level problems: layout plus member requirements."""
    origin = f"wheel {info.path.name}"
    return check_layout(info.name, info.files, origin) + check_requirements(
        info.name, info.requires_dist, versions, origin
    )


def _build_command(builder: str, folder: Path, out_dir: Path) -> list[str]:
    if builder == "uv":
        return ["uv", "build", "--wheel", "--out-dir", str(out_dir), str(folder)]
    return ["hatch", "build", "-t", "wheel", str(out_dir)]


def pick_builder(requested: str) -> str | None:
    if requested != "auto":
        return requested if shutil.which(requested) else None
    for candidate in ("uv", "hatch"):
        if shutil.which(candidate):
            return candidate
    return None


def build_wheel(builder: str, root: Path, pkg: Package, out_dir: Path) -> tuple[Path | None, str]:
    """Build one wheel into its own folder; returns (wheel path or None, error text)."""
    target = out_dir / pkg.name
    target.mkdir(parents=True, exist_ok=True)
    folder = root / pkg.folder
    try:
        proc = subprocess.run(
            _build_command(builder, folder, target),
            cwd=folder,
            capture_output=True,
            text=True,
            check=False,
            timeout=BUILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {BUILD_TIMEOUT_S}s"
    wheels = sorted(target.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return None, " | ".join(tail) or f"exit code {proc.returncode}, {len(wheels)} wheel(s)"
    return wheels[0], ""


# -------------------------------------------------------------------------- workspace


def source_version(root: Path, pkg: Package) -> str | None:
    """``__version__`` from the leaf package's ``__about__.py`` in the source tree."""
    src = root / pkg.folder / "src"
    leaf = leaf_package(pkg.name, _source_files(src))
    if leaf is None:
        return None
    about = src / leaf / "__about__.py"
    if not about.is_file():
        return None
    match = _VERSION_RE.search(about.read_text(encoding="utf-8"))
    if match is None:
        return None
    try:
        return str(Version(match.group(1)))
    except InvalidVersion:
        return None


def _is_build_junk(rel: PurePosixPath) -> bool:
    # Tool caches and bytecode that hatchling leaves out of wheels (they are git-ignored).
    return rel.suffix in (".pyc", ".pyo") or any(
        part == "__pycache__" or part.startswith(".") or part.endswith(".egg-info") for part in rel.parts
    )


def _source_files(src: Path) -> list[str]:
    """Files under ``src/`` that would end up in the wheel, as posix paths relative to it."""
    if not src.is_dir():
        return []
    rels = (PurePosixPath(p.relative_to(src).as_posix()) for p in src.rglob("*") if p.is_file())
    return sorted(str(r) for r in rels if not _is_build_junk(r))


def check_folder_names(packages: Mapping[str, Package]) -> list[str]:
    problems = []
    for pkg in packages.values():
        folder_name = PurePosixPath(pkg.folder).name
        if folder_name != pkg.name:
            problems.append(
                f"{pkg.name}: {pkg.folder}: folder must be named after the distribution (packages/{pkg.name})"
            )
    return problems


def load_hatch_envs(root: Path) -> dict[str, dict[str, Any]]:
    """The ``envs`` table from ``hatch.toml`` (or ``[tool.hatch.envs]`` of pyproject.toml)."""
    hatch_toml = root / "hatch.toml"
    if hatch_toml.is_file():
        envs = load_toml(hatch_toml).get("envs", {})
    else:
        pyproject = root / "pyproject.toml"
        data = load_toml(pyproject) if pyproject.is_file() else {}
        envs = data.get("tool", {}).get("hatch", {}).get("envs", {})
    return {k: v for k, v in envs.items() if isinstance(v, dict)}


def effective_env(envs: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, Any] | None:
    """Env config after hatch's template inheritance, or None if ``name`` is undefined.

    Mirrors hatch: ``template`` defaults to ``default``; ``detached`` or a
    self-referencing template stops inheritance; inherited keys only fill gaps
    (shallow), except ``scripts``, which merge per script.
    """
    if name not in envs:
        return None
    merged: dict[str, Any] = {}
    current: str | None = name
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        config = envs.get(current, {})
        for key, value in config.items():
            if key in ("template", "detached", "matrix") and current != name:
                continue
            if key == "scripts" and isinstance(value, Mapping):
                scripts = merged.setdefault("scripts", {})
                for script, command in value.items():
                    scripts.setdefault(script, command)
            else:
                merged.setdefault(key, value)
        if config.get("detached"):
            break
        template = config.get("template", "default")
        current = None if template == current else str(template)
    return merged


def workspace_members(env: Mapping[str, Any], root: Path) -> set[str] | str:
    """Member folders (relative posix paths) of an env; a string describes a config error."""
    workspace = env.get("workspace", {})
    if not isinstance(workspace, Mapping):
        return "workspace is not a table"
    raw = workspace.get("members", [])
    exclude = workspace.get("exclude", [])
    if not isinstance(raw, list) or not isinstance(exclude, list):
        return "workspace.members/exclude must be arrays"
    members: set[str] = set()
    for entry in raw:
        path = entry.get("path") if isinstance(entry, Mapping) else entry
        if not isinstance(path, str) or not path:
            return f"invalid workspace member {entry!r}"
        path = path.replace("\\", "/").strip("/")
        while path.startswith("./"):
            path = path[2:]
        if any(ch in path for ch in "*?["):
            members.update(p.relative_to(root).as_posix() for p in root.glob(path) if (p / "pyproject.toml").is_file())
        else:
            members.add(path)
    return {m for m in members if not any(fnmatch.fnmatch(m, str(pat)) for pat in exclude)}


def check_envs(root: Path, packages: Mapping[str, Package]) -> list[str]:
    """Per-distribution hatch env problems (missing env, wrong members, missing scripts)."""
    envs = load_hatch_envs(root)
    problems: list[str] = []
    for name in sorted(packages):
        pkg = packages[name]
        closure = dependencies_closure(name, packages, include_test=True)
        expected = {pkg.folder} | {packages[d].folder for d in closure}
        want = ", ".join(f'"{m}"' for m in sorted(expected))
        env = effective_env(envs, name)
        if env is None:
            problems.append(f"{name}: hatch.toml: no [envs.{name}] (needs workspace.members = [{want}])")
            continue
        members = workspace_members(env, root)
        if isinstance(members, str):
            problems.append(f"{name}: hatch.toml: [envs.{name}] {members}")
        elif members != expected:
            extra = sorted(members - expected)
            missing = sorted(expected - members)
            detail = "; ".join(
                part
                for part in (
                    f"unexpected {extra}; a test-only member belongs in the dist's [dependency-groups]"
                    if extra
                    else "",
                    f"missing {missing}" if missing else "",
                )
                if part
            )
            problems.append(f"{name}: hatch.toml: [envs.{name}] workspace.members must be exactly [{want}] ({detail})")
        scripts = env.get("scripts", {})
        absent = [s for s in REQUIRED_SCRIPTS if not isinstance(scripts, Mapping) or s not in scripts]
        if absent:
            problems.append(f"{name}: hatch.toml: [envs.{name}.scripts] lacks {', '.join(absent)}")
    return problems


def check_shared_envs(
    root: Path, packages: Mapping[str, Package], separate: Mapping[str, str] = SEPARATE_ENVIRONMENTS
) -> list[str]:
    """The shared envs hold every distribution but the separate ones (any two of the rest install together)."""
    envs = load_hatch_envs(root)
    problems: list[str] = []
    expected = {pkg.folder for name, pkg in packages.items() if name not in separate}
    apart = {pkg.folder: name for name, pkg in packages.items() if name in separate}
    for env_name in SHARED_ENVS:
        env = effective_env(envs, env_name)
        if env is None:
            continue
        members = workspace_members(env, root)
        if isinstance(members, str):
            problems.append(f"hatch.toml: [envs.{env_name}] {members}")
            continue
        for folder in sorted(members & set(apart)):
            reason = separate[apart[folder]]
            problems.append(f"hatch.toml: [envs.{env_name}] must exclude {folder} (its own env only: {reason})")
        missing = sorted(expected - members)
        if missing:
            problems.append(
                f"hatch.toml: [envs.{env_name}] lacks {missing}: every distribution installs together there, "
                "unless tools/checks/_workspace.py SEPARATE_ENVIRONMENTS says why not"
            )
    return problems


# ------------------------------------------------------------------------------ main


@dataclass(frozen=True)
class Report:
    problems: list[str]
    distributions: int
    wheels: int


def run(root: Path, *, build: bool, builder: str, keep: Path | None = None) -> Report:
    """All checks over one discovery of the workspace."""
    packages = discover(root)
    problems = check_folder_names(packages) + check_envs(root, packages) + check_shared_envs(root, packages)
    versions: dict[str, str | None] = {n: source_version(root, p) for n, p in packages.items()}
    for name in sorted(packages):
        pkg = packages[name]
        # Dependency groups never reach wheel metadata, so pyproject is their only source.
        origin = f"{pkg.folder}/pyproject.toml [dependency-groups]"
        problems += check_requirements(name, pkg.group_requirements, versions, origin)
    if not build:
        for name in sorted(packages):
            pkg = packages[name]
            src = root / pkg.folder / "src"
            problems += check_layout(name, _source_files(src), f"{pkg.folder}/src")
            problems += check_requirements(name, pkg.requirements, versions, f"{pkg.folder}/pyproject.toml")
        return Report(problems, len(packages), 0)

    chosen = pick_builder(builder)
    if chosen is None:
        wanted = builder if builder != "auto" else "uv or hatch"
        return Report([*problems, f"build: no {wanted} on PATH"], len(packages), 0)
    wheels: list[WheelInfo] = []
    with tempfile.TemporaryDirectory(prefix="ext-wheels-") as tmp:
        out_dir = keep if keep is not None else Path(tmp)
        for name in sorted(packages):
            path, error = build_wheel(chosen, root, packages[name], out_dir)
            if path is None:
                problems.append(f"{name}: {chosen} build failed: {error}")
                continue
            try:
                wheels.append(read_wheel(path))
            except (ValueError, zipfile.BadZipFile) as exc:
                problems.append(f"{name}: unreadable wheel: {exc}")
    for info in wheels:
        # Built metadata is the truth for versions; the source regex is a fallback.
        versions[info.name] = info.version or versions.get(info.name)
    for info in wheels:
        if info.name not in packages:
            problems.append(f"{info.path.name}: metadata Name {info.name!r} is not a workspace member")
        problems += check_wheel(info, versions)
    return Report(problems, len(packages), len(wheels))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--no-build", action="store_true", help="skip building; check metadata, sources and envs")
    parser.add_argument("--builder", choices=("auto", "uv", "hatch"), default="auto")
    parser.add_argument("--keep", type=Path, help="write wheels here instead of a temp dir")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    report = run(root, build=not args.no_build, builder=args.builder, keep=args.keep)
    for problem in report.problems:
        print(f"FAIL {problem}")
    mode = "no-build" if args.no_build else f"{report.wheels} wheel(s)"
    status = "OK" if not report.problems else f"{len(report.problems)} problem(s)"
    print(f"check_wheels: {report.distributions} distribution(s), {mode}: {status}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
