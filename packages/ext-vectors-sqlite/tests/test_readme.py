"""The README's examples run as written, each in a fresh interpreter (where deferred pydantic schemas are built
for the first time), in a temporary working directory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.parametrize(
    ("index", "expected"),
    [(0, "[('a', 0.995), ('b', 0.1)]"), (1, "ops.md 0 The deploy key rotates every ninety days.")],
)
def test_readme_example_runs(index: int, expected: str, tmp_path: Path) -> None:
    assert len(EXAMPLES) == 2
    script = tmp_path / "example.py"
    script.write_text(EXAMPLES[index], encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected
