"""The README's usage example runs as written, against the loopback server (OLLAMA_HOST points at it)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from ext.testing.script import Reply, ToolCallSpec
from ext.testing.servers.ollama import OllamaServer

README = Path(__file__).resolve().parents[1] / "README.md"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "the README has no python example"
    return str(blocks[0])


async def test_the_usage_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    async with OllamaServer(models=["qwen3"]) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.base_url)
        server.enqueue(
            Reply(text="4", thought="2 and 2 make 4", prompt_tokens=12, completion_tokens=8),
            Reply(text="1, 2, 3, 4, 5", thought="counting"),
            Reply(
                tool_calls=[
                    ToolCallSpec("get_weather", {"city": "Oslo"}),
                    ToolCallSpec("get_weather", {"city": "Bergen"}),
                ]
            ),
            Reply(text="Sunny in both."),
        )
        code = compile(example(), str(README), "exec")
        # The example calls asyncio.run itself: it runs in a thread (own loop) while the server serves here.
        await asyncio.to_thread(exec, code, {"__name__": "__main__"})
        out = capsys.readouterr().out
        assert "2 and 2 make 4 -> 4 prompt_tokens=12 completion_tokens=8" in out
        assert "type='StreamChunk' content='' thought='counting'" in out
        assert "type='StreamChunk' content='1, ' thought=''" in out
        assert out.rstrip().endswith("Sunny in both.")
        last = server.requests[-1].json
        assert isinstance(last, dict)
        tools = [(m["tool_name"], m["content"]) for m in last["messages"] if m["role"] == "tool"]
        assert tools == [("get_weather", "Sunny in Oslo"), ("get_weather", "Sunny in Bergen")]
        assert last["think"] is True and last["model"] == "qwen3"
