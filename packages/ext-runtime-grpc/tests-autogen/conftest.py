from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # autogen_support, shared by the tests

from autogen_support import (
    AUTOGEN_HOST,
    AUTOGEN_PEER,
    EXT_PEER,
    EXT_PYTHON,
    Peer,
    PeerFactory,
    find_autogen_python,
    free_port,
)

from ext.runtime.grpc import Gateway
from ext.testing.redis import REDIS_BINARY, RedisServer, start_redis_server


@pytest.fixture(scope="session")
def autogen_python() -> str:
    try:
        return find_autogen_python()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    """One ext gateway serving AutoGen's protocol on a port of its own beside ext's."""
    gw = Gateway(autogen_address="127.0.0.1:0")
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop(grace=0)


@pytest.fixture(params=["ext", "autogen"])
def hub(request: pytest.FixtureRequest) -> str:
    """The address AutoGen workers connect to, once per hub: ext's gateway (its AutoGen listener) or AutoGen's own
    host (the reference)."""
    if request.param == "ext":
        gateway: Gateway = request.getfixturevalue("gateway")
        return f"127.0.0.1:{gateway.autogen_port}"
    address: str = request.getfixturevalue("autogen_host")
    return address


@pytest.fixture
async def autogen_host(autogen_python: str) -> AsyncIterator[str]:
    """AutoGen's own host (the reference), as a process; yields its address."""
    port = free_port()
    host = await Peer.start(autogen_python, AUTOGEN_HOST, str(port), name="autogen host")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await host.close()


@pytest.fixture
async def peers(autogen_python: str) -> AsyncIterator[dict[str, PeerFactory]]:
    """Start worker processes: `await peers["autogen"](address, "--host-type", "t")` (or "ext"); all are closed
    at the end of the test."""
    started: list[Peer] = []

    async def autogen(address: str, *args: str) -> Peer:
        peer = await Peer.start(autogen_python, AUTOGEN_PEER, address, *args, name=f"autogen worker {args}")
        started.append(peer)
        return peer

    async def ext(address: str, *args: str) -> Peer:
        peer = await Peer.start(EXT_PYTHON, EXT_PEER, address, *args, name=f"ext worker {args}")
        started.append(peer)
        return peer

    try:
        yield {"autogen": autogen, "ext": ext}
    finally:
        await asyncio.gather(*(peer.close() for peer in started))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if REDIS_BINARY is None:
        pytest.fail(
            "redis-server is not installed: apt-get install -y redis-server (tools/test.sh installs it); "
            "the replica tests need a real Redis"
        )
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()
