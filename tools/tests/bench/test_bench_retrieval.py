"""bench_retrieval.py: its data holds together (50+ questions, each naming passages the corpus has), its metrics and
fusion compute what they say on hand-made rankings, and its --quick mode runs for real. Never timings."""

from __future__ import annotations

import contextlib
import io

import bench_retrieval
from bench_retrieval import BM25, Question, fuse, score


def test_the_data_holds_together() -> None:
    corpus, questions = bench_retrieval.load_data()
    assert len(questions) >= 50
    assert len({q.id for q in questions}) == len(questions) and len({q.text for q in questions}) == len(questions)
    assert all(q.passages and all(p in corpus for p in q.passages) for q in questions)
    assert len(corpus) == 75 and all(text.strip() for text in corpus.values())


def test_recall_and_mrr_on_known_rankings() -> None:
    questions = [Question("a", "?", ("x",)), Question("b", "?", ("y", "z")), Question("c", "?", ("w",))]
    ranked = [["x", "q"], ["q", "q", "q", "q", "q", "z"], ["q"] * 10 + ["w"]]
    recall, mrr = score(ranked, questions)
    assert recall == 1 / 3  # only the first has a relevant hit in its first five
    assert mrr == (1 + 1 / 6 + 0) / 3  # the third's is at rank 11: outside MRR@10


def test_fusion_and_bm25() -> None:
    assert fuse([["a", "b", "c"], ["b", "d"]], 4) == ["b", "a", "d", "c"]  # in both lists beats first in one
    index = BM25([("t#0", "the walrus eats fish"), ("t#1", "the cat sleeps"), ("t#2", "fish fish fish swim")])
    assert index.search("fish", 5) == ["t#2", "t#0"]
    assert index.search("nothing here", 5) == []


def test_quick_run_prints_a_row_per_method() -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert bench_retrieval.main(["--quick"]) == 0
    header, _, *rows = printed.getvalue().splitlines()
    assert [c.strip() for c in header.split("  ") if c.strip()] == list(bench_retrieval.HEADER)
    assert [row.split("  ")[0].strip() for row in rows] == ["hashing", "keyword (BM25)"]
    for row in rows:
        recall, mrr = (float(x) for x in row.split()[-4:-2])
        assert 0 <= recall <= 1 and 0 <= mrr <= 1
