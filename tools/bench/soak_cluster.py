"""Soak: sustained one-way messages and RPCs across gateway replicas for minutes, with memory per process.

Run: ``hatch run ext-runtime-grpc:python tools/bench/soak_cluster.py --minutes 3`` (needs ``redis-server``).

Topology: a throwaway ``redis-server``; ``--replicas`` gateway processes sharing it (``--lease-seconds 2``);
``--workers`` worker processes (``ext.runtime.grpc.testing.LoadWorkerProcess``), spread round-robin over the
replicas and each given every address, all hosting agent type ``seq`` and all sending. Every worker sends
``--batch`` sequence-numbered one-way messages to each of ``--agents`` agents per round (every
``--rpc-every``-th also an RPC whose answer is checked); a round ends when every message has arrived. Rendezvous
placement spreads the agents over the workers, so most streams cross replicas through Redis.

Prints one line per sample (``--samples`` over the run): elapsed time, messages so far, messages/s since the
previous sample, and the RSS of every process (VmRSS, MiB); then the RSS growth of each process from the first
sample (taken after a warm-up round) to the last, and the totals: messages sent and received, missing,
duplicates, out of order, RPCs answered, wrong, failed. Exit status 1 if anything was lost, duplicated,
reordered, answered wrongly, or any process grew by more than ``--rss-tolerance-mib``.

The machine this ran on has 2 cores: the replicas, the workers, Redis and this script share them, so msgs/s is
what this box sustains, not what the cluster scales to (see bench_cluster.py for that).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from typing import Any

from ext.core import AgentId
from ext.runtime.grpc.testing import (
    GatewayProcess,
    LoadWorkerProcess,
    merge_sender_reports,
    rss_kb,
    start_gateway_process,
    wait_delivered,
)
from ext.testing.redis import start_redis_server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="how long to run (default 3)")
    parser.add_argument("--seconds", type=float, default=None, help="how long to run, in seconds (overrides --minutes)")
    parser.add_argument("--replicas", type=int, default=2, help="gateway processes (default 2)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--agents", type=int, default=8, help="agents every worker sends to (default 8)")
    parser.add_argument("--batch", type=int, default=640, help="messages per stream per round (default 640)")
    parser.add_argument("--rpc-every", type=int, default=10, help="every Nth message is also an RPC (default 10)")
    parser.add_argument("--samples", type=int, default=7, help="RSS samples over the run (default 7)")
    parser.add_argument("--round-timeout", type=float, default=120.0, help="cap on one round (default 120 s)")
    parser.add_argument("--rss-tolerance-mib", type=float, default=8.0, help="allowed growth per process (default 8)")
    return parser


async def soak(args: argparse.Namespace) -> int:
    duration = args.seconds if args.seconds is not None else args.minutes * 60
    redis = start_redis_server()
    prefix = f"soak-{uuid.uuid4().hex[:8]}"
    gateways: list[GatewayProcess] = []
    workers: list[LoadWorkerProcess] = []
    try:
        for _ in range(args.replicas):
            gateways.append(
                start_gateway_process("--redis-url", redis.url, "--redis-prefix", prefix, "--lease-seconds", "2")
            )
        addresses = [g.address for g in gateways]
        for index in range(args.workers):
            first = index % len(addresses)
            order = addresses[first:] + addresses[:first]
            workers.append(await LoadWorkerProcess.start(f"w{index}", order, host_types=["seq"]))
        targets = [AgentId("seq", f"k{i}") for i in range(args.agents)]
        processes = {f"gw{i}": g.process.pid for i, g in enumerate(gateways)} | {w.name: w.pid for w in workers}
        processes["redis"] = redis.process.pid
        print(
            f"# {os.cpu_count()} cores; {args.replicas} gateways, {args.workers} workers, {args.agents} agents; "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {duration:g} s",
            flush=True,
        )

        async def round_() -> dict[str, Any]:
            reports = await asyncio.gather(
                *(w.send(targets, args.batch, rpc_every=args.rpc_every, timeout=args.round_timeout) for w in workers)
            )
            merged = merge_sender_reports(reports)
            await wait_delivered(workers, merged["sent"], timeout=args.round_timeout)
            return merged

        await round_()  # warm-up: not counted
        names = list(processes)
        header = f"{'t s':>7} {'msgs':>10} {'msgs/s':>8} " + " ".join(f"{n:>7}" for n in names)
        print(header)
        print("-" * len(header))
        first_rss = {n: rss_kb(pid) for n, pid in processes.items()}
        last_rss = first_rss
        started = last_t = time.monotonic()
        messages = last_messages = 0
        per_round = args.workers * args.agents * args.batch

        def sample() -> None:
            nonlocal last_t, last_messages, last_rss
            now = time.monotonic()
            rate = (messages - last_messages) / (now - last_t) if now > last_t else 0.0
            last_rss = {n: rss_kb(pid) for n, pid in processes.items()}
            cells = " ".join(f"{last_rss[n] / 1024:7.1f}" for n in names)
            print(f"{now - started:7.1f} {messages:10,} {rate:8,.0f} {cells}", flush=True)
            last_t, last_messages = now, messages

        sample()
        every = duration / max(1, args.samples - 1)
        next_sample = started + every
        while time.monotonic() - started < duration:
            await round_()
            messages += per_round
            if time.monotonic() >= next_sample:
                sample()
                next_sample += every
        if last_messages != messages:
            sample()

        final = merge_sender_reports([(await w.report())["sender"] for w in workers])
        sent: dict[str, int] = final["sent"]
        tally = await wait_delivered(workers, sent, timeout=args.round_timeout)
        problems = tally.problems(sent)
        missing = sum(len(t.missing(sent.get(k, 0))) for k, t in tally.streams.items())
        duplicates = sum(t.duplicates for t in tally.streams.values())
        out_of_order = sum(t.out_of_order for t in tally.streams.values())
        rpc_failed = sum(final["rpc_errors"].values())
        print()
        print("RSS growth from the first sample (after warm-up) to the last, MiB:")
        growth = {n: (last_rss[n] - first_rss[n]) / 1024 for n in names}
        print("  " + "  ".join(f"{n} {g:+.2f}" for n, g in growth.items()))
        print(
            f"messages sent {sum(sent.values()):,}, received {tally.received:,}, missing {missing}, "
            f"duplicates {duplicates}, out of order {out_of_order}; RPCs answered {final['rpc_ok']:,}, "
            f"wrong {len(final['rpc_wrong'])}, failed {rpc_failed}"
        )
        for line in problems[:20]:
            print("  " + line)
        grew = {n: g for n, g in growth.items() if n != "redis" and g > args.rss_tolerance_mib}
        if grew:
            print(f"grew by more than {args.rss_tolerance_mib:g} MiB: {grew}")
        bad = problems or rpc_failed or final["rpc_wrong"] or grew
        print("FAIL" if bad else "OK")
        return 1 if bad else 0
    finally:
        for w in workers:
            await w.stop()
        for g in gateways:
            g.kill()
        redis.stop()


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(soak(_parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
