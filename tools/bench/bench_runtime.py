"""ext-runtime-grpc against a raw grpc.aio bidirectional relay with the same two-hop topology.

Run: ``python tools/bench/bench_runtime.py [--iterations N] [--rounds R]`` in an environment with ext-runtime-grpc
(``hatch run ext-runtime-grpc:python tools/bench/bench_runtime.py``).

Topology, both sides: a relay/gateway in its own process on 127.0.0.1, and two clients in this process (a
caller and a host). An RPC goes caller -> relay -> host -> relay -> caller. The raw relay forwards opaque
bytes with a one-byte route header and no placement, registry or serialization: the floor. Payloads are a
protobuf ``StringValue`` on both sides. The raw caller gives each RPC a deadline the cheapest way (a timer on
its future, armed once the request is written); the raw host answers inline in its stream reader.

Cases: sequential RPC (p50, round trips/s), 32 concurrent RPCs, one-way messages/s (batches of 500, timed
until the host has all of them), broadcast to 10 agents (deliveries/s, batches of 50 broadcasts).

Raw and ext rounds alternate (and which goes first alternates), so load from elsewhere on the machine falls on
both alike. Besides the merged table, it prints the relay's and the gateway's CPU per operation (Linux /proc)
and the median of the per-round p50 ratios, which drifting machine load disturbs least.

``--callgrind`` (needs valgrind; minutes): ext alone, instructions per operation of each case with the gateway
in this process, so that the workers' and the gateway's code are both counted (grpc's threads too). Instruction
counts do not drift with the machine's load: the measure for comparing two versions of ext-runtime-grpc (run it
on each) where wall-clock ratios on a shared machine swing by more than the change.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import selectors
import statistics
import struct
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

# Script-dir import: `python tools/bench/bench_runtime.py` puts tools/bench on sys.path.
from _harness import Result, Row, callgrind_per_op, cpu_seconds, measure, print_table
from google.protobuf.wrappers_pb2 import StringValue

from ext.core import AgentId, MessageContext, RoutedAgent, message_handler
from ext.runtime.grpc import Gateway, GrpcAgentRuntime

METHOD = "/bench.Relay/Open"
SCRIPT = os.path.abspath(__file__)
ONE_WAY_BATCH = 500
BROADCAST_BATCH = 50
BROADCAST_FANOUT = 10
_identity: Callable[[bytes], bytes] = lambda b: b  # noqa: E731


# --- the raw relay (runs as a subprocess: python bench_runtime.py --relay) --------------------------------


async def serve_relay() -> None:
    streams: dict[bytes, Any] = {}
    locks: dict[bytes, asyncio.Lock] = {}

    async def open_stream(request_iterator: Any, context: Any) -> None:
        name = (await context.read())[:1]
        streams[name], locks[name] = context, asyncio.Lock()
        await context.write(b"!")  # registered: the client may start sending
        while True:
            frame = await context.read()
            if frame is grpc.aio.EOF:  # type: ignore[attr-defined]
                return
            target = frame[:1]
            async with locks[target]:
                await streams[target].write(name + frame[1:])

    handler = grpc.stream_stream_rpc_method_handler(
        open_stream, request_deserializer=_identity, response_serializer=_identity
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bench.Relay", {"Open": handler})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    await server.wait_for_termination()


class RawClient:
    """One side of the raw relay: frames are route byte + kind byte + 4-byte request id + payload."""

    def __init__(self, name: bytes, peer: bytes, channel: grpc.aio.Channel) -> None:
        self.name, self.peer = name, peer
        open_stream: Any = channel.stream_stream(METHOD, request_serializer=_identity, response_deserializer=_identity)
        self.call: Any = open_stream()
        self.lock = asyncio.Lock()
        self.pending: dict[int, asyncio.Future[bytes]] = {}
        self.ids = itertools.count(1)
        self.received = 0
        self.wanted = 0
        self.done = asyncio.Event()
        self.local_handlers = [self._deliver_one] * BROADCAST_FANOUT

    async def start(self) -> None:
        await self.call.write(self.name)
        assert await asyncio.wait_for(self.call.read(), 10) == b"!"
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _send(self, frame: bytes) -> None:
        async with self.lock:
            await self.call.write(frame)

    def _deliver_one(self, payload: bytes) -> None:
        StringValue.FromString(payload)
        self.received += 1
        if self.received >= self.wanted:
            self.done.set()

    async def _read(self) -> None:
        while True:
            frame = await self.call.read()
            if frame is grpc.aio.EOF:  # type: ignore[attr-defined]
                return
            source, kind, (request_id,), payload = frame[:1], frame[1:2], struct.unpack("!I", frame[2:6]), frame[6:]
            if kind == b"R":
                reply = StringValue(value=StringValue.FromString(payload).value)
                await self._send(source + b"P" + frame[2:6] + reply.SerializeToString())
            elif kind == b"P":
                future = self.pending.pop(request_id, None)
                if future is not None and not future.done():
                    future.set_result(payload)
            elif kind == b"O":
                self._deliver_one(payload)
            elif kind == b"B":
                for handler in self.local_handlers:
                    handler(payload)

    async def rpc(self, text: str) -> str:
        request_id = next(self.ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        self.pending[request_id] = future
        frame = self.peer + b"R" + struct.pack("!I", request_id) + StringValue(value=text).SerializeToString()
        try:
            await self._send(frame)
            # The deadline armed once the request is out (as asyncio.wait_for here used to), but without
            # wait_for's extra event loop pass per call (Python < 3.12): the floor does the cheapest thing.
            timer = loop.call_later(10, _expire, future)
            try:
                payload = await future
            finally:
                timer.cancel()
        finally:
            self.pending.pop(request_id, None)
        return StringValue.FromString(payload).value

    async def one_way(self, kind: bytes, text: str) -> None:
        await self._send(self.peer + kind + b"\0\0\0\0" + StringValue(value=text).SerializeToString())


def _expire(future: asyncio.Future[bytes]) -> None:
    if not future.done():
        future.set_exception(TimeoutError("no answer from the raw relay within 10 s"))


# --- ext ---------------------------------------------------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.received = 0
        self.wanted = 0
        self.done = asyncio.Event()

    def hit(self) -> None:
        self.received += 1
        if self.received >= self.wanted:
            self.done.set()


class BenchAgent(RoutedAgent):
    counter: Counter

    @message_handler
    async def on_text(self, message: StringValue, ctx: MessageContext) -> StringValue | None:
        if ctx.is_rpc:
            return StringValue(value=message.value)
        self.counter.hit()
        return None


# --- driver ------------------------------------------------------------------------------------------------


def start_process(args: list[str]) -> tuple[subprocess.Popen[str], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXT_GRPC")}
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    ready = selector.select(timeout=30)
    selector.close()
    line = process.stdout.readline().strip() if ready else ""
    if not line.isdigit():
        process.kill()
        raise RuntimeError(f"{args[1:3]} did not start")
    return process, int(line)


async def batch(send: Callable[[], Awaitable[None]], counter: Any, count: int, expect: int) -> None:
    counter.received, counter.wanted = 0, expect
    counter.done.clear()
    for _ in range(count):
        await send()
    await asyncio.wait_for(counter.done.wait(), 30)


def _merge(name: str, results: list[Result]) -> Result:
    latencies = tuple(x for r in results for x in r.latencies_ns)
    return Result(
        name, latencies, sum(r.wall_ns for r in results), sum(r.cpu_ns for r in results), results[0].concurrency
    )


@dataclass
class Paired:
    """Both sides of one case: merged results, per-round p50 ratios, and the servers' CPU per operation."""

    raw: Result
    ext: Result
    p50_ratios: list[float]
    relay_cpu_us: float
    gateway_cpu_us: float


