"""Scale figures for ext-runtime-grpc: gateway replicas sharing one Redis, several worker processes, and the
memory an idle agent costs.

Run: ``hatch run ext-runtime-grpc:python tools/bench/bench_cluster.py [--quick] [--json PATH]`` (a full run takes
about three minutes on a 2-core machine; ``--quick`` uses small counts, for the test).

Topology. Every process is separate: one ``redis-server`` (``ext.testing.redis``), R gateway processes
(``python -m ext.runtime.grpc gateway --redis-url URL --redis-prefix P``, a fresh prefix per cluster; the
baseline is one gateway with its in-memory registry and no Redis), and a pool of worker processes
(``GrpcAgentRuntime`` given every gateway address, rotated so that worker i connects to replica ``i % R`` first:
round-robin). A case with W workers uses the pool's first W. Worker i hosts its own agent type ``w<i>`` (so
placement is known in advance) with one agent, ``w<i>/sink``, and sends to the next worker's agent in a ring,
``w<(i+1) % W>/sink``: every worker is a sender and a receiver, and with round-robin placement every hop but
at most the ring's wrap-around crosses replicas (through Redis pub/sub). The table's ``cross`` column is the
share of hops between workers on different replicas, from the addresses the workers report.

Cases, all workers at once:

- ``one-way``: each worker sends ``--messages`` one-way messages (a protobuf ``StringValue`` carrying the
  sender, a sequence number and the send time); the receiving agent checks the sequence (in order, nothing
  missing or repeated) and counts. Throughput is every message over the time from the first send to the last
  receipt (``time.monotonic_ns``, one clock for every process on Linux). Its p50/p99 is the time from send to
  handling while the blast runs: queueing, not an idle round trip.
- ``rpc sequential``: each worker makes ``--rpcs`` RPCs one at a time (so W are in flight cluster-wide), an
  ``Int64Value`` echoed by the next worker's agent; p50/p99 per RPC, RPCs/s for the cluster.
- ``rpc x<C>``: the same with ``--concurrency`` RPCs in flight per worker.

Statistics are the harness's (``_harness.measure`` in each worker, ``Result`` percentiles over every worker's
latencies). CPU per op comes from ``/proc/<pid>/stat`` (utime + stime) of every gateway, worker and
``redis-server`` process, sampled around each case and summed per role; ``busy`` is the CPU of all of them over
the case's wall time and the machine's cores (near 100 %: the cores are saturated and more processes measure
contention, not scaling), and ``other`` the rest of the machine's CPU in that time (``/proc/stat``: other jobs on
a shared machine; when it is high, this run's figures for that row are low and noisy). With ``--rounds`` 2 or
more, each case runs that many times and ``A/A`` is the spread of throughput between rounds (max / min - 1) of
the same configuration: the run-to-run noise.

Memory per idle agent: one gateway and two workers; a host worker registers type ``idle``, the other worker
sends one message to each of ``--agents`` new agents (so each is created and handles a message), the host
confirms it hosts them all, and ``VmRSS`` (``/proc/<pid>/status``) of the host (after ``gc.collect()``), the
gateway and ``redis-server`` are read before and after: the growth over the second half of the agents, divided
by their count, is the cost per agent (the first half may reuse memory a process had freed). RSS moves in
pages and with the allocators' pools, so a second batch of as many agents is created under ``tracemalloc`` on
the host: the Python allocations still alive afterwards per agent (``(heap)``), the steadier figure. Run with
the in-memory registry and with the Redis registry.

Floor: redis-py alone publishing one message at a time to a pub/sub reader (what each cross-replica hop costs
before ext adds anything).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import platform
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import grpc
import redis.asyncio as aioredis

# Script-dir import: `python tools/bench/bench_cluster.py` puts tools/bench on sys.path.
from _harness import Result, cpu_seconds, machine_cpu_seconds, measure, rss_bytes
from google.protobuf.wrappers_pb2 import Int64Value, StringValue

from ext.core import AgentId, MessageContext, RoutedAgent, message_handler
from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.grpc.testing import GatewayProcess, start_gateway_process
from ext.testing.redis import RedisServer, start_redis_server

SCRIPT = os.path.abspath(__file__)
SINK_KEY = "sink"
IDLE_TYPE = "idle"
REPLY_TIMEOUT = 120.0  # seconds any worker may take to answer one command before the run fails


# --- the machine ---------------------------------------------------------------------------------------------


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# --- the worker process (python bench_cluster.py --worker I --addresses A,B,...) ------------------------------


class Tally:
    """What a worker's receiving agents count: messages, the last time one arrived, sequence breaks, and
    send-to-handled latencies."""

    def __init__(self) -> None:
        self.received = 0
        self.wanted = 0
        self.done = asyncio.Event()
        self.last_ns = 0
        self.last_seq: dict[str, int] = {}
        self.out_of_order = 0
        self.latencies: list[int] = []

    def expect(self, count: int) -> None:
        self.received, self.wanted, self.last_ns = 0, count, 0
        self.latencies = []
        self.done.clear()
        if count <= 0:
            self.done.set()

    def hit(self) -> None:
        self.received += 1
        self.last_ns = time.monotonic_ns()
        if self.received >= self.wanted:
            self.done.set()

    def note(self, text: str) -> None:
        now = time.monotonic_ns()
        sender, seq_text, sent_text = text.split(":")
        seq = int(seq_text)
        if seq != self.last_seq.get(sender, 0) + 1:
            self.out_of_order += 1
        self.last_seq[sender] = seq
        self.latencies.append(now - int(sent_text))
        self.hit()


class Sink(RoutedAgent):
    """The one agent of type ``w<i>`` on worker i: counts one-way notes, echoes RPCs."""

    tally: Tally

    @message_handler
    async def on_note(self, message: StringValue, ctx: MessageContext) -> None:
        self.tally.note(message.value)

    @message_handler
    async def on_ping(self, message: Int64Value, ctx: MessageContext) -> Int64Value:
        return message


class Idle(RoutedAgent):
    """An agent that exists and does nothing but count the one message that woke it."""

    tally: Tally

    @message_handler
    async def on_wake(self, message: StringValue, ctx: MessageContext) -> None:
        self.tally.hit()


def _emit(reply: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


class WorkerSide:
    """Runs the commands the controller sends, one JSON object a line on stdin; answers one line each."""

    def __init__(self, index: int, runtime: GrpcAgentRuntime) -> None:
        self.index = index
        self.runtime = runtime
        self.sink = Tally()
        self.idle = Tally()
        self.seq: dict[str, int] = {}

    def _make(self, cls: type[Sink] | type[Idle], tally: Tally) -> Any:
        def factory(agent_id: AgentId, runtime: Any) -> RoutedAgent:
            agent = cls(agent_id, runtime)
            agent.tally = tally
            return agent

        return factory

    async def setup(self) -> None:
        await self.runtime.register_agent_factory(f"w{self.index}", self._make(Sink, self.sink))

    async def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd["op"]
        tally = self.idle if cmd.get("counter") == IDLE_TYPE else self.sink
        if op == "expect":
            tally.expect(int(cmd["count"]))
            return {"out_of_order": tally.out_of_order}
        if op == "wait":
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(tally.done.wait(), float(cmd["timeout"]))
            return {
                "received": tally.received,
                "last_ns": tally.last_ns,
                "out_of_order": tally.out_of_order,
                "latencies": tally.latencies,
            }
        if op == "one-way":
            target = AgentId(cmd["target"], SINK_KEY)
            me = str(self.index)
            start = time.monotonic_ns()
            for _ in range(int(cmd["count"])):
                seq = self.seq[cmd["target"]] = self.seq.get(cmd["target"], 0) + 1
                text = f"{me}:{seq}:{time.monotonic_ns()}"
                await self.runtime.send_message(StringValue(value=text), target)
            return {"start_ns": start, "end_ns": time.monotonic_ns()}
        if op == "rpc":
            target = AgentId(cmd["target"], SINK_KEY)
            ping = Int64Value(value=self.index)

            async def call() -> None:
                answer = await self.runtime.send_and_await_response(ping, target, 30)
                if not isinstance(answer, Int64Value) or answer.value != self.index:
                    raise RuntimeError(f"rpc to {target} answered {answer!r}, not the echo of {self.index}")

            start = time.monotonic_ns()
            result = await measure("rpc", call, iterations=int(cmd["count"]), concurrency=int(cmd["concurrency"]))
            return {"start_ns": start, "end_ns": time.monotonic_ns(), "latencies": list(result.latencies_ns)}
        if op == "host_idle":
            await self.runtime.register_agent_factory(IDLE_TYPE, self._make(Idle, self.idle))
            return {}
        if op == "activate":
            first, count = int(cmd["first"]), int(cmd["count"])
            wake = StringValue(value="wake")
            for k in range(first, first + count):
                await self.runtime.send_message(wake, AgentId(IDLE_TYPE, f"a{k}"))
            return {}
        if op == "rss":
            gc.collect()
            agents = await self.runtime.local_agents()
            return {"rss": rss_bytes(os.getpid()), "idle_agents": sum(1 for a in agents if a.type == IDLE_TYPE)}
        if op == "trace":
            gc.collect()
            tracemalloc.start()
            return {}
        if op == "traced":
            gc.collect()
            current, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return {"heap": current}
        raise ValueError(f"unknown op {op!r}")


async def run_worker(index: int, addresses: list[str]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with GrpcAgentRuntime(addresses, token_env=None) as runtime:
        side = WorkerSide(index, runtime)
        await side.setup()
        _emit({"pid": os.getpid(), "address": runtime.address})
        while line := await reader.readline():
            try:
                reply = await side.handle(json.loads(line))
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            _emit(reply)


# --- the controller --------------------------------------------------------------------------------------------


class Worker:
    """A worker process and its command pipe."""

    def __init__(self, index: int, process: asyncio.subprocess.Process, stderr: IO[bytes]) -> None:
        self.index = index
        self.process = process
        self.stderr = stderr
        self.pid = process.pid
        self.address = ""

    def _tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-2000:]

    async def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), REPLY_TIMEOUT)
        except asyncio.TimeoutError:
            raise RuntimeError(f"worker {self.index} did not answer within {REPLY_TIMEOUT:.0f} s") from None
        if not line:
            raise RuntimeError(f"worker {self.index} exited: {self._tail()}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"worker {self.index}: {reply['error']}")
        return reply

    async def call(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **args}).encode() + b"\n")
        await self.process.stdin.drain()
        return await self._read()

    async def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except asyncio.TimeoutError:
            self.process.kill()
            await self.process.wait()
        self.stderr.close()


async def start_worker(index: int, addresses: list[str]) -> Worker:
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the Worker owns it and closes it in stop()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXT_GRPC")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        SCRIPT,
        "--worker",
        str(index),
        "--addresses",
        ",".join(addresses),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=env,
        limit=1 << 26,
    )
    worker = Worker(index, process, stderr)
    try:
        ready = await worker._read()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    worker.address = ready["address"]
    return worker


@dataclass
class Cluster:
    """Running gateways (and the Redis they share, if any) with a pool of workers."""

    registry: str
    gateways: list[GatewayProcess]
    workers: list[Worker]
    redis_pid: int | None

    @property
    def addresses(self) -> list[str]:
        return [g.address for g in self.gateways]

    def pids(self) -> dict[str, list[int]]:
        return {
            "gateways": [g.process.pid for g in self.gateways],
            "workers": [w.pid for w in self.workers],
            "redis": [self.redis_pid] if self.redis_pid is not None else [],
        }

    async def stop(self) -> None:
        await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)
        for gateway in self.gateways:
            gateway.kill()


async def start_cluster(replicas: int, workers: int, redis: RedisServer | None) -> Cluster:
    """`replicas` gateway processes (sharing `redis` under a fresh prefix; one in-memory gateway when `redis` is
    None) and `workers` worker processes, worker i given every address starting with replica i % replicas."""
    args = ["--log-level", "ERROR"]
    if redis is not None:
        args += ["--redis-url", redis.url, "--redis-prefix", f"bench-{uuid.uuid4().hex[:8]}"]
    gateways: list[GatewayProcess] = []
    pool: list[Worker] = []
    try:
        started = await asyncio.gather(
            *(asyncio.to_thread(start_gateway_process, *args) for _ in range(replicas)), return_exceptions=True
        )
        gateways = [g for g in started if isinstance(g, GatewayProcess)]
        for failure in started:
            if isinstance(failure, BaseException):
                raise failure
        addresses = [g.address for g in gateways]
        rotated = [addresses[i % replicas :] + addresses[: i % replicas] for i in range(workers)]
        results = await asyncio.gather(*(start_worker(i, rotated[i]) for i in range(workers)), return_exceptions=True)
        pool = [w for w in results if isinstance(w, Worker)]
        for outcome in results:
            if isinstance(outcome, BaseException):
                raise outcome
    except BaseException:
        await Cluster("", gateways, pool, None).stop()
        raise
    return Cluster("redis" if redis is not None else "memory", gateways, pool, redis.process.pid if redis else None)


@dataclass
class CaseRow:
    """One configuration and case, every round merged."""

    registry: str
    replicas: int
    workers: int
    cross: float  # share of sender -> receiver hops between different replicas
    case: str
    expected: int  # messages or RPCs
    counted: int  # messages received (one-way) or RPCs answered
    out_of_order: int
    ops_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_us_per_op: dict[str, float]  # role -> CPU µs per op, summed over the role's processes
    busy: float  # CPU of every process / (wall * cores)
    others: float  # CPU of everything else on the machine (other jobs) / (wall * cores)
    round_rates: list[float] = field(default_factory=list)

    @property
    def aa(self) -> float | None:
        if len(self.round_rates) < 2:
            return None
        return max(self.round_rates) / min(self.round_rates) - 1


@dataclass
class Round:
    latencies: list[int]
    span_ns: int
    ops: int
    counted: int
    out_of_order: int
    cpu: dict[str, float]
    wall_s: float
    others_s: float  # machine CPU not used by the cluster or this controller


def ring(active: list[Worker]) -> list[tuple[Worker, str]]:
    """Each active worker with the agent type it sends to: the next worker's (in a ring)."""
    return [(w, f"w{active[(i + 1) % len(active)].index}") for i, w in enumerate(active)]


