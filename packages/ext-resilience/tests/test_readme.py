"""The README's fallback example runs as written: its OpenAI client gets a 429 asking to wait a minute from a
loopback server (reached through OPENAI_BASE_URL), so the Anthropic backup (ANTHROPIC_BASE_URL) answers at once."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from ext.testing.readme import python_example
from ext.testing.servers import AnthropicServer, Fault, OpenAIServer, Reply

README = Path(__file__).resolve().parents[1] / "README.md"


async def test_the_fallback_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(python_example(README, "FallbackMiddleware"), encoding="utf-8")
    async with OpenAIServer(api_key="sk-readme") as openai_server, AnthropicServer(api_key="sk-readme") as backup:
        openai_server.enqueue(Fault("rate_limit", retry_after=60))
        backup.enqueue(Reply(text="Paris."))
        env = {
            **os.environ,
            "OPENAI_API_KEY": "sk-readme",
            "OPENAI_BASE_URL": openai_server.base_url + "/v1",
            "ANTHROPIC_API_KEY": "sk-readme",
            "ANTHROPIC_BASE_URL": backup.base_url,
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        assert out.decode() == "Paris.\n"
        assert len(openai_server.requests) == 1  # no retry slept through the minute: the backup answered
        assert len(backup.requests) == 1
