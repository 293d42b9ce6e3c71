"""AutoGen 0.7 workers (real `GrpcWorkerAgentRuntime` processes) and ext workers (real `GrpcAgentRuntime`
processes) on one ext gateway: RPCs both ways, errors, an unknown target, a worker killed mid-RPC. The scenarios
AutoGen can run alone also run against AutoGen's own host (`hub="autogen"`): its behaviour is the reference, and
where ext's gateway deliberately differs, the test says so."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
from autogen_support import PeerFactory

from ext.runtime.grpc import Gateway
from ext.testing.readme import python_example

README = Path(__file__).resolve().parent.parent / "README.md"


async def test_rpc_between_autogen_workers(hub: str, peers: dict[str, PeerFactory]) -> None:
    callee = await peers["autogen"](hub, "--host-type", "ag_echo")
    caller = await peers["autogen"](hub)
    assert await caller.call(("ag_echo", "k1"), "Ping", "hello") == {
        "id": 1,
        "ok": True,
        "result": {"text": "hello", "by": "ag_echo/k1"},
    }
    assert (await caller.call(("ag_echo", "k2"), "Ping", "again"))["result"] == {"text": "again", "by": "ag_echo/k2"}
    assert callee.process.returncode is None


async def test_request_ids_are_made_unique_at_the_ext_gateway(gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    """Each worker numbers its requests from 1: these two RPCs, in flight together, both have request id "1" on the
    wire to the same callee, and each caller gets its own answer (the gateway gives them ids of its own). AutoGen's
    host keys the answers it awaits by the workers' own ids, so there they collide (run against it, one caller was
    never answered): no reference case for this one."""
    address = f"127.0.0.1:{gateway.autogen_port}"
    await peers["autogen"](address, "--host-type", "ag_echo")
    caller = await peers["autogen"](address)
    other = await peers["autogen"](address)
    first = caller.command(op="call", target=["ag_echo", "a"], message="Ping", text="from caller", wait=30)
    second = other.command(op="call", target=["ag_echo", "b"], message="Ping", text="from other", wait=30)
    assert await caller.reply(first) == {"id": 1, "ok": True, "result": {"text": "from caller", "by": "ag_echo/a"}}
    assert await other.reply(second) == {"id": 1, "ok": True, "result": {"text": "from other", "by": "ag_echo/b"}}


async def test_handler_error_reaches_autogen_caller(hub: str, peers: dict[str, PeerFactory]) -> None:
    await peers["autogen"](hub, "--host-type", "ag_echo")
    caller = await peers["autogen"](hub)
    reply = await caller.call(("ag_echo", "k1"), "Boom", "bad input")
    # AutoGen's worker sends the handler's exception text as the response's error; its caller raises Exception.
    assert reply["ok"] is False
    assert reply["error_type"] == "Exception"
    assert reply["error"] == "boom: bad input"


async def test_unknown_target_fails_at_once_on_ext_gateway(gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    caller = await peers["autogen"](f"127.0.0.1:{gateway.autogen_port}")
    # A long wait: the error must come from the gateway, not from this timeout.
    reply = await caller.call(("nobody", "k1"), "Ping", "hello", wait=600)
    assert reply["ok"] is False
    assert reply["error_type"] == "Exception"
    assert reply["error"] == "no worker hosts agent type 'nobody' (recipient nobody/k1)"


async def test_reference_unknown_target_hangs_on_autogen_host(autogen_host: str, peers: dict[str, PeerFactory]) -> None:
    """AutoGen's host logs "Agent nobody not found" and never answers: the caller waits forever. ext's gateway
    deliberately answers with an error instead (the test above)."""
    caller = await peers["autogen"](autogen_host)
    reply = await caller.call(("nobody", "k1"), "Ping", "hello", wait=1.0)
    assert reply == {"id": 1, "ok": False, "error_type": "TimeoutError", "error": "no answer"}


async def test_ext_worker_calls_autogen_agent(gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    await peers["autogen"](f"127.0.0.1:{gateway.autogen_port}", "--host-type", "ag_echo")
    ext = await peers["ext"](gateway.address)
    reply = await ext.call(("ag_echo", "k2"), "Ping", "from ext")
    # AutoGen's JSON answer (type "Pong") reaches the ext caller as the pydantic model registered under that name.
    assert reply == {"id": 1, "ok": True, "result": {"text": "from ext", "by": "ag_echo/k2"}}
    failed = await ext.call(("ag_echo", "k2"), "Boom", "oops")
    assert failed["ok"] is False
    assert failed["error_type"] == "MessageHandlerError"
    assert "boom: oops" in failed["error"]


async def test_autogen_worker_calls_ext_agent(gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    await peers["ext"](gateway.address, "--host-type", "ext_echo")
    caller = await peers["autogen"](f"127.0.0.1:{gateway.autogen_port}")
    reply = await caller.call(("ext_echo", "k3"), "Ping", "from autogen")
    assert reply == {"id": 1, "ok": True, "result": {"text": "from autogen", "by": "ext_echo/k3"}}
    failed = await caller.call(("ext_echo", "k3"), "Boom", "oops")
    assert failed["ok"] is False
    assert failed["error_type"] == "Exception"
    assert failed["error"] == "handler of ext_echo/k3 raised ValueError: boom: oops"


async def test_ext_one_way_message_reaches_autogen_agent(gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    """AutoGen has no one-way send: the gateway delivers ext's as an RPC whose answer it drops."""
    callee = await peers["autogen"](f"127.0.0.1:{gateway.autogen_port}", "--host-type", "ag_echo")
    ext = await peers["ext"](gateway.address)
    sent = await ext.reply(ext.command(op="send", target=["ag_echo", "k4"], message="Note", text="fire and forget"))
    assert sent["ok"] is True
    note = await callee.wait_event("note")
    assert (note["agent"], note["text"]) == ("ag_echo/k4", "fire and forget")
    # The stream goes on: an RPC after the dropped answer is answered.
    assert (await ext.call(("ag_echo", "k4"), "Ping", "after"))["result"] == {"text": "after", "by": "ag_echo/k4"}


