from __future__ import annotations

import asyncio
import io
import math
import os
import random
import statistics
import sys
from collections.abc import AsyncIterator

import example_bench
import pytest
from _harness import (
    Result,
    Row,
    compare,
    cpu_seconds,
    format_table,
    import_time,
    machine_cpu_seconds,
    measure,
    measure_stream,
    median_ci,
    percentile,
    print_table,
    rss_bytes,
)

ONE_TO_HUNDRED = [float(i) for i in range(1, 101)]


def test_percentile_known_values() -> None:
    assert percentile(ONE_TO_HUNDRED, 50) == 50.5
    assert percentile(ONE_TO_HUNDRED, 99) == pytest.approx(99.01)
    assert percentile(ONE_TO_HUNDRED, 0) == 1.0
    assert percentile(ONE_TO_HUNDRED, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0  # input order does not matter
    assert percentile([7.0], 99) == 7.0
    assert percentile([10.0, 20.0], 25) == 12.5


def test_median_ci_known_ranks() -> None:
    # The classic distribution-free 95 % intervals: ranks 6 and 15 of 20, 40 and 61 of 100.
    assert median_ci([float(i) for i in range(1, 21)]) == (6.0, 15.0)
    assert median_ci([float(i) for i in range(100, 0, -1)]) == (40.0, 61.0)  # input order does not matter
    assert median_ci([float(i) for i in range(1, 101)], confidence=0.5) == (47.0, 54.0)
    assert median_ci([float(i) for i in range(1, 7)]) == (1.0, 6.0)  # n = 6: j = 1 already covers 96.9 %
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few values: the whole range


def test_median_ci_covers_the_median_at_the_stated_rate() -> None:
    # Coverage check by simulation: samples from a skewed distribution whose median is known (ln 2 for the
    # exponential with rate 1); a 90 % interval must contain it in about 90 % of 2000 samples (at least 90 %:
    # the order-statistic interval is conservative, so never far below).
    rng = random.Random(7)
    hits = sum(
        lo <= math.log(2) <= hi
        for lo, hi in (median_ci([rng.expovariate(1.0) for _ in range(40)], 0.9) for _ in range(2000))
    )
    assert 0.88 <= hits / 2000 <= 0.96


@pytest.mark.parametrize(("data", "confidence"), [([], 0.95), ([1.0], 0.0), ([1.0], 1.0)])
def test_median_ci_rejects_bad_input(data: list[float], confidence: float) -> None:
    with pytest.raises(ValueError):
        median_ci(data, confidence)


def test_p50_is_the_median() -> None:
    rng = random.Random(1234)
    for n in (1, 2, 7, 100, 1001):
        data = [rng.random() for _ in range(n)]
        assert percentile(data, 50) == pytest.approx(statistics.median(data))


@pytest.mark.parametrize(("data", "q"), [([], 50), ([1.0], -1), ([1.0], 100.5)])
def test_percentile_rejects_bad_input(data: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        percentile(data, q)


def _result(name: str, latencies_ms: list[float], wall_s: float, cpu_ms: float) -> Result:
    return Result(
        name=name,
        latencies_ns=tuple(int(ms * 1e6) for ms in latencies_ms),
        wall_ns=int(wall_s * 1e9),
        cpu_ns=int(cpu_ms * 1e6),
    )


def test_result_statistics() -> None:
    r = _result("raw", [float(i) for i in range(1, 101)], wall_s=2.0, cpu_ms=50.0)
    assert r.ops == 100
    assert r.p50_ms == pytest.approx(50.5)
    assert r.p99_ms == pytest.approx(99.01)
    assert r.ops_per_s == pytest.approx(50.0)
    assert r.cpu_us_per_op == pytest.approx(500.0)


def test_compare_ratios() -> None:
    raw = _result("raw", [1.0, 2.0, 3.0], wall_s=1.0, cpu_ms=3.0)
    ours = _result("ext", [2.0, 4.0, 6.0], wall_s=2.0, cpu_ms=9.0)
    ratios = compare(raw, ours)
    assert ratios.p50 == pytest.approx(2.0)
    assert ratios.p99 == pytest.approx(2.0)
    assert ratios.ops_per_s == pytest.approx(0.5)
    assert ratios.cpu == pytest.approx(3.0)
    zero = _result("raw", [1.0], wall_s=1.0, cpu_ms=0.0)
    assert compare(zero, zero).cpu == 1.0
    assert math.isinf(compare(zero, ours).cpu)


def test_format_table() -> None:
    raw = _result("raw", [1.0, 1.0, 1.0], wall_s=0.003, cpu_ms=0.3)
    ours = _result("ext", [1.5, 1.5, 1.5], wall_s=0.0045, cpu_ms=0.6)
    text = format_table([Row("chat", raw), Row("chat", ours, baseline=raw)])
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[0].split() == ["case", "impl", "p50", "ms", "p99", "ms", "ops/s", "CPU", "µs/op", "ratio", "vs", "raw"]
    assert len({len(line) for line in lines}) == 1  # fixed width
    assert lines[2].split() == ["chat", "raw", "1.0000", "1.0000", "1,000", "100.00", "-"]
    assert lines[3].split() == ["chat", "ext", "1.5000", "1.5000", "667", "200.00", "1.50x"]
    buf = io.StringIO()
    print_table([Row("chat", raw)], file=buf)
    assert buf.getvalue() == format_table([Row("chat", raw)]) + "\n"


def test_measure_counts_and_concurrency() -> None:
    calls = 0
    in_flight = 0
    peak = 0

    async def op() -> None:
        nonlocal calls, in_flight, peak
        calls += 1
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1

    result = asyncio.run(measure("x", op, iterations=50, warmup=7, concurrency=4))
    assert calls == 57
    assert result.ops == 50
    assert result.concurrency == 4
    assert peak == 4
    assert all(lat > 0 for lat in result.latencies_ns)
    assert result.wall_ns >= max(result.latencies_ns)
    assert result.cpu_ns >= 0


def test_measure_latency_reflects_work() -> None:
    async def slow() -> None:
        await asyncio.sleep(0.005)

    result = asyncio.run(measure("slow", slow, iterations=5))
    assert result.p50_ms >= 4.0
    assert result.ops_per_s < 250


@pytest.mark.parametrize(("iterations", "concurrency"), [(0, 1), (1, 0)])
def test_measure_rejects_bad_arguments(iterations: int, concurrency: int) -> None:
    async def op() -> None:
        return None

    with pytest.raises(ValueError):
        asyncio.run(measure("x", op, iterations=iterations, concurrency=concurrency))


async def _items(n: int, delay_first: float = 0.0) -> AsyncIterator[int]:
    if delay_first:
        await asyncio.sleep(delay_first)
    for i in range(n):
        yield i


def test_measure_stream() -> None:
    opened = 0

    def open_stream() -> AsyncIterator[int]:
        nonlocal opened
        opened += 1
        return _items(10, delay_first=0.003)

    result = asyncio.run(measure_stream("s", open_stream, runs=3, warmup=1))
    assert opened == 4
    assert result.items == 10
    assert len(result.ttfi_ns) == 3
    assert result.ttfi_ms >= 2.5
    assert result.median_items_per_s > 0


def test_measure_stream_rejects_empty_stream() -> None:
    with pytest.raises(ValueError, match="yielded no items"):
        asyncio.run(measure_stream("empty", lambda: _items(0), runs=1))


def test_import_time() -> None:
    seconds = import_time("json", runs=2)
    assert 0 < seconds < 5
    with pytest.raises(RuntimeError, match="no_such_module_xyz"):
        import_time("no_such_module_xyz", runs=1, python=sys.executable)


def test_example_bench_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert example_bench.main(["--iterations", "200"]) == 0
    out = capsys.readouterr().out
    assert "ratio vs raw" in out
    assert "sleep(0)" in out
    assert "items/s" in out


def test_import_time_after_measures_only_what_the_module_adds() -> None:
    # json.decoder is part of json: on top of json it costs nothing (well under the cold import of json).
    cold = import_time("json", runs=3)
    on_top = import_time("json.decoder", runs=3, after=["json"])
    assert on_top < cold
    with pytest.raises(RuntimeError, match="no_such_base_xyz"):
        import_time("json", runs=1, after=["no_such_base_xyz"])


def test_proc_readers_see_this_process() -> None:
    assert rss_bytes(os.getpid()) > 1 << 20
    assert cpu_seconds(os.getpid()) > 0
    assert machine_cpu_seconds() >= cpu_seconds(os.getpid())
    assert rss_bytes(2**22 + 7) == -1  # no such pid
    assert math.isnan(cpu_seconds(2**22 + 7))
