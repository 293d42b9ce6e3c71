"""AutoGen workers through AutoGen's own host and through ext's gateway (issue 30), in the same run.

Run: ``hatch run ext-runtime-grpc:python tools/bench/bench_autogen.py`` (about two minutes; ``--quick`` runs in
seconds and is what ``tools/tests/bench/test_bench_autogen.py`` runs; ``--json PATH`` also writes the figures).

Two hubs, each a process: AutoGen 0.7.5's ``GrpcWorkerAgentRuntimeHost`` and ext's gateway (``python -m
ext.runtime.grpc gateway --autogen-listen``). On each, two real AutoGen worker processes (the ``autogen`` hatch
environment's python, ``tests-autogen/autogen_side/autogen_peer.py``): a callee hosting ``bench_echo`` (subscribed
to topic type ``bench``) and a caller. The caller times each RPC itself; publish throughput is timed here, from
the command that starts a burst to the callee's report that it handled the last message. Rounds alternate the hub
order, so load from elsewhere falls on both alike.

- ``rpc``: sequential Ping -> Pong RPCs from the caller to one agent (p50 / p99 over all rounds).
- ``publish``: a burst of Notes published to a topic the callee's type subscribes to (messages/s, the median
  round).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from _harness import percentile

ROOT = Path(__file__).resolve().parents[2]
# The AutoGen-side scripts and the process driver live with the AutoGen interop tests.
sys.path.append(str(ROOT / "packages" / "ext-runtime-grpc" / "tests-autogen"))

from autogen_support import AUTOGEN_HOST, AUTOGEN_PEER, Peer, find_autogen_python, free_port  # noqa: E402

from ext.runtime.grpc.testing import GatewayProcess, start_gateway_process  # noqa: E402

HUBS = ("autogen host", "ext gateway")
HEADER = f"{'hub':<14} {'rpc p50 ms':>11} {'rpc p99 ms':>11} {'rpcs':>6} {'publish msg/s':>14} {'published':>10}"


@dataclass(frozen=True)
class Settings:
    rounds: int = 10
    rpcs: int = 300  # sequential RPCs per hub per round
    publishes: int = 2000  # messages per hub per round
    warmup: int = 50


QUICK = Settings(rounds=2, rpcs=20, publishes=50, warmup=5)


@dataclass
class HubFigures:
    hub: str
    rpc_p50_ms: float
    rpc_p99_ms: float
    rpcs: int
    publish_per_s: float
    published: int


class Hub:
    """One hub with its two AutoGen workers."""

    def __init__(self, name: str, address: str, callee: Peer, caller: Peer) -> None:
        self.name = name
        self.address = address
        self.callee = callee
        self.caller = caller
        self.latencies: list[float] = []
        self.rates: list[float] = []
        self.published = 0

    async def rpcs(self, n: int, record: bool = True) -> None:
        reply = await self.caller.reply(self.caller.command(op="rpc_burst", target=["bench_echo", "k"], n=n))
        assert reply["ok"] and len(reply["latencies"]) == n, reply
        if record:
            self.latencies.extend(reply["latencies"])

    async def publish(self, n: int, record: bool = True) -> None:
        assert (await self.callee.reply(self.callee.command(op="expect_notes", n=n)))["ok"]
        started = time.perf_counter()
        sent = self.caller.command(op="publish_burst", topic=["bench", "src"], n=n)
        await self.callee.wait_event("notes_done")
        elapsed = time.perf_counter() - started
        assert (await self.caller.reply(sent))["ok"]
        if record:
            self.rates.append(n / elapsed)
            self.published += n

    def figures(self) -> HubFigures:
        return HubFigures(
            self.name,
            percentile(self.latencies, 50) * 1000,
            percentile(self.latencies, 99) * 1000,
            len(self.latencies),
            statistics.median(self.rates),
            self.published,
        )


async def run(settings: Settings) -> list[HubFigures]:
    python = find_autogen_python()
    host_port = free_port()
    autogen_host = await Peer.start(python, AUTOGEN_HOST, str(host_port), name="autogen host")
    gateway: GatewayProcess | None = None
    peers: list[Peer] = [autogen_host]
    try:
        gateway = start_gateway_process("--autogen-listen", "127.0.0.1:0")
        assert gateway.process.stdout is not None
        ext_address = gateway.process.stdout.readline().strip().removeprefix("autogen ")
        hubs: list[Hub] = []
        for name, address in zip(HUBS, (f"127.0.0.1:{host_port}", ext_address), strict=True):
            args = ("--host-type", "bench_echo", "--subscribe", "bench")
            callee = await Peer.start(python, AUTOGEN_PEER, address, *args, name=f"{name} callee")
            peers.append(callee)
            caller = await Peer.start(python, AUTOGEN_PEER, address, name=f"{name} caller")
            peers.append(caller)
            hubs.append(Hub(name, address, callee, caller))
        for hub in hubs:
            await hub.rpcs(settings.warmup, record=False)
            await hub.publish(settings.warmup, record=False)
        for round_no in range(settings.rounds):
            order = hubs if round_no % 2 == 0 else hubs[::-1]
            for hub in order:
                await hub.rpcs(settings.rpcs)
            for hub in order:
                await hub.publish(settings.publishes)
        return [hub.figures() for hub in hubs]
    finally:
        await asyncio.gather(*(peer.close() for peer in peers[1:]))
        await autogen_host.close()
        if gateway is not None:
            gateway.kill()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few messages per hub: a smoke run, not figures")
    parser.add_argument("--rounds", type=int, default=Settings.rounds)
    parser.add_argument("--rpcs", type=int, default=Settings.rpcs, help="sequential RPCs per hub per round")
    parser.add_argument("--publishes", type=int, default=Settings.publishes, help="messages per hub per round")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    for name in ("rounds", "rpcs", "publishes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    settings = QUICK if args.quick else Settings(args.rounds, args.rpcs, args.publishes)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores; load average at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"settings: {settings}")
    figures = asyncio.run(run(settings))
    print(HEADER)
    for f in figures:
        print(
            f"{f.hub:<14} {f.rpc_p50_ms:>11.2f} {f.rpc_p99_ms:>11.2f} {f.rpcs:>6} "
            f"{f.publish_per_s:>14.0f} {f.published:>10}"
        )
    base, ours = figures
    print(
        f"ext gateway / autogen host: rpc p50 {ours.rpc_p50_ms / base.rpc_p50_ms:.2f}x, "
        f"publish throughput {ours.publish_per_s / base.publish_per_s:.2f}x"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": asdict(settings), "rows": [asdict(f) for f in figures]}))
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