def _cpu_snapshot(pids: dict[str, list[int]]) -> dict[str, float]:
    return {role: sum(cpu_seconds(p) for p in group) for role, group in pids.items()}


async def _round(cluster: Cluster, active: list[Worker], case: str, count: int, concurrency: int) -> Round:
    """One measured round of `case` on the `active` workers (each sending to the next in the ring)."""
    pids = cluster.pids()
    before = _cpu_snapshot(pids)
    machine0, own0 = machine_cpu_seconds(), time.process_time()
    wall0 = time.perf_counter()
    if case == "one-way":
        ready = await asyncio.gather(*(w.call("expect", count=count) for w in active))
        out_of_order0 = sum(r["out_of_order"] for r in ready)
        sent = await asyncio.gather(*(w.call("one-way", target=t, count=count) for w, t in ring(active)))
        got = await asyncio.gather(*(w.call("wait", timeout=60) for w in active))
        latencies = [x for r in got for x in r["latencies"]]
        span = max(r["last_ns"] for r in got) - min(r["start_ns"] for r in sent)
        counted = sum(r["received"] for r in got)
        out_of_order = sum(r["out_of_order"] for r in got) - out_of_order0
    else:
        done = await asyncio.gather(
            *(w.call("rpc", target=t, count=count, concurrency=concurrency) for w, t in ring(active))
        )
        latencies = [x for r in done for x in r["latencies"]]
        span = max(r["end_ns"] for r in done) - min(r["start_ns"] for r in done)
        counted, out_of_order = len(latencies), 0
    wall = time.perf_counter() - wall0
    after = _cpu_snapshot(pids)
    own = time.process_time() - own0
    cpu = {role: after[role] - before[role] for role in before}
    others = max(0.0, machine_cpu_seconds() - machine0 - own - sum(cpu.values()))
    return Round(latencies, max(span, 1), count * len(active), counted, out_of_order, cpu, wall, others)


