"""The README's example runs as written, in a fresh interpreter, against the test Chroma server (CHROMA_URL)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ext.testing.chroma import ChromaServer
from ext.testing.readme import python_example

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(chroma: ChromaServer, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(python_example(README, "ChromaVectorStore"), encoding="utf-8")
    env = {**os.environ, "CHROMA_URL": chroma.url}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "a 0.995 alpha"
