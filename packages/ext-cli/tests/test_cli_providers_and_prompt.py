"""The `ext` command's provider declarations, tools output, interactive history, Ctrl-C and config checks, each
driven as a user runs the command: a real process against ext-testing's loopback servers."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path

from ext_cli_support import HERE, KEY, clean_env, run_ext

from ext.testing.script import Reply, ToolCallSpec
from ext.testing.servers import AzureAIServer, OpenAIServer

# --- azure-ai: endpoint from AZURE_AI_ENDPOINT or --endpoint, key from AZURE_AI_API_KEY -------------------------


async def test_chat_with_azure_ai_takes_the_endpoint_from_the_environment_or_the_option() -> None:
    async with AzureAIServer(api_key="azure-ai-cli-key") as server:
        server.enqueue(Reply(text="Bonjour."), Reply(text="Hallo."))
        endpoint = server.base_url + "/models"
        env = clean_env(AZURE_AI_ENDPOINT=endpoint, AZURE_AI_API_KEY="azure-ai-cli-key")
        ran = await run_ext("chat", "-m", "azure-ai:my-model", "Say hello in French.", env=env)
        assert ran.code == 0, ran.err
        assert ran.out == "Bonjour.\n"
        # The other spelling and the option (no endpoint variable set).
        env = clean_env(AZURE_AI_API_KEY="azure-ai-cli-key")
        ran = await run_ext("chat", "-m", "azure_ai:my-model", "--endpoint", endpoint, "Say hello in German.", env=env)
        assert ran.code == 0, ran.err
        assert ran.out == "Hallo.\n"
        bodies = [r.json for r in server.requests]
        assert [b["model"] for b in bodies] == ["my-model", "my-model"]  # type: ignore[index]
        # Without either, the error names both ways to give it, before any request.
        missing = await run_ext("chat", "-m", "azure-ai:my-model", "Hi", env=clean_env(AZURE_AI_API_KEY="k"))
        assert missing.code == 1
        assert "endpoint" in missing.err and "AZURE_AI_ENDPOINT" in missing.err and "--endpoint" in missing.err
        assert len(server.requests) == 2


# --- tools: only the final answer on stdout; history keeps calls and results -----------------------------------


async def test_intermediate_model_text_goes_to_stderr_with_tools() -> None:
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(
            Reply(text="Let me look that up.", tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]),
            Reply(text="It is sunny in Oslo."),
        )
        env = clean_env(OPENAI_API_KEY=KEY, OPENAI_BASE_URL=f"{server.base_url}/v1")
        ran = await run_ext("chat", "-m", "openai:m", "--tool", "cli_tools:get_weather", "Weather in Oslo?", env=env)
        assert ran.code == 0, ran.err
        assert ran.out == "It is sunny in Oslo.\n"
        assert "Let me look that up." in ran.err


async def test_interactive_history_keeps_tool_calls_and_results() -> None:
    async with OpenAIServer(api_key=KEY) as server:
        server.enqueue(
            Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"}, id="call_oslo")]),
            Reply(text="Sunny in Oslo."),
            Reply(text="You asked about Oslo."),
        )
        env = clean_env(OPENAI_API_KEY=KEY, OPENAI_BASE_URL=f"{server.base_url}/v1")
        ran = await run_ext(
            "chat", "-m", "openai:m", "--tool", "cli_tools:get_weather", env=env,
            stdin="Weather in Oslo?\nWhich city did the tool report on?\nexit\n",
        )  # fmt: skip
        assert ran.code == 0, ran.err
        follow_up = server.decode(server.requests[2])
        roles = [m.role for m in follow_up.messages]
        assert roles == ["user", "assistant", "tool", "assistant", "user"]
        call = follow_up.messages[1].tool_calls[0]
        assert (call.name, call.arguments, call.id) == ("get_weather", {"city": "Oslo"}, "call_oslo")
        result = follow_up.messages[2].tool_results[0]
        assert (result.call_id, result.content) == ("call_oslo", "sunny in Oslo, 21 C")
        assert follow_up.messages[3].text == "Sunny in Oslo."


# --- Ctrl-C at the interactive prompt ------------------------------------------------------------------------


def test_ctrl_c_at_the_prompt_exits_130_at_once() -> None:
    # A real terminal (a pty), the command waiting at its prompt, then SIGINT: no Enter is ever sent.
    # Nothing is sent before the first line, so the endpoint is never contacted.
    if True:
        env = clean_env(OPENAI_API_KEY=KEY, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ext.cli", "chat", "-m", "openai:m"],
            stdin=follower, stdout=follower, stderr=follower, cwd=HERE, env=env, start_new_session=True,
        )  # fmt: skip
        os.close(follower)
        seen = b""
        try:
            while b"> " not in seen:  # the prompt is up: the command waits for a line
                ready, _, _ = select.select([leader], [], [], 60)
                assert ready, f"no prompt: {seen!r}"
                seen += os.read(leader, 1024)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=20)  # waits for exit, not for time: a hang fails here
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(leader)
        assert code == 130


# --- config check: no client built, every malformed input named ---------------------------------------------


async def test_config_check_does_not_build_the_client(tmp_path: Path) -> None:
    # An azure-ai client that would fail to build (no key anywhere) and a client class that is never instantiated:
    # the check reads its declaration and signature only.
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps({"client": {"provider": "azure_ai", "args": {"model": "m", "endpoint": "https://x"}}}))
    ran = await run_ext("config", "check", str(path), env=clean_env())
    assert ran.code == 0, ran.err
    assert ran.out.splitlines()[:2] == [
        f"{path}: valid",
        "  client: AzureAIChatCompletionClient from provider azure-ai (model m)",
    ]


async def test_config_check_names_the_file_and_the_field(tmp_path: Path) -> None:
    cases: dict[str, tuple[bytes, str]] = {
        "config.json": (b'{"client": {"provider": "openai", "config": [1]}}', "client.config must be a mapping"),
        "options.json": (b'{"client": {"provider": "openai", "options": "x"}}', "client.options must be a mapping"),
        "logging.json": (
            b'{"client": {"provider": "openai"}, "middleware": [{"logging": true}]}',
            "middleware[0].logging must be a mapping",
        ),
        "latin1.json": (b'{"client": {"provider": "caf\xe9"}}', "not UTF-8 text"),
        "credential.json": (
            b'{"client": {"provider": "azure-ai", "args": {"model": "m", "credential": "literal-key"}}}',
            "client.args.credential: a secret is not read from config files",
        ),
        "headers.json": (
            b'{"client": {"provider": "ollama", "args": {"model": "m", "headers": {"Authorization": "Bearer lit"}}}}',
            "client.args.headers.Authorization: a secret",
        ),
        "default_headers.json": (
            b'{"client": {"provider": "openai", "args": {"model": "m", "default_headers": {"X-Team": "lit"}}}}',
            "client.args.default_headers.X-Team: a secret",  # SecretStr-typed header map: every value is secret
        ),
        "nested.json": (
            b'{"client": {"provider": "openai"}, "middleware": [{"tool_loop": {"tools": [{"provider": '
            b'"ext.tools.http.HttpTool", "config": {"name": "t", "host": "h", "port": 1, "json_schema": {}, '
            b'"headers": {"X-Api-Key": "lit"}}}]}}]}',
            "middleware[0].tool_loop.tools[0].config.headers.X-Api-Key: a secret",
        ),
    }
    for name, (content, expected) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        ran = await run_ext("config", "check", str(path), env=clean_env(OPENAI_API_KEY=KEY))
        assert ran.code == 1, (name, ran.out)
        assert f"error: {path}: {expected}" in ran.err, (name, ran.err)
        assert "lit" not in ran.err.replace("literal", "") and "literal-key" not in ran.err
        assert "Traceback" not in ran.err
