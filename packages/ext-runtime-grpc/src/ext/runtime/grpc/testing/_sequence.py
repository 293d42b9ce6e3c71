"""The load harness's traffic and its checking: sequence-numbered messages (`Seq`, `SeqCall`, `Hold`), the
per-stream `SequenceChecker` and the cluster-wide `ClusterTally`, the `SequenceAgent` that records what it
receives, and the sender loop `run_sender` with its `SenderReport`.

A *stream* is one sender's messages to one recipient agent: `Seq(sender, seq)` with `seq` counting from 0. The
runtime promises in-order delivery per (sending worker, recipient), so a checker on the receiving side records,
per stream, which sequence numbers arrived (as ranges), how many arrived twice, and how many arrived after a
higher one. Streams whose agent moved between processes (failover) merge across processes in `ClusterTally`.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ext.core import AgentId, BaseAgent, MessageContext
from ext.runtime.grpc import GrpcAgentRuntime

logger = logging.getLogger(__name__)


# --- messages ----------------------------------------------------------------------------------------------


class Seq(BaseModel):
    """A one-way message of a stream: the `seq`-th message `sender` sent to its recipient (from 0)."""

    sender: str
    seq: int


class SeqCall(BaseModel):
    """An RPC; `SequenceAgent` answers `"<its id>:<seq>"`, so the caller can check the value it got back."""

    sender: str
    seq: int


class Hold(BaseModel):
    """An RPC `SequenceAgent` answers only after `seconds` (to have an RPC in flight on purpose); it answers
    `"<its id>:held"`."""

    seconds: float


MESSAGE_TYPES: tuple[type[BaseModel], ...] = (Seq, SeqCall, Hold)
"""Register these on every worker that sends or hosts the harness's agents."""


def expected_answer(recipient: AgentId | str, seq: int) -> str:
    """What `SequenceAgent` answers to `SeqCall(seq=seq)`."""
    return f"{recipient}:{seq}"


# --- the checker -------------------------------------------------------------------------------------------


@dataclass
class StreamRecord:
    """What arrived of one stream: `ranges` of received sequence numbers (sorted, disjoint, `[start, end)`),
    `duplicates` (arrived again), `out_of_order` (arrived after a higher number of the same stream)."""

    ranges: list[list[int]] = field(default_factory=list)
    received: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    highest: int = -1

    def add(self, seq: int) -> None:
        self.received += 1
        ranges = self.ranges
        if ranges and ranges[-1][1] == seq:  # the common case: the next one
            ranges[-1][1] = seq + 1
            self.highest = seq
            return
        if seq < self.highest:
            self.out_of_order += 1
        self.highest = max(self.highest, seq)
        index = bisect.bisect_right(ranges, [seq, sys.maxsize]) - 1
        if index >= 0 and ranges[index][0] <= seq < ranges[index][1]:
            self.duplicates += 1
            return
        # Join the range ending at seq and/or the one starting at seq + 1.
        joins_left = index >= 0 and ranges[index][1] == seq
        joins_right = index + 1 < len(ranges) and ranges[index + 1][0] == seq + 1
        if joins_left and joins_right:
            ranges[index][1] = ranges[index + 1][1]
            del ranges[index + 1]
        elif joins_left:
            ranges[index][1] = seq + 1
        elif joins_right:
            ranges[index + 1][0] = seq
        else:
            ranges.insert(index + 1, [seq, seq + 1])

    def to_json(self) -> dict[str, Any]:
        return {
            "ranges": self.ranges,
            "received": self.received,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
        }


def stream_key(sender: str, recipient: AgentId | str) -> str:
    """The name of a stream in reports: `"<sender> -> <recipient>"`."""
    return f"{sender} -> {recipient}"


class SequenceChecker:
    """Records `Seq` messages per stream (sender -> recipient). Memory grows with the number of gaps, not
    messages."""

    def __init__(self) -> None:
        self.streams: dict[str, StreamRecord] = {}
        self.received = 0

    def record(self, sender: str, recipient: AgentId | str, seq: int) -> None:
        key = stream_key(sender, recipient)
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = StreamRecord()
        stream.add(seq)
        self.received += 1

    def to_json(self) -> dict[str, Any]:
        return {"received": self.received, "streams": {k: s.to_json() for k, s in self.streams.items()}}


