"""The README's first command: tools/demo.py runs a full tool-calling exchange."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "tools" / "demo.py"


def test_demo_runs_a_tool_calling_exchange() -> None:
    done = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "user      > What's the weather in Oslo?"
    assert lines[1] == 'tool call > get_weather({"city":"Oslo"})'
    assert lines[2] == "tool      > Oslo: 7 degrees celsius, light rain"
    assert lines[3] == "assistant > According to the weather tool: Oslo: 7 degrees celsius, light rain."
    assert lines[4] == "usage     > 62 prompt + 14 completion tokens"
    assert lines[5].startswith("wire      > 2 requests to http://127.0.0.1:")
