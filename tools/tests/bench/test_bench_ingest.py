"""bench_ingest.py for real, in its --quick mode: both embedders ingest the same small corpus into the SQLite store
in child processes and the printed table has one well-formed line per embedder. Shapes and counts, never timings."""

from __future__ import annotations

import contextlib
import io

import bench_ingest


def test_the_corpus_is_deterministic_and_sized() -> None:
    text = bench_ingest.corpus(5000)
    assert len(text.encode()) == 5000 and text == bench_ingest.corpus(5000) and text != bench_ingest.corpus(5000, 1)


def test_quick_run_prints_one_row_per_embedder() -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert bench_ingest.main(["--quick"]) == 0
    header, rule, *rows = printed.getvalue().splitlines()
    assert [cell.strip() for cell in header.split("  ") if cell.strip()] == list(bench_ingest.HEADER)
    assert set(rule.replace(" ", "")) == {"-"}
    assert [row.split()[0] for row in rows] == list(bench_ingest.EMBEDDERS)
    chunks = set()
    for row in rows:
        name, mb, count, *figures = row.split()
        assert float(mb) == round(bench_ingest.QUICK_BYTES / 1e6, 3)
        chunks.add(int(count))
        assert all(float(f.replace(",", "")) >= 0 for f in figures)
        assert float(figures[-1]) > 10, f"{name}: a peak RSS below 10 MB is not a Python process's"
    assert len(chunks) == 1 and chunks.pop() > 0  # the same corpus, chunked alike, for every embedder
