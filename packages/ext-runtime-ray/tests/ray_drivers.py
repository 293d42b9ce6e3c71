"""The drivers the Ray tests run as separate processes: `python ray_drivers.py <command> <json args>` prints
`RESULT <json>`. The agents and messages come from `ray_support` (imported by name, as the actors import them)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

from ray_support import Bump, CounterAgent, Forward

from ext.core import AgentId


async def _bump(address: str, namespace: str, key: str) -> dict[str, Any]:
    """Another driver: joins the cluster at `address` and bumps counter/`key` once."""
    import ray

    from ext.runtime.ray import RayAgentRuntime

    ray.init(address=address, namespace=namespace, logging_level=logging.WARNING, log_to_driver=False)
    runtime = RayAgentRuntime(namespace=namespace)
    await runtime.start()
    try:
        where = await runtime.send_and_await_response(Bump(), AgentId("counter", key), 60.0)
        return dict(where.model_dump())
    finally:
        await runtime.stop()
        ray.shutdown()


async def _two_nodes() -> dict[str, Any]:
    """A Ray cluster of two nodes on this machine: "left" agents on the head node, "right" agents on the other; a
    left agent asks a right one."""
    import ray
    from ray.cluster_utils import Cluster

    from ext.runtime.ray import RayAgentRuntime

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"head": 1},
            "include_dashboard": False,
        },
    )
    try:
        cluster.add_node(num_cpus=1, resources={"second": 1})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="two-nodes", logging_level=logging.WARNING, log_to_driver=False)
        runtime = RayAgentRuntime()
        await runtime.start()
        try:
            await runtime.register_agent_factory("left", CounterAgent, actor_options={"resources": {"head": 0.01}})
            await runtime.register_agent_factory("right", CounterAgent, actor_options={"resources": {"second": 0.01}})
            route = await runtime.send_and_await_response(
                Forward(target_type="right", target_key="b"), AgentId("left", "a"), 120.0
            )
            again = await runtime.send_and_await_response(Bump(), AgentId("right", "b"), 60.0)
            nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])  # type: ignore[no-untyped-call]
            return {"route": route.model_dump(), "again": again.model_dump(), "nodes": nodes}
        finally:
            await runtime.stop()
            ray.shutdown()
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    command, args = sys.argv[1], json.loads(sys.argv[2])
    if command == "bump":
        result = asyncio.run(_bump(**args))
    elif command == "two-nodes":
        result = asyncio.run(_two_nodes())
    else:
        raise SystemExit(f"unknown command {command!r}")
    print("RESULT " + json.dumps(result), flush=True)
