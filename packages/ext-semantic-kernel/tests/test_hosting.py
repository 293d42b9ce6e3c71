"""Hosting: a kernel built from configuration, and kernel agents on both ext runtimes (the local one in process,
and a gRPC cluster with the kernel agent in a worker process of its own)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.functions import kernel_function

from ext.core import AgentId, CantHandleError, ConfigurationError, InMemoryStateStore, MessageHandlerError
from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.grpc.testing import GatewayProcess, start_gateway_process
from ext.runtime.local import LocalAgentRuntime
from ext.semantic_kernel import KernelAnswer, KernelTask, build_kernel, host_kernel_agent
from ext.testing.script import Reply, ToolCallSpec
from ext.testing.servers import OpenAIServer

HERE = Path(__file__).parent


class WeatherPlugin:
    def __init__(self) -> None:
        self.cities: list[str] = []

    @kernel_function(description="The weather in a city.")
    def weather(self, city: Annotated[str, "a city"]) -> str:
        self.cities.append(city)
        return f"sunny in {city}"


async def test_build_kernel_from_configuration(server: OpenAIServer, openai_key: str) -> None:
    kernel = build_kernel("openai", {"endpoint": server.base_url + "/v1", "default_model": "gpt-4o-mini"})
    server.enqueue(Reply(text="hello from the kernel"))
    result = await kernel.invoke_prompt("Say hello")
    assert result is not None and str(result) == "hello from the kernel"
    wire = server.decode(server.requests[0])
    assert wire.model == "gpt-4o-mini" and wire.last_user_text == "Say hello"
    assert server.requests[0].headers["authorization"] == f"Bearer {openai_key}"


def test_build_kernel_refuses_bad_configuration(openai_key: str) -> None:
    endpoint = {"endpoint": "http://127.0.0.1:9/v1", "default_model": "m"}
    with pytest.raises(ConfigurationError, match="no-such-provider"):
        build_kernel("no-such-provider", endpoint)
    with pytest.raises(ConfigurationError, match=r"options\.endpoint"):
        build_kernel("openai", {"default_model": "m"})
    with pytest.raises(ConfigurationError, match="plugins must be a list"):
        build_kernel("openai", endpoint, plugins="weather")  # type: ignore[arg-type]


async def test_kernel_agent_on_the_local_runtime(server: OpenAIServer, openai_key: str) -> None:
    weather = WeatherPlugin()

    def make_agent(agent_id: AgentId) -> ChatCompletionAgent:
        kernel = build_kernel("openai", {"endpoint": server.base_url + "/v1", "default_model": "gpt-4o-mini"})
        kernel.add_plugin(weather, "weather")
        return ChatCompletionAgent(kernel=kernel, name="forecaster", instructions="Answer weather questions.")

    store = InMemoryStateStore()
    server.enqueue(
        Reply(tool_calls=[ToolCallSpec("weather-weather", {"city": "Oslo"})]),
        Reply(text="It is sunny in Oslo.", prompt_tokens=30, completion_tokens=6),
        Reply(text="Still sunny."),
    )
    async with LocalAgentRuntime(state_store=store) as runtime:
        await host_kernel_agent(runtime, "forecaster", make_agent)
        answer = await runtime.send_and_await_response(
            KernelTask(content="Weather in Oslo?"), AgentId("forecaster", "u1")
        )
        assert answer == KernelAnswer(
            content="It is sunny in Oslo.", agent="forecaster", prompt_tokens=30, completion_tokens=6
        )
        assert weather.cities == ["Oslo"]
    # A new runtime on the same state store: the agent comes back with its conversation (its saved state).
    async with LocalAgentRuntime(state_store=store) as runtime:
        await host_kernel_agent(runtime, "forecaster", make_agent)
        await runtime.send_and_await_response("And tomorrow?", AgentId("forecaster", "u1"))
        with pytest.raises((CantHandleError, MessageHandlerError)):
            await runtime.send_and_await_response(42, AgentId("forecaster", "u1"))
    # The second question reached the model with the whole conversation: one thread per AgentId, kept as state.
    third = server.decode(server.requests[2])
    assert [m.text for m in third.messages if m.role == "user"] == ["Weather in Oslo?", "And tomorrow?"]
    assert server.decode(server.requests[0]).system == ["Answer weather questions."]


@pytest.fixture
def gateway() -> Iterator[GatewayProcess]:
    process = start_gateway_process()
    try:
        yield process
    finally:
        process.kill()


async def test_kernel_agent_answers_over_grpc_from_another_process(
    server: OpenAIServer, gateway: GatewayProcess, openai_key: str
) -> None:
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "kernel_agent_worker.py"),
        gateway.address,
        server.base_url + "/v1",
        stdout=asyncio.subprocess.PIPE,
        env={**_env(), "OPENAI_API_KEY": openai_key},
    )
    try:
        assert worker.stdout is not None
        line = await asyncio.wait_for(worker.stdout.readline(), 60)
        assert line.strip() == b"ready", f"the worker process did not start: {line!r}"
        server.enqueue(
            Reply(tool_calls=[ToolCallSpec("orders-status", {"order": "A17"}, id="call_o")]),
            Reply(text="Order A17 has shipped.", prompt_tokens=40, completion_tokens=7),
        )
        caller = GrpcAgentRuntime(gateway.address, token_env=None, connect_timeout=5)
        caller.register_message_type(KernelTask)
        caller.register_message_type(KernelAnswer)
        async with caller:
            answer = await caller.send_and_await_response(
                KernelTask(content="Where is order A17?"), AgentId("support", "customer-1"), timeout=30
            )
        assert answer == KernelAnswer(
            content="Order A17 has shipped.", agent="support", prompt_tokens=40, completion_tokens=7
        )
        results = [r for m in server.decode(server.requests[1]).messages for r in m.tool_results]
        assert [(r.call_id, r.content) for r in results] == [("call_o", "order A17 shipped")]
    finally:
        worker.kill()
        await asyncio.wait_for(worker.wait(), 10)


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXT_GRPC"))}