def _merge(rounds: list[Round]) -> tuple[Result, Round]:
    latencies = [x for r in rounds for x in r.latencies]
    span = sum(r.span_ns for r in rounds)
    cpu = {role: sum(r.cpu[role] for r in rounds) for role in rounds[0].cpu}
    total = Round(
        latencies,
        span,
        sum(r.ops for r in rounds),
        sum(r.counted for r in rounds),
        sum(r.out_of_order for r in rounds),
        cpu,
        sum(r.wall_s for r in rounds),
        sum(r.others_s for r in rounds),
    )
    # The harness's statistics: percentiles over every worker's latencies, ops/s over the summed spans, CPU of
    # every process in the cluster per op.
    result = Result("ext", tuple(latencies) or (0,), span, int(sum(cpu.values()) * 1e9))
    return result, total


def _cross(active: list[Worker]) -> float:
    hops = [(w.address, active[(i + 1) % len(active)].address) for i, w in enumerate(active)]
    return sum(1 for a, b in hops if a != b) / len(hops)


@dataclass(frozen=True)
class Settings:
    replicas: tuple[int, ...] = (1, 2, 3)
    workers: tuple[int, ...] = (2, 4, 8)
    messages: int = 2000
    rpcs: int = 300
    concurrent_rpcs: int = 800
    concurrency: int = 16
    rounds: int = 2
    agents: int = 10_000
    baseline: bool = True  # a 1-replica in-memory-registry cluster first