@dataclass
class StreamTally:
    """One stream over every process that hosted its recipient (see `ClusterTally`)."""

    received: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    ranges: list[tuple[int, int]] = field(default_factory=list)

    def missing(self, sent: int, start: int = 0) -> list[int]:
        """Sequence numbers in `[start, sent)` that never arrived."""
        gaps: list[int] = []
        cursor = start
        for low, high in self.ranges:
            if high <= cursor:
                continue
            gaps.extend(range(cursor, min(low, sent)))
            cursor = max(cursor, high)
            if cursor >= sent:
                break
        gaps.extend(range(cursor, sent))
        return gaps


class ClusterTally:
    """Checker reports of several processes merged per stream: received ranges are united (a number received
    by two processes counts as a duplicate), counts are added."""

    def __init__(self, reports: Iterable[dict[str, Any]]) -> None:
        self.streams: dict[str, StreamTally] = {}
        for report in reports:
            for key, data in report["streams"].items():
                tally = self.streams.setdefault(key, StreamTally())
                tally.received += data["received"]
                tally.duplicates += data["duplicates"]
                tally.out_of_order += data["out_of_order"]
                tally.ranges.extend((low, high) for low, high in data["ranges"])
        for tally in self.streams.values():
            tally.ranges.sort()
            merged: list[tuple[int, int]] = []
            for low, high in tally.ranges:
                if merged and low < merged[-1][1]:
                    tally.duplicates += min(high, merged[-1][1]) - low
                    merged[-1] = (merged[-1][0], max(merged[-1][1], high))
                elif merged and low == merged[-1][1]:
                    merged[-1] = (merged[-1][0], high)
                else:
                    merged.append((low, high))
            tally.ranges = merged

    @property
    def received(self) -> int:
        return sum(t.received for t in self.streams.values())

    def stream(self, sender: str, recipient: AgentId | str) -> StreamTally:
        return self.streams.get(stream_key(sender, recipient), StreamTally())

    def problems(self, sent: dict[str, int], *, since: dict[str, int] | None = None, strict: bool = True) -> list[str]:
        """What is wrong, as readable lines: per stream in `sent` (stream key -> messages sent), the numbers
        missing in `[since[key], sent[key])` (default from 0), duplicates and out-of-order arrivals; with
        `strict`, streams not in `sent` too. Empty when every message arrived exactly once and in order."""
        lines: list[str] = []
        for key in sorted(set(sent) | set(self.streams) if strict else sent):
            tally = self.streams.get(key, StreamTally())
            if key not in sent:
                lines.append(f"{key}: {tally.received} messages arrived on a stream nobody reported sending")
                continue
            missing = tally.missing(sent[key], (since or {}).get(key, 0))
            if missing:
                shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
                lines.append(f"{key}: {len(missing)} of {sent[key]} missing ({shown})")
            if tally.duplicates:
                lines.append(f"{key}: {tally.duplicates} duplicates")
            if tally.out_of_order:
                lines.append(f"{key}: {tally.out_of_order} out of order")
        return lines


# --- the agent ---------------------------------------------------------------------------------------------


class SequenceAgent(BaseAgent):
    """Records every `Seq` in a `SequenceChecker` (shared by the agents of a process), answers `SeqCall` with
    `expected_answer(its id, seq)` and `Hold` after a pause. `on_hold(agent_id)` is called when a `Hold` starts.

    Its state (for runtimes with a state store) is what it has handled: `handled` (messages handled without
    error) and, per sender, the `StreamRecord` of the `Seq` numbers it saw (ranges, duplicates, out of order).
    A state that moved with the agent between processes continues there, so a stream that went backwards or
    lost saved messages shows in the record.

    Factory: `lambda agent_id, runtime: SequenceAgent(agent_id, runtime, checker)`.
    """

    def __init__(
        self,
        id: AgentId,
        runtime: Any,
        checker: SequenceChecker,
        on_hold: Callable[[AgentId], None] | None = None,
    ) -> None:
        super().__init__(id, runtime)
        self._checker = checker
        self._on_hold = on_hold
        self._name = str(id)
        self._handled = 0
        self._seen: dict[str, StreamRecord] = {}

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        if message.__class__ is Seq:
            self._checker.record(message.sender, self._name, message.seq)
            seen = self._seen.get(message.sender)
            if seen is None:
                seen = self._seen[message.sender] = StreamRecord()
            seen.add(message.seq)
            self._handled += 1
            return None
        if message.__class__ is SeqCall:
            self._handled += 1
            return expected_answer(self._name, message.seq)
        if isinstance(message, Hold):
            if self._on_hold is not None:
                self._on_hold(self.id)
            await asyncio.sleep(message.seconds)
            return f"{self._name}:held"
        raise TypeError(f"SequenceAgent does not handle {type(message).__name__}")

    async def save_state(self) -> Mapping[str, Any]:
        return {
            "handled": self._handled,
            "seen": {k: {**r.to_json(), "highest": r.highest} for k, r in self._seen.items()},
        }

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self._handled = int(state["handled"])
        self._seen = {
            sender: StreamRecord(
                ranges=[list(r) for r in data["ranges"]],
                received=data["received"],
                duplicates=data["duplicates"],
                out_of_order=data["out_of_order"],
                highest=data["highest"],
            )
            for sender, data in state["seen"].items()
        }


