"""Real A2A peers on 127.0.0.1: the SDK's own server (JSON-RPC and HTTP+JSON) and fasta2a, served by uvicorn
in the test's event loop on a socket bound before the server starts (so no wait for readiness is needed)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Literal

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette
from starlette.types import ASGIApp

# What an agent does with one request: gets the user's text and the task's updater.
Behaviour = Callable[[str, TaskUpdater], Awaitable[None]]


class ScriptedExecutor(AgentExecutor):
    """An SDK executor running `behaviour`; records the ids of the tasks it was asked to cancel."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.cancelled: list[str] = []
        self.cancel_seen = asyncio.Event()
        self.started = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            assert context.message is not None
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        await updater.start_work()
        self.started.set()
        await self.behaviour(context.get_user_input(), updater)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        self.cancelled.append(context.task_id)
        self.cancel_seen.set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def echo(text: str, updater: TaskUpdater) -> None:
    """Answers `echo: <text>` in three streamed chunks of one artifact."""
    answer = f"echo: {text}"
    third = max(1, len(answer) // 3)
    chunks = [answer[:third], answer[third : 2 * third], answer[2 * third :]]
    for i, chunk in enumerate(chunks):
        await updater.add_artifact([Part(text=chunk)], artifact_id="answer", append=i > 0, last_chunk=i == 2)
    await updater.complete()


def card_for(
    base: str, *, name: str = "Echo agent", streaming: bool = True, bindings: tuple[str, ...] = ("JSONRPC",)
) -> AgentCard:
    urls = {"JSONRPC": base + "/", "HTTP+JSON": base + "/rest", "GRPC": "127.0.0.1:1"}
    return AgentCard(
        name=name,
        description="Echoes what it is told.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=urls[b], protocol_binding=b, protocol_version="1.0") for b in bindings
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        skills=[AgentSkill(id="echo", name="Echo", description="Echo the message.", tags=["echo"])],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )


def sdk_app(executor: AgentExecutor, card: AgentCard) -> Starlette:
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/"),
        *create_rest_routes(handler, path_prefix="/rest"),
    ]
    return Starlette(routes=routes)


def bound_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@asynccontextmanager
async def serving(make_app: Callable[[str], ASGIApp], *, lifespan: Literal["on", "off"] = "off") -> AsyncIterator[str]:
    """Serve `make_app(base_url)` on a fresh loopback port; yields the base URL."""
    sock = bound_socket()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(make_app(base), log_level="warning", lifespan=lifespan))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield base
    finally:
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()


@asynccontextmanager
async def sdk_agent(behaviour: Behaviour = echo, **card_options: object) -> AsyncIterator[tuple[str, ScriptedExecutor]]:
    executor = ScriptedExecutor(behaviour)
    async with serving(lambda base: sdk_app(executor, card_for(base, **card_options))) as base:  # type: ignore[arg-type]
        yield base, executor
