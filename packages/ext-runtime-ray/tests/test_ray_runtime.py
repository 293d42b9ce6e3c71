"""The Ray runtime beyond the shared suite, on the session's real Ray instance: one actor per agent whatever the
process asking, an actor killed mid-RPC (typed error at once, restart with the saved state), at-least-once on
request, and two Ray nodes on this machine."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio
import ray
from ray_support import Bump, CounterAgent, Hang, Where

from ext.core import AgentId, InMemoryStateStore, UndeliverableError
from ext.runtime.local import FileStateStore
from ext.runtime.ray import AgentActorDiedError, RayAgentRuntime

HERE = Path(__file__).resolve().parent
T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float = 15.0) -> T:
    """Every wait is bounded: a broken runtime fails the test, it never hangs the run."""
    return await asyncio.wait_for(awaitable, seconds)


DRIVERS = HERE / "ray_drivers.py"


def _run(command: str, args: dict[str, Any], timeout: float = 240) -> dict[str, Any]:
    """`ray_drivers.py <command>` in a new Python process: another Ray driver."""
    done = subprocess.run(
        [sys.executable, str(DRIVERS), command, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        # Its own Ray (the two-node cluster) starts workers that import ray_support from here.
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(HERE)},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


@pytest_asyncio.fixture
async def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RayAgentRuntime]:
    rt = RayAgentRuntime(namespace=f"t-{request.node.name}"[:60], state_store=FileStateStore(tmp_path / "states"))
    await within(rt.start())
    try:
        await within(rt.register_agent_factory("counter", CounterAgent))
        yield rt
    finally:
        await within(rt.stop(), 30)


async def _pid_of(runtime: RayAgentRuntime, agent: AgentId) -> int:
    where = await within(runtime.send_and_await_response(Bump(), agent), 60)
    assert isinstance(where, Where)
    return where.pid


async def test_two_driver_processes_asking_for_the_same_agent_get_one_actor(
    runtime: RayAgentRuntime, ray_instance: str
) -> None:
    assert runtime.namespace is not None
    args = {"address": ray_instance, "namespace": runtime.namespace, "key": "shared"}
    first, second = await asyncio.gather(asyncio.to_thread(_run, "bump", args), asyncio.to_thread(_run, "bump", args))
    assert first["pid"] == second["pid"]  # one actor, one process
    assert sorted([first["count"], second["count"]]) == [1, 2]  # one agent: its count went 1, 2
    mine = await within(runtime.send_and_await_response(Bump(), AgentId("counter", "shared")), 60)
    assert (mine.pid, mine.count) == (first["pid"], 3)
    assert await runtime.list_agents() == [AgentId("counter", "shared")]


async def test_an_actor_killed_mid_rpc_fails_the_caller_at_once_and_restarts_with_its_saved_state(
    runtime: RayAgentRuntime,
) -> None:
    agent = AgentId("counter", "victim")
    for expected in (1, 2):
        where = await within(runtime.send_and_await_response(Bump(), agent), 60)
        assert where.count == expected
    first_pid = where.pid
    assert runtime.namespace is not None
    actor = ray.get_actor(f"ext-agent:{agent}", namespace=runtime.namespace)
    call = asyncio.ensure_future(runtime.send_and_await_response(Hang(seconds=600), agent, timeout=None))
    await asyncio.sleep(1.0)  # the Hang is running in the actor (nothing else to wait on: it never answers)
    assert not call.done()
    ray.kill(actor, no_restart=False)  # the process dies; Ray restarts the actor
    with pytest.raises(AgentActorDiedError, match="victim") as info:
        await within(call, 30)  # promptly, with ext's typed error: not after the 600 s, never a hang
    assert isinstance(info.value, UndeliverableError)
    after = await within(runtime.send_and_await_response(Bump(), agent), 60)
    assert after.pid != first_pid  # a new process...
    assert after.count == 3  # ...that loaded the state saved after the second bump


async def test_at_least_once_resends_to_the_restarted_actor(tmp_path: Path) -> None:
    rt = RayAgentRuntime(
        namespace="t-at-least-once", state_store=FileStateStore(tmp_path / "s"), delivery="at_least_once"
    )
    await within(rt.start())
    try:
        await within(rt.register_agent_factory("counter", CounterAgent))
        agent = AgentId("counter", "again")
        first = await within(rt.send_and_await_response(Bump(), agent), 60)
        call = asyncio.ensure_future(rt.send_and_await_response(Hang(seconds=3), agent, timeout=None))
        await asyncio.sleep(1.0)
        ray.kill(ray.get_actor(f"ext-agent:{agent}", namespace="t-at-least-once"), no_restart=False)
        answered = await within(call, 60)  # resent to the restarted actor, which answered it
        assert answered.pid != first.pid and answered.count == 1
    finally:
        await within(rt.stop(), 30)


async def test_a_two_node_cluster_places_agents_on_both_and_routes_between_them() -> None:
    result = await asyncio.to_thread(_run, "two-nodes", {}, 420)
    route, again, nodes = result["route"], result["again"], result["nodes"]
    assert len(nodes) == 2
    assert route["here"]["agent"] == "left/a" and route["there"]["agent"] == "right/b"
    assert route["here"]["node"] != route["there"]["node"]  # one agent on each node
    assert {route["here"]["node"], route["there"]["node"]} == set(nodes)
    # The driver reaches the agent on the other node directly too, and it is the same agent.
    assert (again["node"], again["pid"], again["count"]) == (route["there"]["node"], route["there"]["pid"], 2)


async def test_bad_options_fail_at_construction_naming_them() -> None:
    with pytest.raises(ValueError, match="delivery"):
        RayAgentRuntime(delivery="exactly_once")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_restarts"):
        RayAgentRuntime(max_restarts=-2)
    with pytest.raises(ValueError, match="namespace"):
        RayAgentRuntime(namespace="")
    with pytest.raises(TypeError, match="driver_objects"):
        RayAgentRuntime(driver_objects=[InMemoryStateStore])  # type: ignore[arg-type]


async def test_bad_actor_options_and_unpicklable_parts_fail_at_registration(runtime: RayAgentRuntime) -> None:
    with pytest.raises(ValueError, match="actor_options: lifetime"):
        await runtime.register_agent_factory("x", CounterAgent, actor_options={"lifetime": "detached"})
    lock = asyncio.Lock()  # not picklable: a factory holding it cannot reach an actor
    loop_bound = _holding(lock)
    with pytest.raises(TypeError, match="factory for 'y'"):
        await runtime.register_agent_factory("y", loop_bound)


def _holding(thing: object) -> Any:
    import threading

    held = threading.Lock()

    def factory(agent_id: AgentId, rt: Any) -> CounterAgent:
        assert thing is not None and held is not None
        return CounterAgent(agent_id, rt)

    return factory


async def test_start_without_ray_initialized_names_the_fix() -> None:
    # Checked in a fresh interpreter: this session's Ray is up.
    code = (
        "import asyncio\nfrom ext.runtime.ray import RayAgentRuntime\n"
        "try:\n    asyncio.run(RayAgentRuntime().start())\nexcept RuntimeError as e:\n    print('ERR', e)\n"
    )
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert "ERR Ray is not initialized: call ray.init()" in done.stdout, done.stdout + done.stderr