# --- the sender --------------------------------------------------------------------------------------------


@dataclass
class SenderReport:
    """What a sender did: per stream the number of `Seq` messages it attempted (`sent`, as the next sequence
    number) and the ones whose `send_message` raised (`send_errors`: known lost); per recipient the one-way
    messages the gateway reported undeliverable (`undelivered`, counted by `note_undelivered`, which the load
    worker passes as the runtime's `on_undelivered`); RPC outcomes."""

    sent: dict[str, int] = field(default_factory=dict)
    send_errors: dict[str, list[int]] = field(default_factory=dict)
    undelivered: dict[str, int] = field(default_factory=dict)
    rpc_ok: int = 0
    rpc_wrong: list[str] = field(default_factory=list)
    rpc_errors: dict[str, int] = field(default_factory=dict)
    rpc_error_examples: dict[str, str] = field(default_factory=dict)
    rpc_max_seconds: float = 0.0

    def note_undelivered(self, recipient: AgentId, reason: str) -> None:
        key = str(recipient)
        self.undelivered[key] = self.undelivered.get(key, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "send_errors": self.send_errors,
            "undelivered": self.undelivered,
            "rpc_ok": self.rpc_ok,
            "rpc_wrong": self.rpc_wrong,
            "rpc_errors": self.rpc_errors,
            "rpc_error_examples": self.rpc_error_examples,
            "rpc_max_seconds": self.rpc_max_seconds,
        }


def parse_agent_id(text: str) -> AgentId:
    agent_type, sep, key = text.partition("/")
    if not sep:
        raise ValueError(f"an agent id must look like 'type/key', got {text!r}")
    return AgentId(agent_type, key)


async def run_sender(
    runtime: GrpcAgentRuntime,
    name: str,
    targets: Sequence[AgentId],
    count: int | None,
    *,
    rpc_every: int = 0,
    rpc_timeout: float = 10.0,
    stop: asyncio.Event | None = None,
    report: SenderReport | None = None,
) -> SenderReport:
    """Send `count` `Seq` messages (numbered from where `report` left off) to each target, one task per target
    (so each stream stays in order), and every `rpc_every`-th message also a `SeqCall` RPC whose answer is
    checked. `count=None`: until `stop` is set. A failed send or RPC is recorded and the loop goes on."""
    report = report if report is not None else SenderReport()

    async def one(target: AgentId) -> None:
        key = stream_key(name, target)
        seq = report.sent.get(key, 0)
        end = None if count is None else seq + count
        while (end is None or seq < end) and not (stop is not None and stop.is_set()):
            report.sent[key] = seq + 1
            try:
                await runtime.send_message(Seq(sender=name, seq=seq), target)
            except Exception:
                report.send_errors.setdefault(key, []).append(seq)
                await asyncio.sleep(0.01)  # not connected: let the reconnect happen rather than spin
            if rpc_every and seq % rpc_every == rpc_every - 1:
                await _call(runtime, name, target, seq, rpc_timeout, report)
            seq += 1

    await asyncio.gather(*(one(t) for t in targets))
    return report


async def _call(
    runtime: GrpcAgentRuntime, name: str, target: AgentId, seq: int, timeout: float, report: SenderReport
) -> None:
    started = time.monotonic()
    try:
        answer = await runtime.send_and_await_response(SeqCall(sender=name, seq=seq), target, timeout=timeout)
    except Exception as exc:
        kind = type(exc).__name__
        report.rpc_errors[kind] = report.rpc_errors.get(kind, 0) + 1
        report.rpc_error_examples.setdefault(kind, str(exc))
    else:
        if answer == expected_answer(target, seq):
            report.rpc_ok += 1
        else:
            report.rpc_wrong.append(f"{target} seq {seq}: {answer!r}")
    report.rpc_max_seconds = max(report.rpc_max_seconds, time.monotonic() - started)


# --- memory ------------------------------------------------------------------------------------------------


def rss_kb(pid: int | None = None) -> int:
    """Resident set size of a process in KiB (VmRSS from /proc/<pid>/status; Linux only)."""
    with open(f"/proc/{pid or os.getpid()}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status (a kernel thread, or not Linux?)")
