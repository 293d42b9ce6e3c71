"""Durable agent state (issue 27): what a state store costs per message, per RPC, per activation and per idle agent.

Run: ``hatch run ext-runtime-grpc:python tools/bench/bench_state.py`` (a few minutes; ``--quick`` runs in seconds
and is what ``tools/tests/bench/test_bench_state.py`` runs; ``--json PATH`` also writes the figures).

ext only, against itself: every case runs with the store off and on, in the same run, rounds interleaved (the
order rotating per round) so load from elsewhere falls on every store alike. ``off`` and ``off A/A`` are two
identical runtimes without a store: their ratio is the noise. Stores: ``memory`` (``InMemoryStateStore``),
``file`` (``FileStateStore`` in a temp dir: it fsyncs each write) and ``redis`` (``RedisStateStore`` on a
``redis-server`` this script starts through ``ext.testing.redis``). Agents keep ``{"count": n}``; the default
``SavePolicy()`` saves after every message.

- ``local``: one ``LocalAgentRuntime`` per store, in this process. ``grpc``: one gateway process (``python -m
  ext.runtime.grpc gateway``), a caller and one host worker per store in this process (as in bench_runtime.py).
- ``one-way``: batches of messages to one agent, timed until it has handled them all (msgs/s, CPU per message).
- ``rpc seq``: sequential RPCs to one agent (p50/p99).
- ``activate``: the first message (an RPC) to an agent whose state is in the store, vs a new agent without a
  store. These runtimes save only on deactivation, so the op is create + load + handle; the reply carries the
  loaded count, which is checked.
- memory (local runtime, one fresh process per row; ``_state_memory.py``): agents created over time in waves, each
  by an RPC, with and without ``idle_timeout`` (states in memory or in Redis); RSS growth per agent, live agents
  and RSS once the idle ones are deactivated, and the Python heap per agent under ``tracemalloc``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Script-dir imports: `python tools/bench/bench_state.py` puts tools/bench on sys.path.
from _harness import Result, measure_interleaved
from _state_memory import MEMORY_HEADER, MEMORY_MODES, MemoryPlan, factory_for, format_memory, measure_memory
from bench_runtime import Counter, batch, start_process
from google.protobuf.wrappers_pb2 import StringValue

from ext.core import AgentId, InMemoryStateStore, SavePolicy, StateStore
from ext.redis import RedisStateStore
from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.local import FileStateStore, LocalAgentRuntime
from ext.testing.redis import RedisServer, start_redis_server

STORES = ("off", "off A/A", "memory", "file", "redis")
RUNTIMES = ("local", "grpc")
CASES = ("one-way", "rpc seq", "activate")


@dataclass(frozen=True)
class Settings:
    rounds: int = 10
    rpcs: int = 200  # sequential RPCs per store per round
    batch: int = 500  # one-way messages per batch
    batches: int = 3  # one-way batches per store per round
    activations: int = 100  # first messages per store per round
    agents: int = 100_000  # memory: agents created over time
    waves: int = 100  # ... in this many waves (each wave's RPCs concurrently)
    idle_timeout: float = 1.0
    heap_agents: int = 10_000  # memory: the further batch under tracemalloc


QUICK = Settings(rounds=2, rpcs=20, batch=50, batches=1, activations=10, agents=2_000, waves=4, heap_agents=500)


class Stores:
    """One fresh store of each kind per call (separate records for each runtime), closed together at the end."""

    def __init__(self, redis: RedisServer, directory: str) -> None:
        self.redis, self.directory = redis, directory
        self.opened: list[StateStore] = []
        self.serial = itertools.count()

    def make(self, kind: str) -> StateStore | None:
        n = next(self.serial)
        store: StateStore
        if kind.startswith("off"):
            return None
        if kind == "memory":
            store = InMemoryStateStore()
        elif kind == "file":
            store = FileStateStore(os.path.join(self.directory, f"s{n}"))
        else:
            store = RedisStateStore(self.redis.url, prefix=f"bench{n}")
        self.opened.append(store)
        return store

    async def close(self) -> None:
        for store in self.opened:
            await store.close()


@dataclass
class Side:
    """One store's runtime pair for one runtime kind: who sends, the agent type it sends to, and counts."""

    store: str
    caller: Any
    agent_type: str
    counter: Counter
    state_store: StateStore | None
    fresh: itertools.count[int] = field(default_factory=itertools.count)
    loaded: int = 0  # activations whose reply showed the stored count
    handled: int = 0  # one-way messages the agent counted