QUICK = Settings(
    replicas=(1, 2), workers=(2,), messages=200, rpcs=40, concurrent_rpcs=80, concurrency=8, rounds=1, agents=2000
)


async def measure_cluster(
    settings: Settings, replicas: int, redis: RedisServer | None, rows: list[CaseRow], log: IO[str]
) -> None:
    cluster = await start_cluster(replicas, max(settings.workers), redis)
    try:
        for count in settings.workers:
            active = cluster.workers[:count]
            # Warm-up: places every sink agent, warms every path (not measured).
            await asyncio.gather(*(w.call("rpc", target=t, count=20, concurrency=4) for w, t in ring(active)))
            await _round(cluster, active, "one-way", 50, 1)
            plan = (
                ("one-way", settings.messages, 1, "one-way"),
                ("rpc sequential", settings.rpcs, 1, "rpc sequential"),
                ("rpc concurrent", settings.concurrent_rpcs, settings.concurrency, f"rpc x{settings.concurrency}"),
            )
            for case, n, concurrency, label in plan:
                rounds = [await _round(cluster, active, case, n, concurrency) for _ in range(settings.rounds)]
                result, total = _merge(rounds)
                has_latency = bool(total.latencies)
                row = CaseRow(
                    registry=cluster.registry,
                    replicas=replicas,
                    workers=count,
                    cross=_cross(active),
                    case=label,
                    expected=total.ops,
                    counted=total.counted,
                    out_of_order=total.out_of_order,
                    ops_per_s=total.ops / (total.span_ns / 1e9),
                    p50_ms=result.p50_ms if has_latency else math.nan,
                    p99_ms=result.p99_ms if has_latency else math.nan,
                    cpu_us_per_op={role: cpu / total.ops * 1e6 for role, cpu in total.cpu.items()},
                    busy=sum(total.cpu.values()) / (total.wall_s * cores()),
                    others=total.others_s / (total.wall_s * cores()),
                    round_rates=[r.ops / (r.span_ns / 1e9) for r in rounds],
                )
                rows.append(row)
                print(format_row(row), file=log, flush=True)
    finally:
        await cluster.stop()


