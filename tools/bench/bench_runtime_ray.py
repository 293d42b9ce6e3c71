"""ext-runtime-ray beside ext-runtime-grpc's gateway runtime, on this machine, in the same run.

Run: ``hatch run dev:python tools/bench/bench_runtime_ray.py [--iterations N] [--cold N]`` (an environment with
both runtimes). It starts a local Ray (``num_cpus=2``, no dashboard, usage reporting off) and an ext gRPC gateway
in a subprocess on 127.0.0.1.

The same agent on both: it echoes an RPC, counts one-way messages, and answers "count" with its count.

Cases (per runtime):
- activation cold: the first RPC to a new agent id. On Ray that creates the agent's actor, a new worker process;
  on the gateway runtime it creates an agent object in the hosting worker.
- RPC (warm): sequential RPCs to an active agent, p50/p99.
- one-way: batches of 500 one-way messages to one agent, timed until an RPC sent after them answers with the
  count (each runtime keeps one sender's messages in order): messages/s.

Nothing is asserted: the numbers are for the README, with what each runtime is for.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import sys
import time
from collections.abc import Sequence

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# Script-dir import: `python tools/bench/bench_runtime_ray.py` puts tools/bench on sys.path.
import ray
from _harness import Result, Row, measure, print_table
from bench_runtime import start_process
from google.protobuf.wrappers_pb2 import StringValue

from ext.core import AgentId, AgentRuntime, MessageContext, RoutedAgent, message_handler
from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.ray import RayAgentRuntime

ONE_WAY_BATCH = 500


class CountingAgent(RoutedAgent):
    count = 0

    @message_handler
    async def on_text(self, message: StringValue, ctx: MessageContext) -> StringValue | None:
        if message.value == "count":
            return StringValue(value=str(self.count))
        if ctx.is_rpc:
            return StringValue(value=message.value)
        self.count += 1
        return None


async def _cases(name: str, caller: AgentRuntime, iterations: int, cold: int) -> list[Row]:
    keys = itertools.count()

    async def activate() -> None:
        await caller.send_and_await_response(StringValue(value="wake"), AgentId("bench", f"cold{next(keys)}"), 120)

    target = AgentId("bench", "warm")

    async def rpc() -> None:
        await caller.send_and_await_response(StringValue(value="ping"), target, 30)

    sent = 0

    async def one_way() -> None:
        nonlocal sent
        for _ in range(ONE_WAY_BATCH):
            await caller.send_message(StringValue(value="note"), target)
        sent += ONE_WAY_BATCH
        answer = await caller.send_and_await_response(StringValue(value="count"), target, 120)
        assert int(answer.value) == sent, (answer.value, sent)

    cold_result = await measure(f"{name}", activate, iterations=cold)
    rpc_result = await measure(f"{name}", rpc, iterations=iterations, warmup=20)
    batches = max(2, iterations // ONE_WAY_BATCH)
    one_way_result = await measure(f"{name}", one_way, iterations=batches, warmup=0)
    # One measured op is a batch: spread it over its messages, so that ops/s counts messages.
    per_message = Result(
        name,
        tuple(t // ONE_WAY_BATCH for t in one_way_result.latencies_ns for _ in range(ONE_WAY_BATCH)),
        one_way_result.wall_ns,
        one_way_result.cpu_ns,
    )
    return [Row("activation cold", cold_result), Row("rpc (warm)", rpc_result), Row("one-way", per_message)]


async def run(iterations: int, cold: int) -> None:
    rows: dict[str, list[Row]] = {}
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level=logging.ERROR)
    ray_start = time.perf_counter() - started
    try:
        async with RayAgentRuntime(namespace="bench") as ray_runtime:
            await ray_runtime.register_agent_factory("bench", CountingAgent)
            rows["ray"] = await _cases("ray", ray_runtime, iterations, cold)
    finally:
        ray.shutdown()
    gateway, port = start_process(
        [sys.executable, "-m", "ext.runtime.grpc", "gateway", "--port", "0", "--log-level", "ERROR"]
    )
    try:
        caller = GrpcAgentRuntime(f"127.0.0.1:{port}", token_env=None)
        host = GrpcAgentRuntime(f"127.0.0.1:{port}", token_env=None)
        async with caller, host:
            await host.register_agent_factory("bench", CountingAgent)
            rows["grpc"] = await _cases("grpc", caller, iterations, cold)
    finally:
        gateway.kill()
        gateway.wait()
    merged = [row for pair in zip(rows["ray"], rows["grpc"], strict=True) for row in pair]
    print_table(merged)
    print(f"\nray.init (local instance, 2 CPUs): {ray_start:.1f} s; one-way rows: p50 per message, ops/s = messages/s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=2000, help="warm RPCs per runtime (default 2000)")
    parser.add_argument("--cold", type=int, default=10, help="cold activations per runtime (default 10)")
    args = parser.parse_args(argv)
    asyncio.run(run(args.iterations, args.cold))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(argv=None))
