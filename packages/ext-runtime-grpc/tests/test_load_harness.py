"""The load harness's bookkeeping on its own (no network): `SequenceChecker` and `ClusterTally`."""

from __future__ import annotations

import pytest

from ext.core import AgentId
from ext.runtime.grpc.testing import ClusterTally, SequenceChecker, expected_answer, parse_agent_id, stream_key


def test_checker_records_ranges_gaps_duplicates_and_reordering() -> None:
    checker = SequenceChecker()
    for seq in [0, 1, 2, 5, 6, 3, 3, 9, 4, 0]:
        checker.record("s", "seq/a", seq)
    stream = checker.streams[stream_key("s", "seq/a")]
    assert stream.ranges == [[0, 7], [9, 10]]
    assert stream.received == 10
    assert stream.duplicates == 2  # the second 3 and the second 0
    assert stream.out_of_order == 4  # 3 and 3 after 6; 4 and 0 after 9
    tally = ClusterTally([checker.to_json()])
    assert tally.stream("s", "seq/a").missing(12) == [7, 8, 10, 11]
    assert tally.stream("s", "seq/a").missing(12, start=9) == [10, 11]
    problems = tally.problems({stream_key("s", "seq/a"): 12})
    assert problems == [
        "s -> seq/a: 4 of 12 missing (7, 8, 10, 11)",
        "s -> seq/a: 2 duplicates",
        "s -> seq/a: 4 out of order",
    ]


def test_tally_merges_a_stream_whose_agent_moved_between_processes() -> None:
    before, after = SequenceChecker(), SequenceChecker()
    for seq in range(50):
        before.record("s", "seq/a", seq)
    for seq in range(60, 100):  # 50-59 lost in the move
        after.record("s", "seq/a", seq)
    after.record("s", "seq/a", 10)  # and one delivered twice, once in each process
    tally = ClusterTally([before.to_json(), after.to_json()])
    stream = tally.stream("s", "seq/a")
    assert stream.ranges == [(0, 50), (60, 100)]
    assert stream.duplicates == 1
    assert stream.missing(100) == list(range(50, 60))
    assert tally.problems({stream_key("s", "seq/a"): 100}, since={stream_key("s", "seq/a"): 60}) == [
        "s -> seq/a: 1 duplicates",
        "s -> seq/a: 1 out of order",
    ]
    # A stream nobody reported sending is a problem only when strict.
    assert tally.problems({}, strict=False) == []
    assert tally.problems({}) == ["s -> seq/a: 91 messages arrived on a stream nobody reported sending"]


def test_agent_ids_and_answers() -> None:
    assert parse_agent_id("seq/k1") == AgentId("seq", "k1")
    assert expected_answer(AgentId("seq", "k1"), 7) == "seq/k1:7"
    with pytest.raises(ValueError, match="type/key"):
        parse_agent_id("nokey")
