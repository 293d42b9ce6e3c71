"""AutoGen and ext workers on two gateway replicas (processes sharing a registry in a real Redis), each replica
serving AutoGen's protocol too: RPCs cross replicas both ways, and a replica killed mid-RPC fails the RPCs it
carried; publishes reach subscribers behind the other replica (AutoGen's host has no replicas: there is no
reference to compare with)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from autogen_support import PeerFactory

from ext.runtime.grpc.testing import GatewayProcess, start_gateway_process
from ext.testing.redis import RedisServer


def autogen_address(gateway: GatewayProcess) -> str:
    """The AutoGen listener's address: the line after the port that `--autogen-listen` makes the gateway print."""
    assert gateway.process.stdout is not None
    line = gateway.process.stdout.readline().strip()
    assert line.startswith("autogen "), line
    return line.removeprefix("autogen ")


@pytest.fixture
def replicas(redis_server: RedisServer) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    args = ("--redis-url", redis_server.url, "--redis-prefix", "autogen-replicas", "--lease-seconds", "1")
    a = start_gateway_process(*args, "--autogen-listen", "127.0.0.1:0")
    try:
        b = start_gateway_process(*args, "--autogen-listen", "127.0.0.1:0")
    except BaseException:
        a.kill()
        raise
    try:
        yield a, b
    finally:
        a.kill()
        b.kill()


async def test_rpcs_and_publishes_cross_replicas_and_a_dead_replica_fails_its_rpcs(
    replicas: tuple[GatewayProcess, GatewayProcess], peers: dict[str, PeerFactory]
) -> None:
    a, b = replicas
    on_a, on_b = autogen_address(a), autogen_address(b)
    autogen_callee = await peers["autogen"](on_a, "--host-type", "ag_far", "--subscribe", "news")
    ext_callee = await peers["ext"](a.address, "--host-type", "ext_far", "--subscribe", "news")
    autogen_caller = await peers["autogen"](on_b)
    ext_caller = await peers["ext"](b.address)

    # Behind replica A, called from replica B: AutoGen -> AutoGen, ext -> AutoGen, AutoGen -> ext.
    assert (await autogen_caller.call(("ag_far", "k"), "Ping", "1"))["result"] == {"text": "1", "by": "ag_far/k"}
    assert (await ext_caller.call(("ag_far", "k"), "Ping", "2"))["result"] == {"text": "2", "by": "ag_far/k"}
    assert (await autogen_caller.call(("ext_far", "k"), "Ping", "3"))["result"] == {"text": "3", "by": "ext_far/k"}
    failed = await autogen_caller.call(("ag_far", "k"), "Boom", "4")
    assert (failed["ok"], failed["error"]) == (False, "boom: 4")

    # Publishes from behind replica B reach the subscribers behind A, through the table the replicas share.
    published = await ext_caller.reply(ext_caller.command(op="publish", topic=["news", "s1"], text="from ext"))
    assert published["ok"] is True
    note = await autogen_callee.wait_event("note")
    assert (note["agent"], note["text"], note["topic"]) == ("ag_far/s1", "from ext", ["news", "s1"])
    note = await ext_callee.wait_event("note")
    assert (note["agent"], note["text"]) == ("ext_far/s1", "from ext")
    published = await autogen_caller.reply(autogen_caller.command(op="publish", topic=["news", "s2"], text="from ag"))
    assert published["ok"] is True
    note = await autogen_callee.wait_event("note")
    assert (note["agent"], note["text"], note["topic"]) == ("ag_far/s2", "from ag", ["news", "s2"])
    note = await ext_callee.wait_event("note")
    assert (note["agent"], note["text"]) == ("ext_far/s2", "from ag")

    # Replica A dies (no goodbye) while both callers wait on the AutoGen agent behind it.
    from_ext = ext_caller.command(op="call", target=["ag_far", "slow"], message="Slow", text="w", wait=600)
    from_autogen = autogen_caller.command(op="call", target=["ag_far", "slow"], message="Slow", text="w", wait=600)
    await autogen_callee.wait_event("slow_started")
    await autogen_callee.wait_event("slow_started")
    a.kill()
    ext_reply = await ext_caller.reply(from_ext)
    assert (ext_reply["ok"], ext_reply["error_type"]) == (False, "UndeliverableError")
    assert "ag_far/slow" in ext_reply["error"]
    autogen_reply = await autogen_caller.reply(from_autogen)
    assert (autogen_reply["ok"], autogen_reply["error_type"]) == (False, "Exception")
    assert "ag_far/slow" in autogen_reply["error"]