@dataclass
class MemoryRow:
    registry: str
    agents: int
    hosted: int  # idle agents the host worker reports hosting after the run
    worker_bytes: float  # per agent (RSS)
    worker_heap_bytes: float  # per agent: Python allocations still alive (tracemalloc), a second batch of agents
    gateway_bytes: float
    redis_bytes: float | None
    worker_rss_before: int
    worker_rss_mid: int
    worker_rss_after: int


async def measure_memory(agents: int, redis: RedisServer | None) -> MemoryRow:
    cluster = await start_cluster(1, 2, redis)
    host, sender = cluster.workers
    gateway_pid = cluster.gateways[0].process.pid
    try:
        await host.call("host_idle")

        async def activate(first: int, count: int) -> None:
            await host.call("expect", counter=IDLE_TYPE, count=count)
            await sender.call("activate", first=first, count=count)
            got = await host.call("wait", counter=IDLE_TYPE, timeout=120)
            if got["received"] != count:
                raise RuntimeError(f"only {got['received']} of {count} idle agents were activated")

        async def snapshot() -> tuple[dict[str, Any], int, int | None]:
            host_side = await host.call("rss")
            redis_rss = rss_bytes(cluster.redis_pid) if cluster.redis_pid is not None else None
            return host_side, rss_bytes(gateway_pid), redis_rss

        warm = max(100, agents // 20)
        await activate(0, warm)  # warms every path and grows the pools that would otherwise show as per-agent cost
        before, _, _ = await snapshot()
        # The first half may reuse memory the processes had freed before (resident already); the growth over the
        # second half is the cost per agent.
        half = agents // 2
        await activate(warm, half)
        mid, gateway_mid, redis_mid = await snapshot()
        await activate(warm + half, agents - half)
        after, gateway_after, redis_after = await snapshot()
        # A third batch under tracemalloc (its bookkeeping would inflate the RSS figure, so not the same one).
        await host.call("trace")
        await activate(warm + agents, agents)
        heap = (await host.call("traced"))["heap"]
    finally:
        await cluster.stop()
    second = agents - half
    return MemoryRow(
        registry=cluster.registry,
        agents=agents,
        hosted=after["idle_agents"] - before["idle_agents"],
        worker_bytes=(after["rss"] - mid["rss"]) / second,
        worker_heap_bytes=heap / agents,
        gateway_bytes=(gateway_after - gateway_mid) / second,
        redis_bytes=(redis_after - redis_mid) / second if redis_after is not None and redis_mid is not None else None,
        worker_rss_before=before["rss"],
        worker_rss_mid=mid["rss"],
        worker_rss_after=after["rss"],
    )


# --- report -------------------------------------------------------------------------------------------------

HEADER = (
    f"{'registry':<8} {'repl':>4} {'wkrs':>4} {'cross':>5} {'case':<14} {'counted':>13} {'ops/s':>9} "
    f"{'p50 ms':>8} {'p99 ms':>8} {'gw µs/op':>9} {'wk µs/op':>9} {'rds µs/op':>9} {'busy':>5} {'other':>5} {'A/A':>6}"
)


def format_row(row: CaseRow) -> str:
    redis = row.cpu_us_per_op.get("redis", 0.0) if row.registry == "redis" else math.nan
    aa = f"{row.aa:.0%}" if row.aa is not None else "-"

    def ms(value: float) -> str:
        return "-" if math.isnan(value) else f"{value:.2f}"

    return (
        f"{row.registry:<8} {row.replicas:>4} {row.workers:>4} {row.cross:>5.0%} {row.case:<14} "
        f"{f'{row.counted}/{row.expected}':>13} {row.ops_per_s:>9,.0f} {ms(row.p50_ms):>8} {ms(row.p99_ms):>8} "
        f"{row.cpu_us_per_op['gateways']:>9.0f} {row.cpu_us_per_op['workers']:>9.0f} "
        f"{'-' if math.isnan(redis) else f'{redis:.0f}':>9} {row.busy:>5.0%} {row.others:>5.0%} {aa:>6}"
    )


MEMORY_HEADER = (
    f"{'registry':<8} {'agents':>7} {'hosted':>7} {'worker B/agent':>15} {'(heap)':>7} {'gateway B/agent':>16} "
    f"{'redis B/agent':>14} {'worker RSS MiB (before/mid/after)':>34}"
)


def format_memory(row: MemoryRow) -> str:
    redis = "-" if row.redis_bytes is None else f"{row.redis_bytes:,.0f}"
    rss = "/".join(f"{x / 2**20:.1f}" for x in (row.worker_rss_before, row.worker_rss_mid, row.worker_rss_after))
    return (
        f"{row.registry:<8} {row.agents:>7,} {row.hosted:>7,} {row.worker_bytes:>15,.0f} "
        f"{row.worker_heap_bytes:>7,.0f} "
        f"{row.gateway_bytes:>16,.0f} {redis:>14} {rss:>34}"
    )


def machine_note(settings: Settings) -> str:
    n = cores()
    biggest = max(settings.replicas) + max(settings.workers) + 1
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"machine: {n} cores (of {os.cpu_count()}), Python {platform.python_version()}, grpcio {grpc.__version__}, "
        f"load average {load} at the start\n"
        f"limit: the largest configuration runs {max(settings.replicas)} gateways + {max(settings.workers)} workers + "
        f"redis-server = {biggest} busy processes on {n} cores. Once 'busy' nears 100 % the cores are saturated: "
        "more replicas or workers then share the same CPU, so the figures measure contention, not scaling, "
        "and each process's CPU per op is the steadier figure."
    )


