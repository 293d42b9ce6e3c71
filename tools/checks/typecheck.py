"""mypy --strict over the whole workspace.

Test files of different distributions share module names (tests/test_client.py), which one mypy run
rejects, so this checks every distribution's sources and the tools together once, then each
distribution's tests (and tests-integration) in a run of their own. Exits non-zero on any error.
The distributions of SEPARATE_ENVIRONMENTS are not installed here: their own envs check them
(`hatch run <dist>:typecheck`, which .ci/run calls).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _workspace import SEPARATE_ENVIRONMENTS

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    packages = sorted(
        p
        for p in (ROOT / "packages").iterdir()
        if (p / "pyproject.toml").is_file() and p.name not in SEPARATE_ENVIRONMENTS
    )
    # A separate distribution's bench imports it: its own env checks that file (bench_<name>.py, by convention).
    skipped = [f"tools/bench/bench_{name.removeprefix('ext-').replace('-', '_')}.py" for name in SEPARATE_ENVIRONMENTS]
    excludes = [arg for path in skipped for arg in ("--exclude", path.replace(".", r"\."))]
    runs = [[*excludes, *(str(p / "src") for p in packages), str(ROOT / "tools")]]
    runs += [[str(p / "tests")] for p in packages if (p / "tests").is_dir()]
    # Test folders beside `tests` (ext-runtime-grpc's tests-autogen); scripts that run in another environment
    # (tests-autogen/autogen_side, AutoGen's) are checked there (`hatch run autogen:typecheck`).
    runs += [["--exclude", "autogen_side", str(d)] for p in packages for d in sorted(p.glob("tests-*")) if d.is_dir()]
    runs.append([str(ROOT / "tests-integration")])
    failed = 0
    for targets in runs:
        label = ", ".join(Path(t).relative_to(ROOT).as_posix() for t in targets[-1:])
        done = subprocess.run([sys.executable, "-m", "mypy", *targets], cwd=ROOT, check=False)
        if done.returncode != 0:
            print(f"typecheck: mypy failed for {label}", file=sys.stderr)
            failed += 1
    print(f"typecheck: {len(runs)} mypy runs, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
