"""The README's example runs as written (on the embedded model), and what it says about installing is what the
distribution declares."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_readme_example_runs() -> None:
    code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    results, answer, tools = done.stdout.splitlines()
    assert re.fullmatch(r"\['It is sunny in [^']+\.'\]", results)  # the kernel invoked its plugin once
    assert answer and answer != "None"
    assert tools == "['weather-weather', 'math-multiply']"


def test_readme_states_the_separate_environment() -> None:
    text = " ".join(README.read_text().split())
    assert "cannot share an environment with ext-tools-mcp" in text
    assert '"semantic-kernel>=1.45,<1.46"' in PYPROJECT.read_text()