@dataclass
class Floor:
    messages: int
    per_s: float
    cpu_us: float  # this process's CPU per message, publisher and reader together


async def redis_floor(url: str, messages: int) -> Floor:
    """What a cross-replica hop rests on, without ext: redis-py's asyncio client publishing 200-byte payloads one
    at a time, each awaited (as a gateway forwards), to a pub/sub reader polling like the gateway's, in this
    process."""
    publisher = aioredis.from_url(url)
    subscriber = aioredis.from_url(url)
    pubsub: Any = subscriber.pubsub()  # PubSub.aclose is untyped in redis-py
    try:
        await pubsub.subscribe("bench-floor")
        received = 0

        async def read() -> None:
            nonlocal received
            while received < messages:
                if await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0) is not None:
                    received += 1

        payload = b"x" * 200
        cpu0, wall0 = time.process_time(), time.perf_counter()
        reader = asyncio.get_running_loop().create_task(read())
        for _ in range(messages):
            await publisher.publish("bench-floor", payload)
        await asyncio.wait_for(reader, 60)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        await pubsub.aclose()
        await subscriber.aclose()
        await publisher.aclose()
    return Floor(messages, messages / wall, cpu / messages * 1e6)


def format_floor(floor: Floor) -> str:
    return (
        f"redis-py floor (no ext): PUBLISH awaited one at a time + a pub/sub reader, 200-byte payloads: "
        f"{floor.per_s:,.0f} msgs/s, {floor.cpu_us:.0f} µs CPU per message (both sides, one process)"
    )