async def open_sides(
    kind: str, stores: Stores, gateway: str, policy: SavePolicy | None, prefix: str, stack: list[Any]
) -> list[Side]:
    """A runtime per store (`stack` collects what to stop); for grpc one shared caller and a host per store. Agent
    types are `<prefix><i>`: unique on the gateway, so each type lives on its one host."""
    sides: list[Side] = []
    caller: Any = None
    if kind == "grpc":
        caller = GrpcAgentRuntime(gateway, token_env=None)
        await caller.start()
        stack.append(caller)
    for i, store_kind in enumerate(STORES):
        store, counter = stores.make(store_kind), Counter()
        host: Any
        if kind == "local":
            host = LocalAgentRuntime(state_store=store, save_policy=policy)
        else:
            host = GrpcAgentRuntime(gateway, token_env=None, state_store=store, save_policy=policy)
        await host.start()
        stack.append(host)
        agent_type = f"{prefix}{i}"
        await host.register_agent_factory(agent_type, factory_for(counter))
        sides.append(Side(store_kind, caller or host, agent_type, counter, store))
    return sides


async def interleave(
    sides: list[Side],
    make_fn: Callable[[Side], Callable[[], Awaitable[Any]]],
    rounds: int,
    iterations: int,
    warmup: int,
) -> dict[str, tuple[Result, float]]:
    """The harness's interleaved blocks over the stores: each round runs every store once, the order rotating, so
    drifting machine load falls on all alike. With each store's result, the median of its per-round CPU ratios to
    the first store's (off) round next to it."""
    fns = [(side.store, make_fn(side)) for side in sides]
    results, ratios = await measure_interleaved(fns, blocks=rounds, block=iterations, warmup=warmup)
    return {r.name: (r, statistics.median(q)) for r, q in zip(results, ratios, strict=True)}


def one_way_fn(settings: Settings) -> Callable[[Side], Callable[[], Awaitable[None]]]:
    def make(side: Side) -> Callable[[], Awaitable[None]]:
        target = AgentId(side.agent_type, "one")

        async def run() -> None:
            await batch(
                lambda: side.caller.send_message(StringValue(value="n"), target),
                side.counter,
                settings.batch,
                settings.batch,
            )
            side.handled += side.counter.received

        return run

    return make


def rpc_fn(side: Side) -> Callable[[], Awaitable[None]]:
    target = AgentId(side.agent_type, "one")

    async def run() -> None:
        await side.caller.send_and_await_response(StringValue(value="p"), target, 10)

    return run


def activate_fn(side: Side) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        n = next(side.fresh)
        reply = await side.caller.send_and_await_response(StringValue(value="a"), AgentId(side.agent_type, f"a{n}"), 10)
        # Seeded with count n, so a loaded agent answers n + 1; a new one (no store) answers 1.
        expected = n + 1 if side.state_store is not None else 1
        if reply.value == str(expected):
            side.loaded += 1

    return run


async def seed(sides: list[Side], count: int) -> None:
    for side in sides:
        if side.state_store is not None:
            for n in range(count):
                await side.state_store.put(AgentId(side.agent_type, f"a{n}"), {"count": n}, None)


@dataclass
class TimedRow:
    runtime: str
    case: str
    store: str
    result: Result
    cpu_ratio: float  # median per-round CPU ratio to the store-off round next to it
    per_op: int  # messages per timed op (a one-way batch), else 1
    checked: int  # messages handled (one-way), activations that loaded the stored count, or RPCs answered
    expected: int


async def measure_runtime(kind: str, settings: Settings, stores: Stores, gateway: str) -> list[TimedRow]:
    rows: list[TimedRow] = []
    stack: list[Any] = []
    try:
        sides = await open_sides(kind, stores, gateway, None, "s", stack)
        one_way = await interleave(sides, one_way_fn(settings), settings.rounds, settings.batches, 1)
        # The warm-up batch is handled too: the expected total includes it.
        expected = (settings.batches * settings.rounds + 1) * settings.batch
        rows += [
            TimedRow(kind, "one-way", s.store, *one_way[s.store], settings.batch, s.handled, expected) for s in sides
        ]
        rpcs = await interleave(sides, rpc_fn, settings.rounds, settings.rpcs, 10)
        expected = settings.rpcs * settings.rounds
        rows += [TimedRow(kind, "rpc seq", s.store, *rpcs[s.store], 1, rpcs[s.store][0].ops, expected) for s in sides]
        # Activation: runtimes that save only on deactivation, so the timed op loads but does not write.
        activation = await open_sides(kind, stores, gateway, SavePolicy.on_deactivation(), "a", stack)
        expected = settings.activations * settings.rounds
        await seed(activation, expected)
        timed = await interleave(activation, activate_fn, settings.rounds, settings.activations, 0)
        rows += [TimedRow(kind, "activate", s.store, *timed[s.store], 1, s.loaded, expected) for s in activation]
    finally:
        for runtime in reversed(stack):
            await runtime.stop()
    return rows


