"""A real AutoGen 0.7.5 worker on the loopback AutoGen listener of a gateway that requires a token (issue 35,
item 10): it cannot take an agent type an ext worker holding the token hosts, and what the listener lets it do
(host its own types, call ext's agents) still works."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from autogen_support import PeerFactory
from ext_peer import MESSAGES, Echo, Pong
from pydantic import BaseModel

from ext.runtime.grpc import Gateway, GrpcAgentRuntime

TOKEN = "autogen-token-test"


@pytest.fixture
async def token_gateway() -> AsyncIterator[Gateway]:
    gw = Gateway(token=TOKEN, autogen_address="127.0.0.1:0")
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop(grace=0)


@pytest.fixture
async def ext_host(token_gateway: Gateway) -> AsyncIterator[GrpcAgentRuntime]:
    """An ext worker holding the token, hosting `ext_echo` (the agent of ext_peer.py, in this process)."""
    runtime = GrpcAgentRuntime(token_gateway.address, token=TOKEN, token_env=None, connect_timeout=10)
    types: dict[str, type[BaseModel]] = {**MESSAGES, "Pong": Pong}
    for name, cls in types.items():
        runtime.register_message_type(cls, type_name=name)
    async with runtime:
        await runtime.register_agent_factory("ext_echo", Echo)
        yield runtime


async def test_a_real_autogen_worker_cannot_take_a_type_a_token_holding_ext_worker_hosts(
    token_gateway: Gateway, ext_host: GrpcAgentRuntime, peers: dict[str, PeerFactory]
) -> None:
    listener = f"127.0.0.1:{token_gateway.autogen_port}"
    # AutoGen's worker raises from `register` when the host refuses the type: the peer exits before it is ready.
    with pytest.raises(AssertionError, match="'event': 'exited'"):
        await peers["autogen"](listener, "--host-type", "ext_echo")
    assert await token_gateway.registry.workers_for("ext_echo") == [(ext_host.worker_id, token_gateway.gateway_id)]
    # A type of its own is its to host, and it reaches the ext agent through the listener (what the README says
    # the listener bypasses the token for).
    guest = await peers["autogen"](listener, "--host-type", "ag_echo")
    reply = await guest.call(("ext_echo", "k1"), "Ping", "from autogen")
    assert reply == {"id": 1, "ok": True, "result": {"text": "from autogen", "by": "ext_echo/k1"}}
    hosts = await token_gateway.registry.workers_for("ag_echo")
    assert len(hosts) == 1 and ".autogen-" in hosts[0][0]