async def test_ext_deadline_on_a_slow_autogen_agent(gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    callee = await peers["autogen"](f"127.0.0.1:{gateway.autogen_port}", "--host-type", "ag_echo")
    ext = await peers["ext"](gateway.address)
    pending = ext.command(op="call", target=["ag_echo", "slow"], message="Slow", text="wait", wait=1.0)
    await callee.wait_event("slow_started")
    reply = await ext.reply(pending)
    assert reply["ok"] is False
    assert reply["error_type"] == "TimeoutError"
    # The AutoGen handler cannot be cancelled (its protocol has no cancel); the worker goes on serving.
    assert (await ext.call(("ag_echo", "k5"), "Ping", "still there"))["ok"] is True


@pytest.mark.parametrize("caller_kind", ["ext", "autogen"])
async def test_autogen_worker_killed_mid_rpc(caller_kind: str, gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    callee = await peers["autogen"](f"127.0.0.1:{gateway.autogen_port}", "--host-type", "ag_echo")
    address = gateway.address if caller_kind == "ext" else f"127.0.0.1:{gateway.autogen_port}"
    caller = await peers[caller_kind](address)
    pending = caller.command(op="call", target=["ag_echo", "slow"], message="Slow", text="wait", wait=600)
    await callee.wait_event("slow_started")
    callee.kill()
    reply = await caller.reply(pending)
    assert reply["ok"] is False
    assert reply["error_type"] == ("UndeliverableError" if caller_kind == "ext" else "Exception")
    assert "the worker hosting ag_echo/slow disconnected" in reply["error"]


async def test_reference_worker_killed_mid_rpc_hangs_on_autogen_host(
    autogen_host: str, peers: dict[str, PeerFactory]
) -> None:
    """AutoGen's host cancels the pending answer when the callee's channel ends and tells the caller nothing: the
    caller waits forever. ext's gateway answers with an error (the test above)."""
    callee = await peers["autogen"](autogen_host, "--host-type", "ag_echo")
    caller = await peers["autogen"](autogen_host)
    pending = caller.command(op="call", target=["ag_echo", "slow"], message="Slow", text="wait", wait=3.0)
    await callee.wait_event("slow_started")
    callee.kill()
    reply = await caller.reply(pending)
    assert reply == {"id": 1, "ok": False, "error_type": "TimeoutError", "error": "no answer"}


async def test_readme_example_joins_the_gateway(gateway: Gateway, autogen_python: str) -> None:
    """The README's AutoGen example, as written but for the listener's address, run with AutoGen 0.7.5."""
    code = python_example(README, "GrpcWorkerAgentRuntime(host_address=")
    code = code.replace("127.0.0.1:50052", f"127.0.0.1:{gateway.autogen_port}")
    script = "import asyncio\n\nasync def main():\n" + textwrap.indent(code, "    ") + "\nasyncio.run(main())\n"
    process = await asyncio.create_subprocess_exec(
        autogen_python, "-c", script, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()[-2000:]
