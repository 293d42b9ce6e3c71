"""The load harness behind `ext.runtime.grpc.testing`: sequence-numbered traffic, a checker that finds gaps and
duplicates per stream, a sender loop, and load workers as separate OS processes driven over JSON lines.

A *stream* is one sender's messages to one recipient agent: `Seq(sender, seq)` with `seq` counting from 0. The
runtime promises in-order delivery per (sending worker, recipient), so a checker on the receiving side records,
per stream, which sequence numbers arrived (as ranges), how many arrived twice, and how many arrived after a
higher one. Streams whose agent moved between processes (failover) merge across processes in `ClusterTally`.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ext.core import AgentId, BaseAgent, MessageContext

from ._worker import GrpcAgentRuntime

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

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        if message.__class__ is Seq:
            self._checker.record(message.sender, self._name, message.seq)
            return None
        if message.__class__ is SeqCall:
            return expected_answer(self._name, message.seq)
        if isinstance(message, Hold):
            if self._on_hold is not None:
                self._on_hold(self.id)
            await asyncio.sleep(message.seconds)
            return f"{self._name}:held"
        raise TypeError(f"SequenceAgent does not handle {type(message).__name__}")


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


# --- load workers as processes -----------------------------------------------------------------------------


class LoadWorkerProcess:
    """A `GrpcAgentRuntime` in its own OS process (`python -m ext.runtime.grpc.testing load-worker`) hosting
    `SequenceAgent`s of the given types, sending on command, and answering commands over JSON lines.

    Start with `await LoadWorkerProcess.start(name, addresses, host_types=[...])`; always `kill()` (or `stop()`)
    it in teardown. Every command waits at most its `timeout` and then raises `TimeoutError` saying which.
    """

    def __init__(self, name: str, process: asyncio.subprocess.Process, ready: dict[str, Any]) -> None:
        self.name = name
        self.process = process
        self.ready = ready
        self.events: list[dict[str, Any]] = []
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0
        self._event_waiters: list[tuple[Callable[[dict[str, Any]], bool], asyncio.Future[dict[str, Any]]]] = []
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @property
    def pid(self) -> int:
        return self.process.pid

    def __repr__(self) -> str:
        return f"LoadWorkerProcess(name={self.name!r}, pid={self.pid})"

    @classmethod
    async def start(
        cls,
        name: str,
        addresses: Sequence[str],
        *,
        host_types: Sequence[str] = (),
        env: dict[str, str] | None = None,
        connect_timeout: float = 5.0,
        reconnect_backoff: float = 0.05,
        timeout: float = 30.0,
    ) -> LoadWorkerProcess:
        """Start the process and wait (up to `timeout`) until it is connected with its types registered.
        `EXT_GRPC*` variables of this process are not passed on (give a token in `env` as `EXT_GRPC_TOKEN`)."""
        args = [sys.executable, "-m", "ext.runtime.grpc.testing", "load-worker", "--name", name]
        for address in addresses:
            args += ["--address", address]
        for agent_type in host_types:
            args += ["--host-type", agent_type]
        args += ["--connect-timeout", str(connect_timeout), "--reconnect-backoff", str(reconnect_backoff)]
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("EXT_GRPC")}
        full_env.update(env or {})
        process = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,  # the worker's log (WARNING and up) goes to ours
            env=full_env,
            limit=16 * 1024 * 1024,
        )
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), timeout)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            raise TimeoutError(f"load worker {name} did not report ready within {timeout:g} s") from None
        try:
            ready = json.loads(line)
        except ValueError:
            ready = {}
        if ready.get("event") != "ready":
            process.kill()
            await process.wait()
            raise RuntimeError(f"load worker {name} did not start: {line[-2000:]!r}")
        return cls(name, process, ready)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            if "reply" in message:
                future = self._replies.pop(message["reply"], None)
                if future is not None and not future.done():
                    future.set_result(message)
            else:
                self.events.append(message)
                for predicate, waiter in list(self._event_waiters):
                    if not waiter.done() and predicate(message):
                        waiter.set_result(message)
        gone = RuntimeError(f"load worker {self.name} (pid {self.pid}) exited")
        for future in self._replies.values():
            if not future.done():
                future.set_exception(gone)
        for _, waiter in self._event_waiters:
            if not waiter.done():
                waiter.set_exception(gone)

    async def request(self, command: str, *, timeout: float = 30.0, **arguments: Any) -> dict[str, Any]:
        """Send one command and wait (up to `timeout`) for its reply."""
        assert self.process.stdin is not None
        self._next += 1
        ident = self._next
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[ident] = future
        self.process.stdin.write(json.dumps({"id": ident, "cmd": command, **arguments}).encode() + b"\n")
        await self.process.stdin.drain()
        try:
            reply = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"load worker {self.name} did not answer {command!r} within {timeout:g} s") from None
        finally:
            self._replies.pop(ident, None)
        if "error" in reply:
            raise RuntimeError(f"load worker {self.name} failed {command!r}: {reply['error']}")
        return reply

    async def wait_event(
        self, predicate: Callable[[dict[str, Any]], bool], *, timeout: float, what: str
    ) -> dict[str, Any]:
        """The first event (past or future) matching `predicate`; `TimeoutError` naming `what` after `timeout`."""
        for event in self.events:
            if predicate(event):
                return event
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        entry = (predicate, future)
        self._event_waiters.append(entry)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"load worker {self.name}: no {what} within {timeout:g} s") from None
        finally:
            self._event_waiters.remove(entry)

    async def send(
        self,
        targets: Sequence[AgentId | str],
        count: int | None,
        *,
        rpc_every: int = 0,
        rpc_timeout: float = 10.0,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """Run `run_sender` in the process (continuing its sequence numbers) and return its `SenderReport` (as
        JSON) when done. `count=None` sends until `stop_sending()`."""
        return await self.request(
            "send",
            targets=[str(t) for t in targets],
            count=count,
            rpc_every=rpc_every,
            rpc_timeout=rpc_timeout,
            timeout=timeout,
        )

    async def stop_sending(self, timeout: float = 10.0) -> None:
        await self.request("stop_sending", timeout=timeout)

    async def sent(self, timeout: float = 10.0) -> dict[str, int]:
        """The next sequence number per stream so far (what has been attempted)."""
        reply = await self.request("sent", timeout=timeout)
        return dict(reply["sent"])

    async def report(self, timeout: float = 10.0) -> dict[str, Any]:
        """The process's `SequenceChecker` (JSON), its connection state and its RSS."""
        return await self.request("report", timeout=timeout)

    def rss_kb(self) -> int:
        return rss_kb(self.pid)

    def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def stop(self, timeout: float = 10.0) -> None:
        """Kill the process and wait for it (up to `timeout`)."""
        self.kill()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.process.wait(), timeout)
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader


async def wait_delivered(
    workers: Sequence[LoadWorkerProcess],
    expected: dict[str, int],
    *,
    timeout: float,
    since: dict[str, int] | None = None,
    poll: float = 0.1,
) -> ClusterTally:
    """Poll the workers' checkers until every stream in `expected` (key -> messages sent) has everything in
    `[since, expected)`, and return the merged tally. After `timeout`, `TimeoutError` listing what is missing."""
    deadline = time.monotonic() + timeout
    while True:
        reports = await asyncio.gather(*(w.report(timeout=max(1.0, deadline - time.monotonic())) for w in workers))
        tally = ClusterTally(r["checker"] for r in reports)
        incomplete = [
            k for k, n in expected.items() if tally.streams.get(k, StreamTally()).missing(n, (since or {}).get(k, 0))
        ]
        if not incomplete:
            return tally
        if time.monotonic() > deadline:
            problems = tally.problems({k: expected[k] for k in incomplete}, since=since)
            raise TimeoutError(
                f"not every message arrived within {timeout:g} s ({tally.received} received): "
                + "; ".join(problems[:20])
            )
        await asyncio.sleep(poll)


def merge_sender_reports(reports: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`SenderReport`s (JSON) of several processes added up: `sent`, `send_errors`, RPC counts."""
    merged: dict[str, Any] = {
        "sent": {}, "send_errors": {}, "undelivered": {}, "rpc_ok": 0, "rpc_wrong": [], "rpc_errors": {},
        "rpc_error_examples": {}, "rpc_max_seconds": 0.0,
    }  # fmt: skip
    for report in reports:
        merged["sent"].update(report["sent"])
        merged["send_errors"].update(report["send_errors"])
        for recipient, n in report["undelivered"].items():
            merged["undelivered"][recipient] = merged["undelivered"].get(recipient, 0) + n
        merged["rpc_ok"] += report["rpc_ok"]
        merged["rpc_wrong"] += report["rpc_wrong"]
        for kind, n in report["rpc_errors"].items():
            merged["rpc_errors"][kind] = merged["rpc_errors"].get(kind, 0) + n
        for kind, text in report["rpc_error_examples"].items():
            merged["rpc_error_examples"].setdefault(kind, text)
        merged["rpc_max_seconds"] = max(merged["rpc_max_seconds"], report["rpc_max_seconds"])
    return merged


# --- the worker process itself -----------------------------------------------------------------------------


class _WorkerMain:
    def __init__(self, runtime: GrpcAgentRuntime, name: str, report: SenderReport) -> None:
        self.runtime = runtime
        self.name = name
        self.checker = SequenceChecker()
        self.report = report
        self.stop = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    def emit(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def on_hold(self, agent_id: AgentId) -> None:
        self.emit({"event": "hold", "agent": str(agent_id)})

    async def command(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        try:
            result = await self.run(message)
        except Exception as exc:
            logger.exception("load worker %s: command %r failed", self.name, message.get("cmd"))
            self.emit({"reply": ident, "error": f"{type(exc).__name__}: {exc}"})
        else:
            self.emit({"reply": ident, **result})

    async def run(self, message: dict[str, Any]) -> dict[str, Any]:
        command = message.get("cmd")
        if command == "send":
            self.stop.clear()
            targets = [parse_agent_id(t) for t in message["targets"]]
            await run_sender(
                self.runtime,
                self.name,
                targets,
                message["count"],
                rpc_every=message.get("rpc_every", 0),
                rpc_timeout=message.get("rpc_timeout", 10.0),
                stop=self.stop,
                report=self.report,
            )
            return self.report.to_json()
        if command == "stop_sending":
            self.stop.set()
            return {}
        if command == "sent":
            return {"sent": dict(self.report.sent)}
        if command == "report":
            return {
                "checker": self.checker.to_json(),
                "sender": self.report.to_json(),
                "connected": self.runtime.connected,
                "address": self.runtime.address,
                "worker_id": self.runtime.worker_id,
                "rss_kb": rss_kb(),
            }
        raise ValueError(f"unknown command {command!r}")


async def _worker_main(args: argparse.Namespace) -> None:
    report = SenderReport()
    runtime = GrpcAgentRuntime(
        args.address,
        connect_timeout=args.connect_timeout,
        reconnect_backoff=args.reconnect_backoff,
        reconnect_max_backoff=1.0,
        on_undelivered=report.note_undelivered,
    )
    for message_type in MESSAGE_TYPES:
        runtime.register_message_type(message_type)
    async with runtime:
        main = _WorkerMain(runtime, args.name, report)
        for agent_type in args.host_type:
            await runtime.register_agent_factory(
                agent_type, lambda aid, rt: SequenceAgent(aid, rt, main.checker, main.on_hold)
            )
        main.emit(
            {
                "event": "ready",
                "name": args.name,
                "pid": os.getpid(),
                "worker_id": runtime.worker_id,
                "address": runtime.address,
            }
        )
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            task = loop.create_task(main.command(json.loads(line)))
            main.tasks.add(task)
            task.add_done_callback(main.tasks.discard)
        # stdin closed: the parent is gone.


def worker_main(argv: Sequence[str]) -> int:
    """`python -m ext.runtime.grpc.testing load-worker --name N --address A [--address B] [--host-type T]...`"""
    parser = argparse.ArgumentParser(prog="python -m ext.runtime.grpc.testing load-worker")
    parser.add_argument("--name", required=True, help="this worker's name as a sender")
    parser.add_argument("--address", action="append", required=True, help="gateway host:port (repeat: failover)")
    parser.add_argument("--host-type", action="append", default=[], help="host SequenceAgents of this type")
    parser.add_argument("--connect-timeout", type=float, default=5.0)
    parser.add_argument("--reconnect-backoff", type=float, default=0.05)
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(list(argv))
    logging.basicConfig(level=args.log_level, format=f"[{args.name}] %(levelname)s %(name)s: %(message)s")
    asyncio.run(_worker_main(args))
    return 0


def gather_reports(workers: Sequence[LoadWorkerProcess], timeout: float = 10.0) -> Awaitable[list[dict[str, Any]]]:
    """Every worker's `report()` at once."""
    return asyncio.gather(*(w.report(timeout=timeout) for w in workers))
