"""bench_state.py --quick, for real: both runtimes, every store (a redis-server too), the memory children, the
tables it prints and the figures it writes. Shapes and counts (every message handled, every activation saw
its stored state, idle agents deactivated with their state kept), never timings."""

from __future__ import annotations

import json
from pathlib import Path

import bench_state
import pytest
from _state_memory import MEMORY_HEADER, MEMORY_MODES, WARMUP_AGENTS

from ext.testing.redis import INSTALL_HINT, REDIS_BINARY


def test_quick_run_prints_the_tables_and_sane_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert REDIS_BINARY is not None, INSTALL_HINT
    out_file = tmp_path / "figures.json"

    assert bench_state.main(["--quick", "--json", str(out_file)]) == 0

    lines = capsys.readouterr().out.splitlines()
    settings = bench_state.QUICK
    assert lines[0].startswith("machine: ") and "load average at the start: " in lines[0]
    assert lines[-1].startswith("load average at the end: ")

    # The timed table: one row per runtime, case and store, in that order, each with its checked count.
    start = lines.index(bench_state.HEADER)
    keys = [(r, c, s) for r in bench_state.RUNTIMES for c in bench_state.CASES for s in bench_state.STORES]
    rows = lines[start + 1 : start + 1 + len(keys)]
    assert [(row[:8].strip(), row[9:18].strip(), row[19:27].strip()) for row in rows] == keys
    assert lines[start + 1 + len(keys)] == ""

    figures = json.loads(out_file.read_text())
    assert [(r["runtime"], r["case"], r["store"]) for r in figures["rows"]] == keys
    ops = {
        "one-way": settings.batches * settings.rounds,
        "rpc seq": settings.rpcs * settings.rounds,
        "activate": settings.activations * settings.rounds,
    }
    for row, printed in zip(figures["rows"], rows, strict=True):
        what = f"{row['runtime']} {row['case']} {row['store']}"
        assert row["ops"] == ops[row["case"]], what
        # One-way: every message handled (the warm-up batch included). Activation: every agent answered with the
        # count seeded in its store (a new agent's 1 when there is no store). Nothing lost, nothing extra.
        assert row["checked"] == row["expected"], what
        assert f"{row['checked']}/{row['expected']}" in printed, what
        assert 0 < row["p50_ms"] <= row["p99_ms"], what
        assert row["per_s"] > 0 and row["cpu_us"] > 0, what
        assert printed.endswith("x"), what
    assert [r["expected"] for r in figures["rows"] if r["case"] == "one-way"] == [
        (ops["one-way"] + 1) * settings.batch
    ] * 2 * len(bench_state.STORES)

    # The memory table: without idle_timeout every agent stays; with it every one is deactivated and its state
    # kept in the store (the warm-up agents, the timed ones and the tracemalloc batch): in this process's
    # InMemoryStateStore, or in Redis, and then almost nothing of an idle agent stays here.
    mem_start = lines.index(MEMORY_HEADER)
    assert [line[:11].strip() for line in lines[mem_start + 1 : mem_start + 4]] == list(MEMORY_MODES)
    kept, idle, idle_redis = figures["memory"]
    assert [m["mode"] for m in figures["memory"]] == list(MEMORY_MODES)
    assert kept["idle_timeout"] is None
    for m in figures["memory"]:
        assert m["agents"] == settings.agents
        assert m["rss_baseline"] > 0 and m["rss_peak"] >= m["rss_baseline"]
        assert m["heap_live_bytes"] > 0
    assert kept["live_created"] == kept["live_after"] == settings.agents
    assert kept["records"] == 0 and kept["redis_bytes"] is None
    assert kept["heap_idle_bytes"] > 0.9 * kept["heap_live_bytes"]  # nothing released
    for m in (idle, idle_redis):
        assert m["idle_timeout"] == settings.idle_timeout
        assert 0 < m["live_created"] <= settings.agents
        assert m["live_after"] == 0
        assert m["records"] == WARMUP_AGENTS + settings.agents + settings.heap_agents
        assert m["heap_idle_bytes"] < m["heap_live_bytes"] / 2
    assert idle["redis_bytes"] is None and idle_redis["redis_bytes"] > 0
    # The record left in this process by an idle agent is its InMemoryStateStore entry; with Redis it is gone.
    assert idle_redis["heap_idle_bytes"] < idle["heap_idle_bytes"]


def test_bad_arguments_are_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--rounds", "0"], ["--quick", "--agents", "3"], ["--runtime", "nope"]):
        with pytest.raises(SystemExit) as exited:
            bench_state.main(argv)
        assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--rounds must be at least 1, got 0" in err
    assert "--agents must be at least 4 (one per wave), got 3" in err
    assert "invalid choice: 'nope'" in err
