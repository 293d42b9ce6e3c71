"""The README's usage example runs as written (its model is ext-testing's OpenAI-protocol loopback server, reached
through the openai SDK's OPENAI_BASE_URL)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example(index: int = 0) -> str:
    examples = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert len(examples) > index, "the README has fewer python examples than expected"
    return str(examples[index])


async def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(readme_example(), encoding="utf-8")
    async with OpenAIServer(api_key="sk-readme") as server:
        server.enqueue(
            Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]),
            Reply(text="Light rain, 7 degrees."),
        )
        env = {**os.environ, "OPENAI_API_KEY": "sk-readme", "OPENAI_BASE_URL": server.base_url + "/v1"}
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines() == [
        "span: chat gpt-4o-mini",
        "span: execute_tool get_weather",
        "span: chat gpt-4o-mini",
        "span: invoke_agent weather",
        "answer: Light rain, 7 degrees.",
    ]
    assert len(server.requests) == 2


async def test_the_readme_runtime_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "runtime_example.py"
    script.write_text(readme_example(1), encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines() == [
        "hello ada",
        "span: process greeter SERVER",
        "span: send greeter CLIENT",
        "one trace: True",
    ]
