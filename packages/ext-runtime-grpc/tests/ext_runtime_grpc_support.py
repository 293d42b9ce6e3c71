"""Helpers shared by this package's tests: a worker with the conformance message types, and polling."""

from __future__ import annotations

import asyncio
import selectors
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.grpc.protos import agent_rpc_pb2 as ag
from ext.testing.runtime_agents import MESSAGE_TYPES


def worker(address: str | list[str], **kwargs: object) -> GrpcAgentRuntime:
    kwargs.setdefault("token_env", None)
    kwargs.setdefault("connect_timeout", 5)
    runtime = GrpcAgentRuntime(address, **kwargs)  # type: ignore[arg-type]
    for message_type in MESSAGE_TYPES:
        runtime.register_message_type(message_type)
    return runtime


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0, what: str = "") -> None:
    """Poll `check` until true; for state another process changes on its own schedule (leases, reconnects).
    Fails after `timeout` naming `what` it waited for."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'condition'} not met within {timeout:g} s")
        await asyncio.sleep(0.05)


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The next line `process` prints on stdout, stripped; "" if none comes within `timeout` seconds."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    ready = selector.select(timeout=timeout)
    selector.close()
    return process.stdout.readline().strip() if ready else ""


def client(client_id: str) -> list[tuple[str, str]]:
    """The metadata an AutoGen worker identifies itself with."""
    return [("client-id", client_id)]


async def open_channel(stub: Any, client_id: str) -> tuple[Any, asyncio.Queue[ag.Message]]:
    """An AutoGen worker's channel on the gateway's AutoGen listener: the call, and a queue of what to send on it."""
    outgoing: asyncio.Queue[ag.Message] = asyncio.Queue()

    async def requests() -> AsyncIterator[ag.Message]:
        while True:
            yield await outgoing.get()

    call = stub.OpenChannel(requests(), metadata=client(client_id))
    await call.wait_for_connection()
    return call, outgoing
