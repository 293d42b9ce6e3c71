"""bench_cluster.py --quick, for real: gateway and worker processes, a redis-server, the table it prints and the
figures it writes. Shapes and sanity (every message counted, p50 <= p99, bytes per agent > 0), never timings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import bench_cluster
import pytest

from ext.testing.redis import INSTALL_HINT, REDIS_BINARY


def test_quick_run_prints_the_table_and_sane_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert REDIS_BINARY is not None, INSTALL_HINT
    out_file = tmp_path / "figures.json"

    assert bench_cluster.main(["--quick", "--json", str(out_file)]) == 0

    printed = capsys.readouterr().out
    settings = bench_cluster.QUICK
    configs = [("memory", 1)] + [("redis", r) for r in settings.replicas]
    cases = ("one-way", "rpc sequential", f"rpc x{settings.concurrency}")
    lines = printed.splitlines()

    # The machine note: core count and what it limits.
    assert f"machine: {bench_cluster.cores()} cores" in lines[0]
    assert lines[1].startswith("limit: the largest configuration runs 2 gateways + 2 workers + redis-server")
    assert "load average at the end:" in lines[-1]

    # The throughput table: a header, then one row per configuration, worker count and case, in order.
    start = lines.index(bench_cluster.HEADER)
    rows = lines[start + 1 : start + 1 + len(configs) * len(settings.workers) * len(cases)]
    expected_keys = [
        (registry, str(replicas), str(workers), case)
        for registry, replicas in configs
        for workers in settings.workers
        for case in cases
    ]
    assert [(r.split()[0], r.split()[1], r.split()[2], r[25:39].strip()) for r in rows] == expected_keys
    assert lines[start + 1 + len(rows)] == ""

    # The memory table: one row per registry.
    mem_start = lines.index(bench_cluster.MEMORY_HEADER)
    assert [line.split()[0] for line in lines[mem_start + 1 : mem_start + 3]] == ["memory", "redis"]

    figures = json.loads(out_file.read_text())
    assert figures["cores"] == bench_cluster.cores()
    assert len(figures["rows"]) == len(rows)
    for row, printed_row in zip(figures["rows"], rows, strict=True):
        what = f"{row['registry']} x{row['replicas']} {row['workers']} workers {row['case']}"
        per_worker = {
            "one-way": settings.messages,
            "rpc sequential": settings.rpcs,
        }.get(row["case"], settings.concurrent_rpcs)
        assert row["expected"] == per_worker * row["workers"] * settings.rounds, what
        assert row["counted"] == row["expected"], what  # nothing lost, nothing extra
        assert row["out_of_order"] == 0, what  # nor reordered or repeated
        assert f"{row['counted']}/{row['expected']}" in printed_row
        assert row["ops_per_s"] > 0, what
        assert 0 < row["p50_ms"] <= row["p99_ms"], what
        assert set(row["cpu_us_per_op"]) == {"gateways", "workers", "redis"}, what
        assert all(v >= 0 for v in row["cpu_us_per_op"].values()), what
        assert row["busy"] >= 0, what
        # Round-robin over replicas: on one replica no hop crosses; with two workers on two replicas both do.
        assert row["cross"] == (0.0 if row["replicas"] == 1 else 1.0), what
        if row["registry"] == "memory":
            assert row["cpu_us_per_op"]["redis"] == 0, what

    memory = {m["registry"]: m for m in figures["memory"]}
    assert set(memory) == {"memory", "redis"}
    for registry, m in memory.items():
        assert m["agents"] == settings.agents, registry
        assert m["hosted"] == settings.agents, registry  # every agent really exists on the host worker
        # RSS growth over a quick run's few agents is noise (the allocator may hand pages back meanwhile: a CI run
        # once saw -9.8 KB per agent), so only its shape is checked; the tracemalloc heap is the steady figure.
        assert math.isfinite(m["worker_bytes"]), registry
        assert m["worker_heap_bytes"] > 0, registry
        assert m["worker_rss_after"] > 0 and m["worker_rss_mid"] > 0, registry
        assert m["worker_rss_before"] > 0, registry
    assert memory["memory"]["redis_bytes"] is None
    assert memory["redis"]["redis_bytes"] is not None

    floor = figures["redis_floor"]
    assert floor["messages"] == 1000
    assert floor["per_s"] > 0
    assert floor["cpu_us"] > 0
    assert any(line.startswith("redis-py floor (no ext): ") for line in lines)


def test_bad_arguments_are_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--workers", "2,x"], ["--replicas", "0"], ["--rounds", "0"]):
        with pytest.raises(SystemExit) as exited:
            bench_cluster.main(argv)
        assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "expected comma-separated integers, got '2,x'" in err
    assert "expected integers of at least 1, got '0'" in err
    assert "--rounds must be at least 1, got 0" in err
