"""The README's rate-limit and budget example, run as written (in its own process, as a user runs it) against the
OpenAI loopback server."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from ext_resilience_limits_support import KEY

from ext.testing.readme import python_example
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

README = Path(__file__).resolve().parents[1] / "README.md"


async def test_the_readme_example_runs(limits_server: OpenAIServer) -> None:
    limits_server.enqueue(
        Reply(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3})], prompt_tokens=1000, completion_tokens=20),
        Reply(text="5", prompt_tokens=1100, completion_tokens=1),
    )
    code = python_example(README, "BudgetMiddleware(budget)")
    env = {**os.environ, "OPENAI_BASE_URL": limits_server.base_url + "/v1", "OPENAI_API_KEY": KEY}
    run = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(run.communicate(), 120)
    assert run.returncode == 0, err.decode()
    # 2100 input and 21 output tokens of gpt-4o-mini at $0.15 and $0.60 per million
    assert out.decode().split() == ["5", "-", "spent", "today:", "0.0003276", "USD"]
    assert len(limits_server.requests) == 2
