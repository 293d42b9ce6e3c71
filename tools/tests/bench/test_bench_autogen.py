"""bench_autogen.py --quick, for real: AutoGen's host and ext's gateway as processes, real AutoGen workers on each,
the table it prints and the figures it writes. Shapes and counts (every RPC answered and timed, every published
message handled), never timings."""

from __future__ import annotations

import json
from pathlib import Path

import bench_autogen
import pytest


def test_quick_run_prints_the_table_and_sane_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "figures.json"

    assert bench_autogen.main(["--quick", "--json", str(out_file)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("machine: ") and lines[-1].startswith("load average at the end: ")
    start = lines.index(bench_autogen.HEADER)
    assert [row.split("  ")[0] for row in lines[start + 1 : start + 3]] == list(bench_autogen.HUBS)
    assert lines[start + 3].startswith("ext gateway / autogen host: rpc p50 ")

    settings = bench_autogen.QUICK
    rows = json.loads(out_file.read_text())["rows"]
    assert [r["hub"] for r in rows] == list(bench_autogen.HUBS)
    for row in rows:
        assert row["rpcs"] == settings.rpcs * settings.rounds
        assert row["published"] == settings.publishes * settings.rounds
        assert 0 < row["rpc_p50_ms"] <= row["rpc_p99_ms"]
        assert row["publish_per_s"] > 0


def test_bad_arguments_are_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--rounds", "0"], ["--rpcs", "-1"]):
        with pytest.raises(SystemExit) as exited:
            bench_autogen.main(argv)
        assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--rounds must be at least 1, got 0" in err and "--rpcs must be at least 1, got -1" in err
