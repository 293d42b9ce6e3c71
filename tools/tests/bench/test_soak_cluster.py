"""tools/bench/soak_cluster.py runs for real (a few seconds, small rounds): its table's shape and its verdict."""

from __future__ import annotations

import re

import pytest

from ext.testing.redis import INSTALL_HINT, REDIS_BINARY


def test_short_soak_prints_its_table_and_finds_nothing_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    if REDIS_BINARY is None:
        pytest.fail(INSTALL_HINT)
    import soak_cluster

    code = soak_cluster.main(
        ["--seconds", "2", "--workers", "2", "--agents", "4", "--batch", "100", "--samples", "2", "--rpc-every", "5"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("t s"))
    assert header.split() == ["t", "s", "msgs", "msgs/s", "gw0", "gw1", "w0", "w1", "redis"]
    rows = [line.split() for line in lines if re.match(r"^\s*\d+\.\d+\s+[\d,]+\s", line)]
    assert len(rows) >= 2 and rows[0][1] == "0"
    assert all(float(cell) > 10 for row in rows for cell in row[3:])  # RSS in MiB of live processes
    totals = next(line for line in lines if line.startswith("messages sent"))
    sent = int(re.search(r"messages sent ([\d,]+)", totals).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert sent > 0 and sent % (2 * 4 * 100) == 0  # whole rounds, the warm-up included
    assert f"received {sent:,}, missing 0, duplicates 0, out of order 0" in totals
    assert "wrong 0, failed 0" in totals
    assert lines[-1] == "OK"