async def interleaved(
    raw_fn: Callable[[], Awaitable[Any]],
    ext_fn: Callable[[], Awaitable[Any]],
    rounds: int,
    iterations: int,
    warmup: int,
    concurrency: int,
    servers: tuple[int, int],
) -> Paired:
    """Alternate raw and ext rounds (which one goes first alternates too) and merge each side's rounds, so load
    from elsewhere on the machine falls on both sides alike. `servers` are the relay's and the gateway's pids."""
    results: dict[str, list[Result]] = {"raw": [], "ext": []}
    server_cpu = {"raw": 0.0, "ext": 0.0}
    sides = {"raw": ("raw relay", raw_fn, servers[0]), "ext": ("ext", ext_fn, servers[1])}
    for round_no in range(rounds):
        for side in ("raw", "ext") if round_no % 2 == 0 else ("ext", "raw"):
            name, fn, pid = sides[side]
            before = cpu_seconds(pid)
            results[side].append(await measure(name, fn, iterations=iterations, warmup=warmup, concurrency=concurrency))
            # Includes the warmup's share: the server's CPU is sampled around the whole measure() call.
            server_cpu[side] += (cpu_seconds(pid) - before) / (iterations + warmup)
    ratios = [e.p50_ms / r.p50_ms for r, e in zip(results["raw"], results["ext"], strict=True)]
    return Paired(
        _merge("raw relay", results["raw"]),
        _merge("ext", results["ext"]),
        ratios,
        server_cpu["raw"] / rounds * 1e6,
        server_cpu["ext"] / rounds * 1e6,
    )


