"""`AsyncStartStop`: `async with` over a subclass's own `start` and `stop`."""

from __future__ import annotations

import pytest

from ext.core import AsyncStartStop, StaticWorkbench, Workbench


class Recorder(AsyncStartStop):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def start(self) -> list[str]:
        self.calls.append("start")
        return ["started"]

    async def stop(self) -> None:
        self.calls.append("stop")


async def test_async_with_starts_gives_itself_and_stops() -> None:
    recorder = Recorder()
    async with recorder as entered:
        assert entered is recorder
        assert recorder.calls == ["start"]
    assert recorder.calls == ["start", "stop"]


async def test_a_body_that_raises_still_stops_and_the_error_propagates() -> None:
    recorder = Recorder()
    with pytest.raises(KeyError, match="boom"):
        async with recorder:
            raise KeyError("boom")
    assert recorder.calls == ["start", "stop"]


def test_start_and_stop_are_the_subclass_s_to_write() -> None:
    class Half(AsyncStartStop):
        async def start(self) -> None:
            pass

    with pytest.raises(TypeError, match="stop"):
        Half()  # type: ignore[abstract]


async def test_workbenches_use_it() -> None:
    assert issubclass(Workbench, AsyncStartStop)
    async with StaticWorkbench([]) as bench:
        assert isinstance(bench, StaticWorkbench)  # the subclass, not the base, comes out of `async with`
        assert await bench.list_tools() == []
