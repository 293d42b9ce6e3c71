"""The load harness's worker processes: `LoadWorkerProcess` runs a `GrpcAgentRuntime` hosting `SequenceAgent`s
in its own OS process (`python -m ext.runtime.grpc.testing load-worker ...`), driven over JSON lines; the
process side is `worker_main`. `wait_delivered`, `gather_reports` and `merge_sender_reports` put the reports of
several processes together."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from ext.core import AgentId
from ext.runtime.grpc import GrpcAgentRuntime

from ._sequence import (
    MESSAGE_TYPES,
    ClusterTally,
    SenderReport,
    SequenceAgent,
    SequenceChecker,
    StreamTally,
    parse_agent_id,
    rss_kb,
    run_sender,
)

logger = logging.getLogger(__name__)


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
        state_redis_url: str | None = None,
        state_prefix: str = "ext",
    ) -> LoadWorkerProcess:
        """Start the process and wait (up to `timeout`) until it is connected with its types registered.
        `EXT_GRPC*` variables of this process are not passed on (give a token in `env` as `EXT_GRPC_TOKEN`).
        With `state_redis_url`, its agents keep their state in a `RedisStateStore` (saved after each message)."""
        args = [sys.executable, "-m", "ext.runtime.grpc.testing", "load-worker", "--name", name]
        if state_redis_url is not None:
            args += ["--state-redis-url", state_redis_url, "--state-prefix", state_prefix]
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
    store = None
    if args.state_redis_url:
        from ext.redis import RedisStateStore  # the [redis] extra: only a worker keeping state needs it

        store = RedisStateStore(args.state_redis_url, prefix=args.state_prefix)
    runtime = GrpcAgentRuntime(
        args.address,
        connect_timeout=args.connect_timeout,
        reconnect_backoff=args.reconnect_backoff,
        reconnect_max_backoff=1.0,
        on_undelivered=report.note_undelivered,
        state_store=store,
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
    if store is not None:
        await store.close()


def worker_main(argv: Sequence[str]) -> int:
    """`python -m ext.runtime.grpc.testing load-worker --name N --address A [--address B] [--host-type T]...`"""
    parser = argparse.ArgumentParser(prog="python -m ext.runtime.grpc.testing load-worker")
    parser.add_argument("--name", required=True, help="this worker's name as a sender")
    parser.add_argument("--address", action="append", required=True, help="gateway host:port (repeat: failover)")
    parser.add_argument("--host-type", action="append", default=[], help="host SequenceAgents of this type")
    parser.add_argument("--connect-timeout", type=float, default=5.0)
    parser.add_argument("--reconnect-backoff", type=float, default=0.05)
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--state-redis-url", help="keep the agents' state in this Redis (RedisStateStore)")
    parser.add_argument("--state-prefix", default="ext", help="the RedisStateStore's key prefix")
    args = parser.parse_args(list(argv))
    logging.basicConfig(level=args.log_level, format=f"[{args.name}] %(levelname)s %(name)s: %(message)s")
    asyncio.run(_worker_main(args))
    return 0


def gather_reports(workers: Sequence[LoadWorkerProcess], timeout: float = 10.0) -> Awaitable[list[dict[str, Any]]]:
    """Every worker's `report()` at once."""
    return asyncio.gather(*(w.report(timeout=timeout) for w in workers))