CASES = ("rpc sequential", "rpc 32 concurrent", "one-way msgs", "broadcast x10")


async def run(iterations: int, rounds: int, cases: Sequence[str] = CASES) -> None:
    warmup = max(10, iterations // rounds // 10)
    rows: list[Row] = []
    pairs: list[tuple[str, Paired]] = []
    extra: list[tuple[str, float, float]] = []

    relay, relay_port = start_process([sys.executable, SCRIPT, "--relay"])
    gateway, gateway_port = start_process(
        [sys.executable, "-m", "ext.runtime.grpc", "gateway", "--port", "0", "--log-level", "ERROR"]
    )
    servers = (relay.pid, gateway.pid)
    try:
        channel_a = grpc.aio.insecure_channel(f"127.0.0.1:{relay_port}")
        channel_b = grpc.aio.insecure_channel(f"127.0.0.1:{relay_port}")
        caller, host = RawClient(b"A", b"B", channel_a), RawClient(b"B", b"A", channel_b)
        await host.start()
        await caller.start()
        await caller.rpc("warm")

        ext_caller = GrpcAgentRuntime(f"127.0.0.1:{gateway_port}", token_env=None)
        ext_host = GrpcAgentRuntime(f"127.0.0.1:{gateway_port}", token_env=None)
        counter = Counter()

        def factory(agent_id: AgentId, runtime: Any) -> BenchAgent:
            agent = BenchAgent(agent_id, runtime)
            agent.counter = counter
            return agent

        async with ext_caller, ext_host:
            await ext_host.register_agent_factory("bench", factory)
            await ext_host.register_agent_factory("fanout", factory)
            target = AgentId("bench", "one")
            for i in range(BROADCAST_FANOUT):
                await ext_caller.send_and_await_response(StringValue(value="wake"), AgentId("fanout", str(i)))

            async def ext_rpc() -> None:
                await ext_caller.send_and_await_response(StringValue(value="ping"), target, 10)

            async def raw_rpc() -> None:
                await caller.rpc("ping")

            for case, concurrency in (("rpc sequential", 1), ("rpc 32 concurrent", 32)):
                if case not in cases:
                    continue
                paired = await interleaved(raw_rpc, ext_rpc, rounds, iterations // rounds, warmup, concurrency, servers)
                rows += [Row(case, paired.raw), Row(case, paired.ext, baseline=paired.raw)]
                pairs.append((case, paired))

            async def raw_one_way() -> None:
                await batch(lambda: caller.one_way(b"O", "note"), host, ONE_WAY_BATCH, ONE_WAY_BATCH)

            async def ext_one_way() -> None:
                await batch(
                    lambda: ext_caller.send_message(StringValue(value="note"), target),
                    counter,
                    ONE_WAY_BATCH,
                    ONE_WAY_BATCH,
                )

            async def raw_broadcast() -> None:
                expect = BROADCAST_BATCH * BROADCAST_FANOUT
                await batch(lambda: caller.one_way(b"B", "all"), host, BROADCAST_BATCH, expect)

            async def ext_broadcast() -> None:
                expect = BROADCAST_BATCH * BROADCAST_FANOUT
                await batch(
                    lambda: ext_caller.broadcast(StringValue(value="all"), "fanout"), counter, BROADCAST_BATCH, expect
                )

            batches = max(2, iterations // 400)
            for case, per_batch, raw_fn, ext_fn in (
                ("one-way msgs", ONE_WAY_BATCH, raw_one_way, ext_one_way),
                ("broadcast x10", BROADCAST_BATCH * BROADCAST_FANOUT, raw_broadcast, ext_broadcast),
            ):
                if case not in cases:
                    continue
                paired = await interleaved(raw_fn, ext_fn, rounds, batches, 1, 1, servers)
                extra.append((case, paired.raw.ops_per_s * per_batch, paired.ext.ops_per_s * per_batch))
        await channel_a.close(None)
        await channel_b.close(None)
    finally:
        relay.kill()
        gateway.kill()
        relay.wait(10)
        gateway.wait(10)

    if rows:
        print_table(rows)
        print()
        print(f"{'case':<18} {'relay CPU µs/op':>16} {'gateway CPU µs/op':>18} {'per-round p50 ratios':>30}")
        for case, paired in pairs:
            ratios = paired.p50_ratios
            spread = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            print(f"{case:<18} {paired.relay_cpu_us:>16.0f} {paired.gateway_cpu_us:>18.0f} {spread:>30}")
        print()
    if extra:
        print(f"{'case':<18} {'raw /s':>12} {'ext /s':>12} {'ext/raw':>8}")
        for case, raw_rate, ext_rate in extra:
            print(f"{case:<18} {raw_rate:>12,.0f} {ext_rate:>12,.0f} {ext_rate / raw_rate:>7.2f}x")
        print()
    for case, paired in pairs:
        raw_r, ext_r = paired.raw, paired.ext
        print(
            f"{case}: p50 ratio {ext_r.p50_ms / raw_r.p50_ms:.2f}x (median per round "
            f"{statistics.median(paired.p50_ratios):.2f}x), throughput {ext_r.ops_per_s / raw_r.ops_per_s:.0%} of raw"
        )


PHASE_REPEATS = 3
PHASE_CASES = ("rpc sequential", "one-way msgs", "broadcast x10")


async def marked_phases(count: int) -> None:
    """`count` operations of each case as a phase of its own, `PHASE_REPEATS` times, the gateway in this process:
    `os.getppid()` marks the boundaries, which `valgrind --tool=callgrind --dump-before=getppid` turns into one
    profile dump per phase."""
    gateway = Gateway(port=0, shutdown_grace=0)
    port = await gateway.start()
    caller = GrpcAgentRuntime(f"127.0.0.1:{port}", token_env=None, connect_timeout=60)
    host = GrpcAgentRuntime(f"127.0.0.1:{port}", token_env=None, connect_timeout=60)
    counter = Counter()

    def factory(agent_id: AgentId, runtime: Any) -> BenchAgent:
        agent = BenchAgent(agent_id, runtime)
        agent.counter = counter
        return agent

    order: list[str] = []
    try:
        async with caller, host:
            await host.register_agent_factory("bench", factory)
            await host.register_agent_factory("fanout", factory)
            target = AgentId("bench", "one")
            for i in range(BROADCAST_FANOUT):
                await caller.send_and_await_response(StringValue(value="wake"), AgentId("fanout", str(i)), 60)

            async def rpcs(n: int) -> None:
                for _ in range(n):
                    await caller.send_and_await_response(StringValue(value="ping"), target, 60)

            async def one_way(n: int) -> None:
                await batch(lambda: caller.send_message(StringValue(value="note"), target), counter, n, n)

            async def broadcasts(n: int) -> None:
                send = lambda: caller.broadcast(StringValue(value="all"), "fanout")  # noqa: E731
                await batch(send, counter, n, n * BROADCAST_FANOUT)

            cases: dict[str, Callable[[int], Awaitable[None]]] = dict(
                zip(PHASE_CASES, (rpcs, one_way, broadcasts), strict=True)
            )
            for run_case in cases.values():
                await run_case(20)
            for _ in range(PHASE_REPEATS):
                for name, run_case in cases.items():
                    os.getppid()
                    order.append(name)
                    await run_case(count)
            os.getppid()
    finally:
        await gateway.stop(grace=0)
    print("PHASES", "|".join(order), flush=True)


def instructions(count: int) -> None:
    """Instructions per operation of each case (the least of its phases), from a callgrind run of `marked_phases`."""
    per_op = callgrind_per_op(SCRIPT, ["--phases", "--iterations", str(count)], count)
    print(
        f"{'case':<18} {'instructions/op':>16}   (gateway and workers in one process; min of {PHASE_REPEATS} x {count})"
    )
    for name, value in per_op.items():
        print(f"{name:<18} {value / 1e3:>15,.0f}k")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=16, help="alternating raw/ext rounds (default 16)")
    parser.add_argument(
        "--case",
        action="append",
        choices=CASES,
        dest="cases",
        help="run only this case (repeatable; default: all)",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="instead: ext's instructions per operation under valgrind (--iterations per phase, default 200)",
    )
    parser.add_argument("--relay", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.relay:
        asyncio.run(serve_relay())
        return 0
    if args.phases:
        asyncio.run(marked_phases(args.iterations))
        return 0
    if args.callgrind:
        instructions(args.iterations if args.iterations != parser.get_default("iterations") else 200)
        return 0
    asyncio.run(run(args.iterations, args.rounds, args.cases or CASES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
