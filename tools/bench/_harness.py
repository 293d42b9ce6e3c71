"""Dependency-free async benchmark harness for comparing ext with raw SDKs in one run.

Works on Python 3.10-3.13 (stdlib only). Typical use::

    raw = await measure("raw", call_sdk, iterations=2000, warmup=200)
    ours = await measure("ext", call_ext, iterations=2000, warmup=200)
    print_table([Row("chat", raw), Row("chat", ours, baseline=raw)])

Latency is wall time per op (``perf_counter_ns``); CPU is process CPU time over the
whole timed run divided by ops, so work done in SDK threads is counted too.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "Result",
    "Ratios",
    "Row",
    "StreamResult",
    "compare",
    "cpu_seconds",
    "format_table",
    "import_time",
    "measure",
    "measure_interleaved",
    "machine_cpu_seconds",
    "measure_stream",
    "percentile",
    "print_table",
    "rss_bytes",
]


def percentile(data: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between closest ranks.

    Same definition as numpy's default, so p50 equals the median.
    """
    if not data:
        raise ValueError("percentile of empty data")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    ordered = sorted(data)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median_ci(data: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median: the order statistics ``x(j)`` and
    ``x(n+1-j)`` (1-based) with the largest ``j`` whose binomial coverage is at least ``confidence``. With too
    few values for any such ``j`` (fewer than 6 at 95 %), the whole range."""
    if not data:
        raise ValueError("median_ci of empty data")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    ordered = sorted(data)
    n = len(ordered)
    tail = 0.0  # P(Binomial(n, 1/2) <= j - 1)
    j = 0
    while j < n // 2:
        tail_next = tail + math.comb(n, j) / 2**n
        if 2 * tail_next > 1 - confidence:
            break
        tail = tail_next
        j += 1
    if j == 0:
        return ordered[0], ordered[-1]
    return ordered[j - 1], ordered[n - j]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time another process has used so far (Linux /proc; NaN elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return math.nan


def rss_bytes(pid: int) -> int:
    """Resident set size (VmRSS) of a process, in bytes (Linux /proc; -1 elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return -1


def machine_cpu_seconds() -> float:
    """Non-idle CPU time of the whole machine so far, every core summed (Linux /proc/stat; NaN elsewhere)."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(x) for x in stat.readline().split()[1:9]]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
    except (OSError, ValueError, IndexError):
        return math.nan


@dataclass(frozen=True)
class Result:
    """Timings of one implementation; latencies are per op in nanoseconds."""

    name: str
    latencies_ns: tuple[int, ...]
    wall_ns: int
    cpu_ns: int
    concurrency: int = 1

    @property
    def ops(self) -> int:
        return len(self.latencies_ns)

    @property
    def p50_ms(self) -> float:
        return percentile(self.latencies_ns, 50) / 1e6

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_ns, 99) / 1e6

    @property
    def ops_per_s(self) -> float:
        return self.ops / (self.wall_ns / 1e9) if self.wall_ns > 0 else math.inf

    @property
    def cpu_us_per_op(self) -> float:
        return self.cpu_ns / self.ops / 1e3 if self.ops else 0.0


@dataclass(frozen=True)
class Ratios:
    """``ours / raw`` for each metric: >1 means ours is slower (latency, CPU) or faster (ops/s)."""

    p50: float
    p99: float
    ops_per_s: float
    cpu: float


def _ratio(ours: float, raw: float) -> float:
    if raw == 0:
        return 1.0 if ours == 0 else math.inf
    return ours / raw


def compare(raw: Result, ours: Result) -> Ratios:
    return Ratios(
        p50=_ratio(ours.p50_ms, raw.p50_ms),
        p99=_ratio(ours.p99_ms, raw.p99_ms),
        ops_per_s=_ratio(ours.ops_per_s, raw.ops_per_s),
        cpu=_ratio(ours.cpu_us_per_op, raw.cpu_us_per_op),
    )


async def _drive(fn: Callable[[], Awaitable[Any]], count: int, concurrency: int) -> list[int]:
    """Run ``fn`` ``count`` times over ``concurrency`` workers; per-op wall times in ns."""
    latencies: list[int] = []
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        # Workers claim ops from a shared counter, so the total is exact for any split.
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter_ns()
            await fn()
            latencies.append(time.perf_counter_ns() - start)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, count)))))
    return latencies


async def measure(
    name: str,
    fn: Callable[[], Awaitable[Any]],
    *,
    iterations: int,
    warmup: int = 0,
    concurrency: int = 1,
) -> Result:
    """Time ``iterations`` awaits of ``fn()`` after ``warmup`` untimed ones."""
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if warmup:
        await _drive(fn, warmup, concurrency)
    # Start each implementation with the same heap state so one does not pay
    # for the other's garbage.
    gc.collect()
    cpu0 = time.process_time_ns()
    wall0 = time.perf_counter_ns()
    latencies = await _drive(fn, iterations, concurrency)
    wall = time.perf_counter_ns() - wall0
    cpu = time.process_time_ns() - cpu0
    return Result(name, tuple(latencies), wall, cpu, concurrency)


async def measure_interleaved(
    sides: Sequence[tuple[str, Callable[[], Awaitable[Any]]]],
    *,
    blocks: int,
    block: int,
    warmup: int = 0,
    concurrency: int = 1,
) -> tuple[list[Result], list[list[float]]]:
    """Time the sides in short interleaved blocks: ``blocks`` times, each side runs ``block`` ops (the order
    rotating from block to block). Returns one Result per side (all its ops) and, per side, the CPU time of
    each of its blocks divided by the first side's block next to it.

    On a shared or virtual machine the speed of the whole process drifts by 10-20 % over seconds (other
    tenants, frequency, cache state). Sides measured one after the other in long runs each see a different
    part of that drift; blocks of a few dozen ops a side, alternating, see the same conditions, so their
    ratio is steady to about 1 % where whole runs disagree by 5-10 %.
    """
    if blocks < 1 or block < 1:
        raise ValueError("blocks and block must be >= 1")
    n = len(sides)
    for _, fn in sides:
        if warmup:
            await _drive(fn, warmup, concurrency)
    latencies: list[list[int]] = [[] for _ in sides]
    walls = [0] * n
    cpus: list[list[int]] = [[] for _ in sides]
    gc.collect()
    for b in range(blocks):
        for k in range(n):
            i = (k + b) % n
            cpu0 = time.process_time_ns()
            wall0 = time.perf_counter_ns()
            latencies[i] += await _drive(sides[i][1], block, concurrency)
            walls[i] += time.perf_counter_ns() - wall0
            cpus[i].append(time.process_time_ns() - cpu0)
    results = [
        Result(name, tuple(latencies[i]), walls[i], sum(cpus[i]), concurrency) for i, (name, _) in enumerate(sides)
    ]
    ratios = [[c / base if base else math.inf for c, base in zip(cpus[i], cpus[0], strict=True)] for i in range(n)]
    return results, ratios


def callgrind_phase_totals(script: str, argv: Sequence[str]) -> tuple[list[str], list[int]]:
    """Run ``script`` with ``argv`` (a marking mode of a bench) under ``valgrind --tool=callgrind``: the phase
    names it prints (``PHASES a|b|...``) and the instruction total of each phase.

    The script marks each phase boundary with ``os.getppid()``, which ``--dump-before=getppid`` turns into one
    profile dump per phase. Child processes (the loopback servers) are not traced. Instruction counts do not
    drift with the machine's load, so they show what a change costs where wall and CPU time cannot."""
    import re
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=getppid",
                f"--callgrind-out-file={tmp}/cg.%p",
                sys.executable,
                script,
                *argv,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        order = out.split("PHASES ", 1)[1].strip().split("|")
        dumps = sorted(Path(tmp).glob("cg.*.*"), key=lambda f: int(f.name.rsplit(".", 1)[1]))
        totals = [
            int(m.group(1)) for f in dumps if (m := re.search(r"^(?:totals|summary): (\d+)", f.read_text(), re.M))
        ]
    # Dump 1 is everything before the first mark; then one per phase.
    return order, totals[1 : 1 + len(order)]


def callgrind_per_op(script: str, argv: Sequence[str], ops: int) -> dict[str, float]:
    """Instructions per op of each phase name (the least over its repeats), from `callgrind_phase_totals`
    for a marking mode that runs ``ops`` ops a phase."""
    per_op: dict[str, float] = {}
    for name, total in zip(*callgrind_phase_totals(script, argv), strict=True):
        per_op[name] = min(per_op.get(name, math.inf), total / ops)
    return per_op


@dataclass(frozen=True)
class StreamResult:
    """Per-run time to first item and item throughput of a stream."""

    name: str
    ttfi_ns: tuple[int, ...]
    items_per_s: tuple[float, ...]
    items: int

    @property
    def ttfi_ms(self) -> float:
        return statistics.median(self.ttfi_ns) / 1e6

    @property
    def median_items_per_s(self) -> float:
        return statistics.median(self.items_per_s)


async def measure_stream(
    name: str,
    open_stream: Callable[[], AsyncIterable[Any]],
    *,
    runs: int,
    warmup: int = 0,
) -> StreamResult:
    """Consume ``open_stream()`` fully ``runs`` times; ``items`` is the last run's count.

    Throughput counts items after the first over the time since the first, so
    connection/setup latency shows up only in time-to-first-item.
    """
    if runs < 1:
        raise ValueError("runs must be >= 1")
    ttfi: list[int] = []
    rates: list[float] = []
    count = 0
    for i in range(warmup + runs):
        start = time.perf_counter_ns()
        first = 0
        count = 0
        async for _ in open_stream():
            if count == 0:
                first = time.perf_counter_ns()
            count += 1
        end = time.perf_counter_ns()
        if i < warmup:
            continue
        if count == 0:
            raise ValueError(f"stream {name!r} yielded no items")
        ttfi.append(first - start)
        span = end - first
        rates.append((count - 1) / (span / 1e9) if count > 1 and span > 0 else 0.0)
    return StreamResult(name, tuple(ttfi), tuple(rates), count)


_IMPORT_CODE = (
    "import importlib, sys, time\n"
    "for name in sys.argv[2:]:\n"
    "    importlib.import_module(name)\n"
    "t = time.perf_counter_ns()\n"
    "importlib.import_module(sys.argv[1])\n"
    "print(time.perf_counter_ns() - t)\n"
)


def _import_env() -> dict[str, str]:
    # What a user has: pip writes bytecode at install and Python caches it on first import. With
    # PYTHONDONTWRITEBYTECODE set (as in some containers), every run would compile every module from source
    # and the timing would measure the compiler, not the import.
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def import_time(module: str, runs: int = 5, *, python: str = sys.executable, after: Sequence[str] = ()) -> float:
    """Median seconds to ``import module`` in a fresh interpreter, with bytecode caches warm (one untimed run
    writes them first). With ``after``, those modules are imported first and not timed: what ``module`` adds
    on top of them (e.g. ext's client on top of the SDK it wraps)."""
    # Module names travel in argv, never in the code string.
    argv = [python, "-c", _IMPORT_CODE, module, *after]
    env = _import_env()
    samples: list[int] = []
    for i in range(runs + 1):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"importing {module!r} failed: {proc.stderr.strip()[-500:]}")
        if i:  # the first run only writes the caches
            samples.append(int(proc.stdout.strip().splitlines()[-1]))
    return statistics.median(samples) / 1e9


@dataclass(frozen=True)
class Row:
    """One table line; pass the raw SDK's Result as ``baseline`` to fill the ratio column."""

    case: str
    result: Result
    baseline: Result | None = None


_COLUMNS = (
    ("case", 18, "<"),
    ("impl", 12, "<"),
    ("p50 ms", 10, ">"),
    ("p99 ms", 10, ">"),
    ("ops/s", 12, ">"),
    ("CPU µs/op", 11, ">"),
    ("ratio vs raw", 13, ">"),
)


def _cell(text: str, width: int, align: str) -> str:
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{text:{align}{width}}"


def format_table(rows: Sequence[Row]) -> str:
    """Fixed-width table; the ratio is ``p50(ours) / p50(raw)``, so 1.10x = 10 % slower."""
    lines = [" ".join(_cell(h, w, a) for h, w, a in _COLUMNS)]
    lines.append(" ".join("-" * w for _, w, _ in _COLUMNS))
    for row in rows:
        r = row.result
        ratio = f"{compare(row.baseline, r).p50:.2f}x" if row.baseline is not None else "-"
        values = (
            row.case,
            r.name,
            f"{r.p50_ms:.4f}",
            f"{r.p99_ms:.4f}",
            f"{r.ops_per_s:,.0f}",
            f"{r.cpu_us_per_op:.2f}",
            ratio,
        )
        lines.append(" ".join(_cell(v, w, a) for v, (_, w, a) in zip(values, _COLUMNS, strict=True)))
    return "\n".join(lines)


def print_table(rows: Sequence[Row], file: IO[str] | None = None) -> None:
    print(format_table(rows), file=file if file is not None else sys.stdout)
