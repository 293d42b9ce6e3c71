"""The `ext` command as a user runs it: a real process, real providers over loopback, a real MCP server."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from ext_cli_support import HERE, KEY, MCP_SERVER, TinyHttpService, clean_env, run_ext

from ext.testing.script import Reply, ToolCallSpec
from ext.testing.servers import AnthropicServer, OllamaServer, OpenAIServer

ANSI = re.compile(r"\x1b\[")


# --- chat -------------------------------------------------------------------------------------------


async def test_chat_streams_the_answer_as_plain_text(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    server.enqueue(Reply(text="The capital of France is Paris.", prompt_tokens=12, completion_tokens=7))
    ran = await run_ext("chat", "-m", "openai:gpt-4o-mini", "-s", "Be brief.", "Capital of France?", env=openai_env)
    assert ran.code == 0, ran.err
    assert ran.out == "The capital of France is Paris.\n"
    assert not ANSI.search(ran.out) and not ANSI.search(ran.err)
    assert "12 prompt + 7 completion tokens; $0.000006]" in ran.err  # priced by ext-resilience (ext-cli[cost])
    request = server.decode(server.requests[0])
    assert request.stream is True
    assert request.model == "gpt-4o-mini"
    assert request.system == ["Be brief."]
    assert request.messages[-1].text == "Capital of France?"


async def test_chat_with_anthropic_fills_its_required_max_tokens() -> None:
    async with AnthropicServer(api_key=KEY) as anthropic_server:
        anthropic_server.enqueue(Reply(text="Bonjour."))
        env = clean_env(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=anthropic_server.base_url)
        ran = await run_ext("chat", "-m", "anthropic:claude-sonnet-4-5", "Say hello in French.", env=env)
        assert ran.code == 0, ran.err
        assert ran.out == "Bonjour.\n"
        body = anthropic_server.requests[0].json
        assert isinstance(body, dict)
        assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 1024  # the command's default
        ran = await run_ext("chat", "-m", "anthropic:claude-sonnet-4-5", "-o", "temperature=1.5", "Hi", env=env)
        assert ran.code == 1 and "temperature" in ran.err  # Anthropic takes 0 to 1: refused before sending
        assert len(anthropic_server.requests) == 1


async def test_chat_with_ollama_through_ollama_host() -> None:
    async with OllamaServer(models=["llama3.2:1b"]) as ollama_server:
        ollama_server.enqueue(Reply(text="Hello from Ollama."))
        env = clean_env(OLLAMA_HOST=ollama_server.base_url)
        ran = await run_ext("chat", "-m", "ollama:llama3.2:1b", "Hi", env=env)  # the model name holds a colon
        assert ran.code == 0, ran.err
        assert ran.out == "Hello from Ollama.\n"
        body = ollama_server.requests[0].json
        assert isinstance(body, dict) and body["model"] == "llama3.2:1b"
        missing = await run_ext("chat", "-m", "ollama:not-pulled", "Hi", env=env)
        assert missing.code == 1 and "ollama pull not-pulled" in missing.err


async def test_chat_options_reach_the_wire(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    server.enqueue(Reply(text="ok"))
    ran = await run_ext(
        "chat", "-m", "openai:gpt-4o-mini", "-o", "temperature=0.2", "-o", "max_tokens=33", "-o", "stop_sequences=END",
        "hi", env=openai_env,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    body = server.requests[0].json
    assert isinstance(body, dict)
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 33 or body.get("max_completion_tokens") == 33
    assert body["stop"] == ["END"]


async def test_interactive_chat_keeps_the_conversation(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    server.enqueue(Reply(text="Hi Ada."), Reply(text="Your name is Ada."))
    ran = await run_ext("chat", "-m", "openai:gpt-4o-mini", env=openai_env, stdin="I am Ada.\n\nWho am I?\nexit\n")
    assert ran.code == 0, ran.err
    assert "Hi Ada.\n" in ran.out and "Your name is Ada.\n" in ran.out
    second = server.decode(server.requests[1])
    assert [(m.role, m.text) for m in second.messages] == [
        ("user", "I am Ada."),
        ("assistant", "Hi Ada."),
        ("user", "Who am I?"),
    ]


async def test_bad_option_fails_before_any_request(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    ran = await run_ext("chat", "-m", "openai:gpt-4o-mini", "-o", "temperature=5", "hi", env=openai_env)
    assert ran.code == 1
    assert "temperature" in ran.err and "error:" in ran.err
    assert "Traceback" not in ran.err
    unknown = await run_ext("chat", "-m", "openai:gpt-4o-mini", "-o", "temprature=1", "hi", env=openai_env)
    assert unknown.code == 1 and "temprature" in unknown.err and "hint:" in unknown.err
    assert server.requests == []


async def test_debug_shows_the_traceback(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    ran = await run_ext("--debug", "chat", "-m", "nope:model", "hi", env=openai_env)
    assert ran.code == 1
    assert "Traceback" in ran.err and "unknown provider 'nope'" in ran.err


async def test_missing_provider_names_what_to_install() -> None:
    ran = await run_ext("chat", "-m", "bogus:model", "hi")
    assert ran.code == 1
    assert "unknown provider 'bogus'" in ran.err
    assert "openai" in ran.err  # the hint lists the known providers


async def test_json_mode_and_schema(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    server.enqueue(Reply(text='{"ok": true}'), Reply(text='{"name": "Ada", "age": 36}'))
    ran = await run_ext("chat", "-m", "openai:gpt-4o-mini", "--json", "give json", env=openai_env)
    assert ran.code == 0, ran.err
    assert json.loads(ran.out) == {"ok": True}
    assert server.decode(server.requests[0]).json_mode is True
    ran = await run_ext("chat", "-m", "openai:gpt-4o-mini", "--schema", "name, age int", "who", env=openai_env)
    assert ran.code == 0, ran.err
    assert json.loads(ran.out) == {"name": "Ada", "age": 36}
    schema = server.decode(server.requests[1]).json_schema
    assert schema is not None
    inner: dict[str, Any] = schema.get("schema", schema)
    assert inner["properties"]["age"]["type"] == "integer"
    assert sorted(inner["required"]) == ["age", "name"]


async def test_bad_schema_is_named() -> None:
    ran = await run_ext("chat", "-m", "openai:x", "--schema", "age integer", "q")
    assert ran.code == 1 and "--schema" in ran.err and "TYPE" in ran.err


async def test_bad_json_files_are_named_with_their_option(tmp_path: Path) -> None:
    # --schema FILE and --http-tool FILE share one reader: each error names the option and the file it was given.
    broken = tmp_path / "broken.json"
    broken.write_text('{"type": ', encoding="utf-8")
    for option in ("--schema", "--http-tool"):
        ran = await run_ext("chat", "-m", "openai:x", option, str(broken), "q")
        assert ran.code == 1 and f"{option} {broken}: not valid JSON: Expecting value (line 1)" in ran.err
    ran = await run_ext("chat", "-m", "openai:x", "--schema", "/nonexistent.json", "q")
    assert ran.code == 1 and "--schema /nonexistent.json: no such file" in ran.err


async def test_interrupt_stops_generation_and_exits_130(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    server.enqueue(Reply(text="one two three four five six", stall_after_chunks=2))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.cli", "chat", "-m", "openai:gpt-4o-mini", "go",
        env=openai_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    first = await asyncio.wait_for(proc.stdout.read(3), 30)  # the first streamed words arrived: it is generating
    assert first == b"one"
    proc.send_signal(signal.SIGINT)
    _rest, err = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 130
    assert "interrupted" in err.decode()
    assert "Traceback" not in err.decode()
    await asyncio.wait_for(server.requests[0].disconnected.wait(), 5)  # the server saw the request dropped


# --- tools in a chat --------------------------------------------------------------------------------


async def test_chat_runs_a_function_tool_and_shows_each_call(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})], prompt_tokens=30, completion_tokens=8),
        Reply(text="It is sunny in Oslo.", prompt_tokens=50, completion_tokens=6),
    )
    ran = await run_ext(
        "chat", "-m", "openai:gpt-4o-mini", "--tool", "cli_tools:get_weather", "Weather in Oslo?", env=openai_env
    )
    assert ran.code == 0, ran.err
    assert ran.out == "It is sunny in Oslo.\n"
    assert '→ get_weather({"city":"Oslo"})' in ran.err or '→ get_weather({"city": "Oslo"})' in ran.err
    assert "← get_weather: sunny in Oslo, 21 C" in ran.err
    assert "80 prompt + 14 completion tokens" in ran.err  # summed over the loop
    first, second = (server.decode(r) for r in server.requests)
    assert first.tools == ["get_weather"]
    results = [r for m in second.messages for r in m.tool_results]
    assert [r.content for r in results] == ["sunny in Oslo, 21 C"]


async def test_chat_tool_error_goes_back_to_the_model(server: OpenAIServer, openai_env: dict[str, str]) -> None:
    server.enqueue(Reply(tool_calls=[ToolCallSpec("broken", {"city": "Oslo"})]), Reply(text="Sorry, no data."))
    ran = await run_ext("chat", "-m", "openai:gpt-4o-mini", "--tool", "cli_tools:broken", "Weather?", env=openai_env)
    assert ran.code == 0, ran.err
    assert "✗ broken:" in ran.err and "no station for Oslo" in ran.err
    assert ran.out == "Sorry, no data.\n"


async def test_chat_with_an_mcp_server_and_an_http_tool(
    server: OpenAIServer, openai_env: dict[str, str], tmp_path: Path
) -> None:
    async with TinyHttpService() as service:
        spec = {
            "name": "stock_price",
            "description": "Price of a stock.",
            "host": "127.0.0.1",
            "port": service.port,
            "path": "/stock/{symbol}",
            "method": "GET",
            "json_schema": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]},
        }
        tool_file = tmp_path / "stock.json"
        tool_file.write_text(json.dumps(spec))
        server.enqueue(
            Reply(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 40}), ToolCallSpec("stock_price", {"symbol": "EXT"})]),
            Reply(text="42, and EXT costs 123.45 USD."),
        )
        ran = await run_ext(
            "chat", "-m", "openai:gpt-4o-mini", "--mcp", MCP_SERVER, "--http-tool", str(tool_file), "Go",
            env=openai_env,
        )  # fmt: skip
        assert ran.code == 0, ran.err
        assert service.paths == ["/stock/EXT"]
    assert ran.out == "42, and EXT costs 123.45 USD.\n"
    first, second = (server.decode(r) for r in server.requests)
    assert sorted(first.tools) == ["add", "shout", "stock_price"]
    results = sorted(r.content for m in second.messages for r in m.tool_results)
    assert results == ["42", "EXT: 123.45 USD"]


async def test_bad_tool_specs_are_named() -> None:
    ran = await run_ext("chat", "-m", "openai:x", "--tool", "no_colon", "q")
    assert ran.code == 1 and "--tool expects module:function" in ran.err
    ran = await run_ext("chat", "-m", "openai:x", "--http-tool", "/nonexistent.json", "q")
    assert ran.code == 1 and "--http-tool /nonexistent.json: no such file" in ran.err


# --- config check -----------------------------------------------------------------------------------


async def test_config_check_validates_a_pipeline_without_calling(server: OpenAIServer, tmp_path: Path) -> None:
    config = {
        "client": {
            "provider": "openai",
            "options": {"endpoint": f"{server.base_url}/v1", "default_model": "gpt-4o-mini", "api_key_env": "MY_KEY"},
        },
        "middleware": [{"logging": {}}, {"retry": {"max_retries": 2}}],
    }
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(config))
    ran = await run_ext("config", "check", str(path), env=clean_env(MY_KEY=KEY))
    assert ran.code == 0, ran.err
    assert ran.out.splitlines() == [
        f"{path}: valid",
        "  client: OpenAIChatCompletionClient from provider openai (model gpt-4o-mini)",
        "  middleware: logging",
        "  middleware: retry",
    ]
    assert server.requests == []  # nothing was called
    missing = await run_ext("config", "check", str(path), env=clean_env())
    assert missing.code == 1 and "MY_KEY" in missing.err and KEY not in missing.err
    config["client"]["provider"] = "nope"  # type: ignore[index]
    path.write_text(json.dumps(config))
    bad = await run_ext("config", "check", str(path), env=clean_env(MY_KEY=KEY))
    assert bad.code == 1 and "unknown provider 'nope'" in bad.err


# --- models -----------------------------------------------------------------------------------------


async def test_models_lists_installed_and_missing_providers() -> None:
    ran = await run_ext("models")
    assert ran.code == 0, ran.err
    lines = dict(line.split(": ", 1) for line in ran.out.strip().splitlines())
    # Each line comes from the provider's own declaration (ext.providers), hyphenated names.
    assert lines["openai"] == (
        "installed (ext-models-openai; -m openai:gpt-4o-mini; OPENAI_API_KEY (OPENAI_BASE_URL for another "
        "OpenAI-compatible endpoint))"
    )
    assert lines["azure-openai"].startswith("installed (ext-models-openai; -m azure-openai:DEPLOYMENT;")
    assert {"anthropic", "azure-ai", "ollama", "openai", "azure-openai"} <= set(lines)
    assert "pip install -e packages/<distribution>" in ran.err


async def test_models_shows_a_providers_options_and_defaults() -> None:
    ran = await run_ext("models", "openai")
    assert ran.code == 0, ran.err
    assert "ext.models.openai" in ran.out
    assert re.search(r"^  model = \(required\)", ran.out, re.M)
    assert re.search(r"^  timeout = 60\.0", ran.out, re.M)
    assert "OPENAI_API_KEY" in ran.out
    # The install hint works from a clone (the distributions are not on the package index yet).
    assert "  install: pip install -e packages/ext-models-openai (from the root of a clone" in ran.out
    assert "pip install ext-models" not in ran.out


# --- mcp --------------------------------------------------------------------------------------------


async def test_mcp_tools_lists_tools_and_arguments() -> None:
    ran = await run_ext("mcp", "tools", MCP_SERVER)
    assert ran.code == 0, ran.err
    assert "add: Add two integers." in ran.out
    assert "    a: integer" in ran.out and "    b: integer" in ran.out
    assert "shout: Upper-case a text." in ran.out


async def test_mcp_call_with_pairs_and_json() -> None:
    ran = await run_ext("mcp", "call", MCP_SERVER, "add", "a=2", "b=40")
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "42"
    ran = await run_ext("mcp", "call", MCP_SERVER, "shout", "--json", '{"text": "hey"}')
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "HEY"


async def test_mcp_call_error_result_exits_1() -> None:
    ran = await run_ext("mcp", "call", MCP_SERVER, "add", "a=x", "b=1")
    assert ran.code == 1
    assert "returned an error" in ran.err


async def test_mcp_resources_and_prompts() -> None:
    ran = await run_ext("mcp", "resources", MCP_SERVER)
    assert ran.code == 0, ran.err
    assert "note://greeting  greeting: A greeting note." in ran.out
    ran = await run_ext("mcp", "resources", MCP_SERVER, "--read", "note://greeting")
    assert ran.out.strip() == "hello from the resource"
    ran = await run_ext("mcp", "prompts", MCP_SERVER)
    assert "review(topic): Ask for a review of a topic." in ran.out
    ran = await run_ext("mcp", "prompts", MCP_SERVER, "--get", "review", "topic=the plan")
    assert ran.code == 0, ran.err
    assert "Please review the plan." in ran.out


@pytest.mark.parametrize(("transport", "path"), [("http", "/mcp"), ("sse", "/sse")])
async def test_mcp_over_http_and_sse(transport: str, path: str) -> None:
    server = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "cli_mcp_server.py"), transport, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        line = (await asyncio.wait_for(server.stdout.readline(), 30)).decode()
        assert line.startswith("PORT "), line
        url = f"http://127.0.0.1:{int(line.split()[1])}{path}"
        ran = await run_ext("mcp", "call", url, "add", "a=20", "b=22")
        assert ran.code == 0, ran.err
        assert ran.out.strip() == "42"
        tools = await run_ext("mcp", "tools", url)
        assert "shout: Upper-case a text." in tools.out
    finally:
        server.terminate()
        await server.wait()


async def test_mcp_server_that_does_not_exist() -> None:
    ran = await run_ext("mcp", "tools", "/nonexistent/server-binary")
    assert ran.code == 1
    assert "error:" in ran.err and "Traceback" not in ran.err
    assert len(ran.err.strip().splitlines()) <= 3


# --- gateway ----------------------------------------------------------------------------------------


async def test_gateway_subcommand_serves_and_drains_on_sigterm() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.cli", "gateway", "--port", "0",
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    port_line = await asyncio.wait_for(proc.stdout.readline(), 30)
    port = int(port_line)
    assert port > 0
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)  # it listens
    writer.close()
    await writer.wait_closed()
    proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0


async def test_gateway_replicas_print_one_address_per_line_and_stop_on_sigterm() -> None:
    # The replicas share a registry in a throwaway redis-server (needs redis-server on PATH).
    from ext.testing.redis import start_redis_server

    redis = start_redis_server()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.cli", "gateway", "--replicas", "2", "--port", "0", "--log-level", "WARNING",
        "--redis-url", redis.url, env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        lines = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip() for _ in range(2)]
        if not all(lines):
            pytest.fail(f"ext gateway --replicas 2 did not start: {(await proc.stderr.read()).decode()[-2000:]}")
        ports = {int(line.rpartition(":")[2]) for line in lines}
        assert len(ports) == 2 and all(line.startswith("127.0.0.1:") for line in lines)
        for port in ports:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)  # each replica listens
            writer.close()
            await writer.wait_closed()
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err.decode()[-2000:]
        for port in ports:  # stopped
            with pytest.raises(OSError):
                await asyncio.open_connection("127.0.0.1", port)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        redis.stop()


async def test_gateway_health_port_and_token_file_pass_through(tmp_path: Path) -> None:
    """The deployment options of ext-runtime-grpc's parser reach `ext gateway` unchanged (one source of truth)."""
    from ext.testing.redis import free_port

    token = tmp_path / "token"
    token.write_text("cli-token\n")
    health_port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.cli", "gateway", "--port", "0", "--log-level", "WARNING",
        "--health-port", str(health_port), "--token-file", str(token),
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    assert int(await asyncio.wait_for(proc.stdout.readline(), 30)) > 0
    reader, writer = await asyncio.open_connection("127.0.0.1", health_port)
    writer.write(b"GET /readyz HTTP/1.1\r\nHost: probe\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\nready\n")
    proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0 and b"cli-token" not in err


async def test_gateway_help_is_the_gateways() -> None:
    ran = await run_ext("gateway", "--help")
    assert ran.code == 0
    assert "usage: ext gateway" in ran.out and "--redis-url" in ran.out and "--replicas" in ran.out
    assert "--health-port" in ran.out and "--token-file" in ran.out


@pytest.mark.parametrize("argv", [["--help"], ["chat", "--help"], ["mcp", "--help"]])
async def test_help(argv: list[str]) -> None:
    ran = await run_ext(*argv)
    assert ran.code == 0 and "Usage: ext" in ran.out
