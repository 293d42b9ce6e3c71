"""The README's usage example runs as written (on the embedded default model, SmolLM2)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs() -> None:
    code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Paris" in lines[0] and "prompt_tokens" in lines[0]
    assert "Paris" in lines[1]
    assert lines[2].startswith("country=") and "capital=" in lines[2]
    assert re.fullmatch(r"\d+ prompt tokens; \d+ left", lines[3])
