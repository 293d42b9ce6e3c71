"""ext's A2A server beside the SDK's reference server wrapping the same answer function, in one run.

Run: ``hatch run ext-hosting-a2a:python tools/bench/bench_a2a.py [--blocks B] [--block N] [--chunks C]``

Each side is a Starlette app served by uvicorn on 127.0.0.1 (in this process and event loop, so every side pays
the same server share), driven by the SDK's own JSON-RPC client:

- ``SDK`` and ``SDK (A/A)``: two identical reference servers: `DefaultRequestHandler` over `InMemoryTaskStore`
  with an executor that runs the answer function the way the SDK's examples do (the task, `working`, one
  artifact update per piece, `completed`): the yardstick and the noise of this machine and run;
- ``ext``: `ext.hosting.a2a.a2a_app` over the same function (`FunctionResponder`), tasks in an in-memory
  `StateStore` (versioned writes, the event log, the cancel watch).

Cases: ``round trip`` (a message sent without streaming, a one-piece answer, the finished task back) and
``stream`` (a streamed answer of ``--chunks`` pieces, read to its terminal status). Sides run in short interleaved
blocks (the harness's ``measure_interleaved``); the ratio is each side's p50 over the first SDK server's.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx
import uvicorn
from _harness import Row, format_table, measure_interleaved
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from starlette.applications import Starlette

from ext.core import InMemoryStateStore
from ext.hosting.a2a import FunctionResponder, a2a_app, agent_card

Answer = Callable[[str], AsyncIterator[str]]


def answer_of(chunks: int) -> Answer:
    async def answer(text: str) -> AsyncIterator[str]:
        for i in range(chunks):
            yield f"{text}-{i} "

    return answer


class ReferenceExecutor(AgentExecutor):
    def __init__(self, answer: Answer) -> None:
        self._answer = answer

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        await updater.start_work()
        first = True
        async for piece in self._answer(context.get_user_input()):
            await updater.add_artifact([Part(text=piece)], artifact_id="answer", append=not first, last_chunk=False)
            first = False
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def reference_app(answer: Answer, url: str) -> Starlette:
    card = agent_card(name="bench", description="bench", url=url, transports=("JSONRPC",))
    handler = DefaultRequestHandler(
        agent_executor=ReferenceExecutor(answer), task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


def ext_app(answer: Answer, url: str) -> Starlette:
    return a2a_app(
        FunctionResponder(answer),
        name="bench",
        description="bench",
        url=url,
        store=InMemoryStateStore(),
        transports=("JSONRPC",),
    )


async def serve(stack: AsyncExitStack, make: Callable[[str], Starlette]) -> str:
    sock = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(make(url), log_level="error", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))

    async def stop() -> None:
        server.should_exit = True
        await task
        sock.close()

    stack.push_async_callback(stop)
    return url


def message(text: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text=text)]))


async def main(blocks: int, block: int, chunks: int) -> None:
    rows: list[Row] = []
    for case, pieces, streaming in (("round trip", 1, False), (f"stream {chunks}", chunks, True)):
        answer = answer_of(pieces)
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
            factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
            sides: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
            for name, make in (("SDK", reference_app), ("SDK (A/A)", reference_app), ("ext", ext_app)):
                url = await serve(stack, lambda u, make=make, answer=answer: make(answer, u))  # type: ignore[misc]
                client: Client = await factory.create_from_url(url)

                def op(client: Client = client) -> Awaitable[Any]:
                    async def run() -> int:
                        count = 0
                        async for _ in client.send_message(message("hi")):
                            count += 1
                        assert count >= 1
                        return count

                    return run()

                sides.append((name, op))
            results, _ = await measure_interleaved(sides, blocks=blocks, block=block, warmup=20)
        base = results[0]
        rows += [Row(case, r, base if r is not base else None) for r in results]
    print(format_table(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.blocks, args.block, args.chunks))
