"""tools/bench/bench_semantic_kernel.py for real, in a few creates (it runs in this distribution's environment, the
only one with semantic-kernel): every side measured, both directions reported with their A/A figures. Shapes and
counts, never timings."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "tools" / "bench"


async def test_the_bench_runs_and_reports_both_directions(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.append(str(BENCH))  # the bench imports its harness by bare name, as when run as a script
    try:
        bench = importlib.import_module("bench_semantic_kernel")
        figures = await bench.run(blocks=2, block=2)
    finally:
        sys.path.remove(str(BENCH))
    assert [f[0] for f in figures] == [
        "ExtChatCompletion vs ext client",
        "KernelChatCompletionClient vs kernel connector",
    ]
    assert all(ratio > 0 and aa > 0 for _, _, _, ratio, aa in figures)
    out = capsys.readouterr().out
    assert "2 blocks of 2 creates per side" in out
    for case in ("ext as kernel", "kernel as ext", "ext client", "kernel conn."):
        assert case in out
