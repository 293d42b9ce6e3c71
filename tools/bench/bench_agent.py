"""What `ChatAgent.run` adds over the bare pipeline per turn, beside Microsoft Agent Framework's `Agent` and
pydantic-ai's `Agent` doing the same turn, on the same zero-latency loopback server, in one run.

Run: ``hatch run bench-agents:python tools/bench/bench_agent.py [--blocks B] [--block N]``

A turn is what an agent does most: the model asks for one tool call (``add(2, 3)``), the tool runs, the model
answers. Every side talks to ext-testing's OpenAI server (a real socket on 127.0.0.1, in the same event loop, so
every side pays the same server share) through the `openai` SDK: ext's `OpenAIChatCompletionClient`, Agent
Framework's `OpenAIChatCompletionClient`, pydantic-ai's `OpenAIChatModel`. The sides:

- ``pipeline`` and ``pipeline (A/A)``: two identical bare ext pipelines with the tool loop, called with the system
  and user messages: the yardstick and the noise of this machine and run;
- ``ChatAgent``: `ChatAgent.run` on its own client (a new session per turn in the in-memory store: the session
  record is written after the user's message, after the tool's result and at the end, as in production);
- ``Agent Framework`` and ``pydantic-ai``: their agents with the same instructions and tool.

With ``--baseline-agent DIR`` (the ``src/ext/agent`` folder of another checkout, e.g. from ``git archive REV
packages/ext-agent/src | tar -x -C /tmp/base``), a ``ChatAgent (base)`` side runs that code too (imported under
another package name, on the same pipeline, core and client), so a change is measured against the code before it
in one run.

Sides run in short interleaved blocks (the harness's ``measure_interleaved``), so the machine's drift weighs on all
alike. The table's ratio is each side's p50 over the bare pipeline's; the A/A row's ratio is the noise. Below the
table, each side's CPU per turn over the bare pipeline's, as the median of the per-block ratios with its 95 %
confidence interval: the steadier measure on a shared machine (the A/A line is its noise).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _harness import Row, format_table, measure_interleaved, median_ci

from ext.agent import ChatAgent
from ext.core import FunctionTool, LLMMessage, SystemMessage, UserMessage
from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import ChatClientBuilder
from ext.testing.servers import OpenAIServer, Reply, ToolCallSpec

KEY = "sk-bench"
MODEL = "gpt-4o-mini"
INSTRUCTIONS = "You add numbers with the add tool."
QUESTION = "What is 2 + 3?"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def ext_client(base_url: str) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(MODEL, base_url=base_url + "/v1", api_key=KEY, max_retries=0)


def scripted(server: OpenAIServer, turn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
    """`turn`, with the server scripted for it first: a call of `add`, then the answer."""

    async def run() -> Any:
        server.enqueue(Reply(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3})]), Reply(text="2 + 3 = 5."))
        return await turn()

    return run


def baseline_agent_class(folder: str) -> Any:
    """`ChatAgent` of another checkout's `ext/agent` folder, imported as the package `ext_agent_base` (its modules
    import each other relatively, and ext-core and ext-pipeline absolutely, so it runs on the installed ones)."""
    root = Path(folder)
    spec = importlib.util.spec_from_file_location(
        "ext_agent_base", root / "__init__.py", submodule_search_locations=[str(root)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"--baseline-agent: no package at {root} (expected the src/ext/agent folder of a checkout)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ChatAgent


def agent_framework_side(base_url: str) -> tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[None]]]:
    from agent_framework import Agent
    from agent_framework.openai import OpenAIChatCompletionClient as AfClient

    agent = Agent(AfClient(MODEL, api_key=KEY, base_url=base_url + "/v1"), INSTRUCTIONS, tools=[add])

    async def turn() -> Any:
        response = await agent.run(QUESTION)
        assert "5" in response.text, response.text
        return response

    async def close() -> None:
        return None

    return turn, close


def pydantic_ai_side(base_url: str) -> tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[None]]]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url + "/v1", api_key=KEY)),
                  instructions=INSTRUCTIONS, tools=[add])  # fmt: skip

    async def turn() -> Any:
        result = await agent.run(QUESTION)
        assert "5" in result.output, result.output
        return result

    async def close() -> None:
        return None

    return turn, close


async def main(blocks: int, block: int, baseline_agent: str | None = None) -> None:
    async with OpenAIServer(api_key=KEY, record=False) as server:
        url = server.base_url
        tool = FunctionTool(add, description="Add two integers.")
        pipelines = [ChatClientBuilder(ext_client(url)).use_tool_loop([tool]).build() for _ in range(2)]
        agent = ChatAgent(ext_client(url), instructions=INSTRUCTIONS, tools=[tool])
        agents: list[Any] = [agent]
        if baseline_agent is not None:
            agents.append(
                baseline_agent_class(baseline_agent)(ext_client(url), instructions=INSTRUCTIONS, tools=[tool])
            )
        messages: list[LLMMessage] = [SystemMessage(content=INSTRUCTIONS), UserMessage(content=QUESTION, source="user")]

        def pipeline_turn(index: int) -> Callable[[], Awaitable[Any]]:
            async def turn() -> Any:
                result = await pipelines[index].create(messages)
                assert result.content == "2 + 3 = 5.", result.content
                return result

            return turn

        def agent_turn(index: int) -> Callable[[], Awaitable[Any]]:
            async def turn() -> Any:
                result = await agents[index].run(QUESTION)
                assert result.output == "2 + 3 = 5.", result.output
                return result

            return turn

        af_turn, af_close = agent_framework_side(url)
        pa_turn, pa_close = pydantic_ai_side(url)
        sides = [
            ("pipeline", scripted(server, pipeline_turn(0))),
            ("pipe (A/A)", scripted(server, pipeline_turn(1))),
            ("ChatAgent", scripted(server, agent_turn(0))),
            *([("ChatAgent (base)", scripted(server, agent_turn(1)))] if len(agents) > 1 else []),
            ("AF Agent", scripted(server, af_turn)),
            ("pydantic-ai", scripted(server, pa_turn)),
        ]
        try:
            results, block_ratios = await measure_interleaved(sides, blocks=blocks, block=block, warmup=20)
        finally:
            for pipeline in pipelines:
                await pipeline.close()
            for each in agents:
                await each.close()
            await af_close()
            await pa_close()
    base = results[0]
    rows = [Row("one tool turn", r, base if r is not base else None) for r in results]
    print(format_table(rows))
    print(f"\nCPU per turn over the bare pipeline's ({blocks} interleaved blocks of {block} turns a side):")
    for result, ratios in zip(results[1:], block_ratios[1:], strict=True):
        lo, hi = median_ci(ratios)
        print(f"  {result.name:<18} {statistics.median(ratios):.3f}  (95 % CI {lo:.3f}-{hi:.3f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--baseline-agent", metavar="DIR", help="also run the ChatAgent of this src/ext/agent folder")
    args = parser.parse_args()
    asyncio.run(main(args.blocks, args.block, args.baseline_agent))
