"""`ext chat` on the embedded default model (SmolLM2-135M through llama.cpp, in process), as a user runs it:
no -m, no key, no network."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TOOLS = Path(__file__).resolve().parents[1] / "packages" / "ext-cli" / "tests"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "AZURE_", "OLLAMA_"))}


def _ext(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ext.cli", *args],
        capture_output=True, text=True, timeout=300, check=False, cwd=TOOLS, env=_env(),
    )  # fmt: skip


def test_default_model_answers() -> None:
    done = _ext(
        "chat", "-o", "temperature=0", "-o", "max_tokens=40", "What is the capital of France? Answer in one sentence."
    )
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    assert "llama-cpp:SmolLM2-135M-Instruct.Q4_1.gguf" in done.stderr  # the progress line names the model


def test_default_model_calls_a_tool_through_the_loop() -> None:
    done = _ext(
        "chat", "-o", "temperature=0", "--tool", "cli_tools:get_weather", "--tool-choice", "required",
        "What is the weather in Oslo?",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '→ get_weather({"city":"Oslo"})' in done.stderr
    assert "← get_weather: sunny in Oslo, 21 C" in done.stderr
    assert "sunny" in done.stdout.lower()


def test_ctrl_c_stops_generation_at_once() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ext.cli", "chat", "-o", "max_tokens=500", "Write a very long story about a dragon."],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=TOOLS, env=_env(),
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.read(8)  # the model is generating
    assert first
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _rest, err = proc.communicate(timeout=60)
    stopped = time.monotonic() - sent
    assert proc.returncode == 130
    assert b"interrupted" in err and b"Traceback" not in err
    assert b"[length" not in err  # it did not run on to its 500 tokens
    assert stopped < 10, stopped  # a bound on "at once" that a loaded machine still meets; typically ~0.1 s
