"""`ext a2a serve`: an agent spec served over A2A by a real `ext` process, called with ext-tools-a2a."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import yaml
from ext_cli_support import HERE, clean_env

from ext.testing.redis import free_port
from ext.testing.servers import OpenAIServer, Reply
from ext.tools.a2a import A2AAgentTool

KEY = "sk-cli-a2a"


async def test_a2a_serve_an_agent_spec(tmp_path: Path) -> None:
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Reply(text="Hi from the spec"))
        spec = tmp_path / "agent.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "name": "greeter",
                    "description": "Greets people.",
                    "instructions": "Greet.",
                    "model": {
                        "client": {
                            "provider": "openai",
                            "options": {
                                "endpoint": server.base_url + "/v1",
                                "default_model": "gpt-4o-mini",
                                "api_key_env": "OPENAI_API_KEY",
                            },
                            "args": {"max_retries": 0},
                        }
                    },
                }
            )
        )
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "ext.cli",
            "a2a",
            "serve",
            "--agent",
            str(spec),
            "--port",
            str(port),
            "--store",
            str(tmp_path / "store"),
            cwd=HERE,
            env=clean_env(OPENAI_API_KEY=KEY),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stderr is not None
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert f"serving 'greeter' over A2A at http://127.0.0.1:{port}" in line, line
            async with await A2AAgentTool.from_url(f"http://127.0.0.1:{port}") as tool:
                assert (tool.name, tool.description) == ("greeter", "Greets people.")
                reply = await tool.send("hello")
            assert (reply.state, reply.text) == ("completed", "Hi from the spec")
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 20)
    # The session and the task were written to the file store.
    assert any((tmp_path / "store").rglob("*"))


async def test_a2a_serve_a_pipeline_file(tmp_path: Path) -> None:
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(Reply(text="From the pipeline"))
        pipeline = tmp_path / "helper.yaml"
        pipeline.write_text(
            yaml.safe_dump(
                {
                    "client": {
                        "provider": "openai",
                        "options": {
                            "endpoint": server.base_url + "/v1",
                            "default_model": "gpt-4o-mini",
                            "api_key_env": "OPENAI_API_KEY",
                            "max_retries": 0,
                        },
                    },
                    "middleware": [{"retry": {"max_retries": 0}}],
                }
            )
        )
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "ext.cli",
            "a2a",
            "serve",
            "--pipeline",
            str(pipeline),
            "--description",
            "A helpful pipeline.",
            "--port",
            str(port),
            cwd=HERE,
            env=clean_env(OPENAI_API_KEY=KEY),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stderr is not None
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert f"serving 'helper' over A2A at http://127.0.0.1:{port}" in line, line
            async with await A2AAgentTool.from_url(f"http://127.0.0.1:{port}") as tool:
                assert (tool.name, tool.description) == ("helper", "A helpful pipeline.")
                reply = await tool.send("hello")
            assert (reply.state, reply.text) == ("completed", "From the pipeline")
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 20)


async def test_a2a_serve_needs_exactly_one_source() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ext.cli",
        "a2a",
        "serve",
        cwd=HERE,
        env=clean_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert b"give exactly one of --agent FILE and --pipeline FILE" in err
