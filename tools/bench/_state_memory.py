"""bench_state.py's agent and its memory figures: agents created over time on a local runtime, with and without
``idle_timeout``, each row in a fresh process (``python _state_memory.py MODE PLAN_JSON``, started by
``measure_memory``) so one row's garbage and allocator pools never count in another's.

Modes: ``none`` (no idle timeout), ``idle`` (``idle_timeout``; states kept in the runtime's ``InMemoryStateStore``)
and ``idle redis`` (the same with the states in a ``RedisStateStore`` on a redis-server of its own, so what stays
in this process after deactivation is the runtime's own residue). RSS (``/proc``) is sampled after a warm-up
(baseline), after each wave (peak), once all agents exist and once the idle ones are deactivated; the Python heap
per agent is counted by ``tracemalloc`` over a further batch (its bookkeeping would inflate the RSS figures).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from _harness import rss_bytes
from bench_runtime import Counter
from google.protobuf.wrappers_pb2 import StringValue

from ext.core import AgentId, MessageContext, RoutedAgent, StateStore, message_handler
from ext.redis import RedisStateStore
from ext.runtime.local import LocalAgentRuntime
from ext.testing.redis import start_redis_server

SCRIPT = os.path.abspath(__file__)
MEMORY_MODES = ("none", "idle", "idle redis")
WARMUP_AGENTS = 1000
MEMORY_HEADER = (
    f"{'mode':<11} {'idle_timeout':>12} {'agents':>8} {'create s':>8} {'live':>8} {'live idle':>9} "
    f"{'RSS MiB base/peak/created/idle':>31} {'RSS B/agent':>11} {'heap B/agent live/idle':>22} {'records':>8} "
    f"{'redis B/rec':>11}"
)


class StateAgent(RoutedAgent):
    """Counts its messages and keeps the count as its state; an RPC answers with the count."""

    counter: Counter
    count = 0

    @message_handler
    async def on_text(self, message: StringValue, ctx: MessageContext) -> StringValue | None:
        self.count += 1
        if ctx.is_rpc:
            return StringValue(value=str(self.count))
        self.counter.hit()
        return None

    async def save_state(self) -> Mapping[str, Any]:
        return {"count": self.count}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self.count = state["count"]


def factory_for(counter: Counter) -> Callable[[AgentId, Any], StateAgent]:
    def factory(agent_id: AgentId, runtime: Any) -> StateAgent:
        agent = StateAgent(agent_id, runtime)
        agent.counter = counter
        return agent

    return factory


@dataclass(frozen=True)
class MemoryPlan:
    agents: int  # created over time
    waves: int  # ... in this many waves (each wave's RPCs concurrently)
    idle_timeout: float
    heap_agents: int  # the further batch under tracemalloc


async def memory_child(plan: MemoryPlan, mode: str) -> dict[str, Any]:
    idle = mode != "none"
    redis = start_redis_server() if mode == "idle redis" else None
    store: StateStore | None = RedisStateStore(redis.url) if redis is not None else None
    try:
        redis_before = rss_bytes(redis.process.pid) if redis is not None else 0
        figures = await _memory_figures(plan, idle, store)
        figures["mode"] = mode
        figures["redis_bytes"] = None
        if redis is not None:
            figures["redis_bytes"] = (rss_bytes(redis.process.pid) - redis_before) / figures["records"]
        return figures
    finally:
        if store is not None:
            await store.close()
        if redis is not None:
            redis.stop()


async def _memory_figures(plan: MemoryPlan, idle: bool, store: StateStore | None) -> dict[str, Any]:
    runtime = LocalAgentRuntime(state_store=store, idle_timeout=plan.idle_timeout if idle else None)
    await runtime.start()
    counter = Counter()
    for agent_type in ("w", "m", "h"):  # warm-up, the timed agents, the tracemalloc batch
        await runtime.register_agent_factory(agent_type, factory_for(counter))

    per_wave = plan.agents // plan.waves

    async def create(agent_type: str, first: int, count: int) -> None:
        """`count` new agents, a wave (`per_wave` RPCs at once) at a time: a burst of thousands of activations
        would queue in the Redis pool longer than its `timeout` (the client spends about 0.3 ms of CPU a call)."""
        for start in range(first, first + count, per_wave):
            ids = [AgentId(agent_type, str(i)) for i in range(start, min(start + per_wave, first + count))]
            await asyncio.gather(*(runtime.send_and_await_response(StringValue(value="c"), a, 60) for a in ids))

    async def settled(agent_type: str) -> int:
        """With idle_timeout, wait (bounded) until the idle timers have deactivated every agent of the type."""
        deadline = time.monotonic() + plan.idle_timeout * 5 + 30
        # No deactivation event in the public API: poll the runtime's own count, bounded above.
        while idle and await runtime.list_agents(agent_type) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(plan.idle_timeout / 4)
        return len(await runtime.list_agents(agent_type))

    await create("w", 0, WARMUP_AGENTS)  # code paths and the allocator's first pools
    await settled("w")
    gc.collect()
    baseline = rss_bytes(os.getpid())
    peak = baseline
    start = time.perf_counter()
    for wave in range(plan.waves):
        await create("m", wave * per_wave, per_wave)
        peak = max(peak, rss_bytes(os.getpid()))
    created_s = time.perf_counter() - start
    live_created = len(await runtime.list_agents("m"))
    gc.collect()
    rss_created = rss_bytes(os.getpid())
    live_after = await settled("m")
    gc.collect()
    rss_after = rss_bytes(os.getpid())

    tracemalloc.start()
    heap0, _ = tracemalloc.get_traced_memory()
    await create("h", 0, plan.heap_agents)
    gc.collect()
    heap_live, _ = tracemalloc.get_traced_memory()
    await settled("h")
    gc.collect()
    heap_idle, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    kept = runtime.state_store
    records = len(await kept.keys()) if kept is not None else 0
    await runtime.stop()
    return {
        "idle_timeout": plan.idle_timeout if idle else None,
        "agents": per_wave * plan.waves,
        "created_s": created_s,
        "live_created": live_created,
        "live_after": live_after,
        "rss_baseline": baseline,
        "rss_peak": peak,
        "rss_created": rss_created,
        "rss_after": rss_after,
        "heap_agents": plan.heap_agents,
        "heap_live_bytes": (heap_live - heap0) / plan.heap_agents,
        "heap_idle_bytes": (heap_idle - heap0) / plan.heap_agents,
        "records": records,
    }


def measure_memory(plan: MemoryPlan, mode: str) -> dict[str, Any]:
    """One row, in a fresh process."""
    args = [sys.executable, SCRIPT, mode, json.dumps(plan.__dict__)]
    done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"memory child {mode!r} failed: {done.stderr.strip()[-800:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def format_memory(m: dict[str, Any]) -> str:
    mib = "/".join(f"{m[k] / 2**20:.1f}" for k in ("rss_baseline", "rss_peak", "rss_created", "rss_after"))
    per_agent = (m["rss_created"] - m["rss_baseline"]) / m["agents"]
    idle = "-" if m["idle_timeout"] is None else f"{m['idle_timeout']:g} s"
    heap = f"{m['heap_live_bytes']:,.0f}/{m['heap_idle_bytes']:,.0f}"
    redis = "-" if m["redis_bytes"] is None else f"{m['redis_bytes']:,.0f}"
    return (
        f"{m['mode']:<11} {idle:>12} {m['agents']:>8,} {m['created_s']:>8.1f} {m['live_created']:>8,} "
        f"{m['live_after']:>9,} {mib:>31} {per_agent:>11,.0f} {heap:>22} {m['records']:>8,} {redis:>11}"
    )


if __name__ == "__main__":
    figures = asyncio.run(memory_child(MemoryPlan(**json.loads(sys.argv[2])), sys.argv[1]))
    sys.stdout.write(json.dumps(figures) + "\n")