# --- report ----------------------------------------------------------------------------------------------------

HEADER = (
    f"{'runtime':<8} {'case':<9} {'store':<8} {'checked':>11} {'p50 ms':>8} {'p99 ms':>8} {'ops/s':>9} "
    f"{'CPU µs/op':>10} {'vs off':>7} {'CPU vs off':>10}"
)


def time_per_op(row: TimedRow) -> float:
    """What `vs off` compares: p50 for RPCs and activations, the mean time per message for one-way batches."""
    if row.per_op > 1:
        return row.result.wall_ns / (row.result.ops * row.per_op)
    return row.result.p50_ms


def format_row(row: TimedRow, off: TimedRow) -> str:
    r = row.result
    one_way = row.per_op > 1
    p50, p99 = ("-", "-") if one_way else (f"{r.p50_ms:.3f}", f"{r.p99_ms:.3f}")
    ratio = time_per_op(row) / time_per_op(off)
    return (
        f"{row.runtime:<8} {row.case:<9} {row.store:<8} {f'{row.checked}/{row.expected}':>11} {p50:>8} {p99:>8} "
        f"{r.ops_per_s * row.per_op:>9,.0f} {r.cpu_us_per_op / row.per_op:>10.1f} {ratio:>6.2f}x {row.cpu_ratio:>9.2f}x"
    )


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


async def run(settings: Settings, runtimes: Sequence[str]) -> dict[str, Any]:
    print(f"machine: {os.cpu_count()} cores, load average at the start: {load()}")
    print()
    print(HEADER, flush=True)
    rows: list[TimedRow] = []
    redis = start_redis_server()
    gateway, port = start_process(
        [sys.executable, "-m", "ext.runtime.grpc", "gateway", "--port", "0", "--log-level", "ERROR"]
    )
    try:
        with tempfile.TemporaryDirectory(prefix="bench-state-") as directory:
            stores = Stores(redis, directory)
            try:
                for kind in runtimes:
                    measured = await measure_runtime(kind, settings, stores, f"127.0.0.1:{port}")
                    offs = {r.case: r for r in measured if r.store == "off"}
                    for row in measured:
                        print(format_row(row, offs[row.case]), flush=True)
                    rows += measured
            finally:
                await stores.close()
    finally:
        gateway.kill()
        gateway.wait(10)
        redis.stop()
    print()
    print(MEMORY_HEADER, flush=True)
    memory = []
    plan = MemoryPlan(settings.agents, settings.waves, settings.idle_timeout, settings.heap_agents)
    for mode in MEMORY_MODES:
        memory.append(measure_memory(plan, mode))
        print(format_memory(memory[-1]), flush=True)
    print()
    print(f"load average at the end: {load()}")
    return {
        "settings": asdict(settings),
        "rows": [
            {
                "runtime": r.runtime,
                "case": r.case,
                "store": r.store,
                "checked": r.checked,
                "expected": r.expected,
                "ops": r.result.ops,
                "p50_ms": r.result.p50_ms,
                "p99_ms": r.result.p99_ms,
                "per_s": r.result.ops_per_s * r.per_op,
                "cpu_us": r.result.cpu_us_per_op / r.per_op,
                "cpu_ratio": r.cpu_ratio,
            }
            for r in rows
        ],
        "memory": memory,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (seconds, not minutes): for tests")
    parser.add_argument("--runtime", choices=RUNTIMES, action="append", help="only this runtime (repeatable)")
    parser.add_argument("--rounds", type=int, help="rounds per case (default 10)")
    parser.add_argument("--agents", type=int, help="memory: agents created over time (default 100000)")
    parser.add_argument("--json", help="also write the figures to this file as JSON")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else Settings()
    overrides = {name: v for name in ("rounds", "agents") if (v := getattr(args, name)) is not None}
    for name, value in overrides.items():
        if value < 1:
            parser.error(f"--{name} must be at least 1, got {value}")
    settings = Settings(**{**asdict(base), **overrides})
    if settings.agents < settings.waves:
        parser.error(f"--agents must be at least {settings.waves} (one per wave), got {settings.agents}")
    report = asyncio.run(run(settings, args.runtime or RUNTIMES))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
