"""The README's first command: tools/demo/demo.py runs two agents on the real embedded model (SmolLM2 through
llama.cpp, temperature 0), each answering with a real tool (an HttpTool against a local service, an MCP server
over stdio), on the in-process runtime and, with --grpc, on a worker behind a real gateway process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "tools" / "demo" / "demo.py"

pytestmark = pytest.mark.integration


def _run(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, str(DEMO), *args], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout.splitlines()


def _block(lines: list[str], agent: str) -> list[str]:
    start = lines.index(f"[{agent} agent]")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    return [line for line in lines[start + 1 : end] if line]


def _usage(line: str) -> tuple[int, int]:
    words = line.split()
    assert words[:2] == ["usage", ">"], line
    return int(words[2]), int(words[5])


@pytest.mark.parametrize("args", [(), ("--grpc",)], ids=["local-runtime", "grpc-runtime"])
def test_demo_agents_answer_with_their_tools(args: tuple[str, ...]) -> None:
    lines = _run(*args)
    assert lines[0].startswith("model     > SmolLM2-135M-Instruct.Q4_1.gguf (llama.cpp, in process)")
    if args:
        assert any(line.startswith("gateway   > 127.0.0.1:") for line in lines)

    weather = _block(lines, "weather")
    assert weather[0] == "user      > What is the weather in Tokyo?"
    assert weather[1].lower() == 'tool call > get_weather({"city":"tokyo"})'
    assert weather[2] == "tool      > Tokyo: sunny, 21 degrees celsius"
    answer = weather[3].lower()
    assert answer.startswith("assistant > ") and "sunny" in answer and "21" in answer
    prompt, completion = _usage(weather[4])
    assert prompt > 100 and completion > 0  # two model turns: the call, then the answer

    clock = _block(lines, "clock")
    assert clock[0] == "user      > What time is it in Paris?"
    assert clock[1] == 'tool call > local_time({"city":"Paris"})'
    assert clock[2] == "tool      > The local time in Paris is 14:05."
    assert clock[3].startswith("assistant > ") and "14:05" in clock[3]
    _usage(clock[4])