@dataclass
class Report:
    rows: list[CaseRow]
    memory: list[MemoryRow]
    floor: Floor
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [asdict(r) | {"aa": r.aa} for r in self.rows],
            "memory": [asdict(m) for m in self.memory],
            "redis_floor": asdict(self.floor),
            "cores": cores(),
            "note": self.note,
        }


async def run(settings: Settings, log: IO[str] | None = None) -> Report:
    """Every configuration (rows are printed to `log` as they finish) and the memory figures."""
    out = log if log is not None else sys.stdout
    note = machine_note(settings)
    print(note, file=out)
    print(file=out)
    print(HEADER, file=out, flush=True)
    rows: list[CaseRow] = []
    memory: list[MemoryRow] = []
    redis = start_redis_server()
    try:
        if settings.baseline:
            await measure_cluster(settings, 1, None, rows, out)
        for replicas in settings.replicas:
            await measure_cluster(settings, replicas, redis, rows, out)
        print(file=out)
        print(MEMORY_HEADER, file=out, flush=True)
        for registry in (None, redis):
            memory.append(await measure_memory(settings.agents, registry))
            print(format_memory(memory[-1]), file=out, flush=True)
        print(file=out)
        floor = await redis_floor(redis.url, max(settings.messages, 1000))
        print(format_floor(floor), file=out)
    finally:
        redis.stop()
    print(file=out)
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}", file=out)
    return Report(rows, memory, floor, note)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers of at least 1, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (seconds, not minutes): for tests")
    parser.add_argument("--replicas", type=_int_list, help="gateway replica counts (default 1,2,3)")
    parser.add_argument("--workers", type=_int_list, help="worker counts (default 2,4,8)")
    parser.add_argument("--messages", type=int, help="one-way messages per worker per round (default 2000)")
    parser.add_argument("--rpcs", type=int, help="sequential RPCs per worker per round (default 300)")
    parser.add_argument("--concurrent-rpcs", type=int, help="concurrent-case RPCs per worker per round (default 800)")
    parser.add_argument("--concurrency", type=int, help="RPCs in flight per worker in the concurrent case (16)")
    parser.add_argument("--rounds", type=int, help="rounds per case (default 2; the A/A spread needs 2+)")
    parser.add_argument("--agents", type=int, help="idle agents for the memory figure (default 10000)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the 1-gateway in-memory-registry baseline")
    parser.add_argument("--json", help="also write the figures to this file as JSON")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--addresses", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        asyncio.run(run_worker(args.worker, args.addresses.split(",")))
        return 0
    base = QUICK if args.quick else Settings()
    overrides = {
        name: value
        for name in ("replicas", "workers", "messages", "rpcs", "concurrent_rpcs", "concurrency", "rounds", "agents")
        if (value := getattr(args, name)) is not None
    }
    for name, value in overrides.items():
        if isinstance(value, int) and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    settings = Settings(**{**asdict(base), **overrides, "baseline": not args.no_baseline})
    report = asyncio.run(run(settings))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report.to_json(), out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
