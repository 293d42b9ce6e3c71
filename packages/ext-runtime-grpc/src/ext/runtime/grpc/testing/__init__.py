"""Helpers for tests of apps built on the gRPC runtime: a gateway subprocess, and a load harness.

`start_gateway_process` binds 127.0.0.1 only; call `kill()` in your fixture's teardown. A throwaway redis-server
(for replicas sharing a registry) is `ext.testing.redis.start_redis_server` in ext-testing.

The load harness (used by this package's load and failover tests and by `tools/bench/soak_cluster.py`):
sequence-numbered messages (`Seq`, `SeqCall`, `Hold`), `SequenceAgent` recording them in a `SequenceChecker`
(gaps, duplicates and out-of-order arrivals per sender -> recipient stream), `run_sender`, workers as separate
OS processes (`LoadWorkerProcess`, run as `python -m ext.runtime.grpc.testing load-worker ...`) driven over
JSON lines, `wait_delivered` / `ClusterTally` to merge their reports, and `rss_kb(pid)` (VmRSS).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass, field

from ._load import (
    LoadWorkerProcess,
    gather_reports,
    merge_sender_reports,
    wait_delivered,
)
from ._sequence import (
    MESSAGE_TYPES,
    ClusterTally,
    Hold,
    SenderReport,
    Seq,
    SeqCall,
    SequenceAgent,
    SequenceChecker,
    StreamRecord,
    StreamTally,
    expected_answer,
    parse_agent_id,
    rss_kb,
    run_sender,
    stream_key,
)

__all__ = [
    "MESSAGE_TYPES",
    "ClusterTally",
    "GatewayProcess",
    "Hold",
    "LoadWorkerProcess",
    "SenderReport",
    "Seq",
    "SeqCall",
    "SequenceAgent",
    "SequenceChecker",
    "StreamRecord",
    "StreamTally",
    "expected_answer",
    "gather_reports",
    "merge_sender_reports",
    "parse_agent_id",
    "rss_kb",
    "run_sender",
    "start_gateway_process",
    "stream_key",
    "wait_delivered",
]


@dataclass
class GatewayProcess:
    """A gateway started by `start_gateway_process`. Its stderr (the log) is read continuously, so a gateway
    that logs a lot under faults never blocks on a full pipe; `log_tail()` gives the last lines."""

    process: subprocess.Popen[str]
    port: int
    log: deque[str] = field(default_factory=lambda: deque(maxlen=500))

    def log_tail(self) -> str:
        """The last (up to 500) lines the gateway logged."""
        return "".join(self.log)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def terminate(self, timeout: float = 15) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)


def start_gateway_process(*args: str, env: dict[str, str] | None = None, port: int = 0) -> GatewayProcess:
    """Run `python -m ext.runtime.grpc gateway --port PORT ARGS...` and wait (up to 30 s) for the bound port
    it prints. `EXT_GRPC*` variables of this process are not passed on; `env` adds variables."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EXT_GRPC")}
    full_env.update(env or {})
    process = subprocess.Popen(
        [sys.executable, "-m", "ext.runtime.grpc", "gateway", "--port", str(port), "--log-level", "WARNING", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    ready = selector.select(timeout=30)
    selector.close()
    line = process.stdout.readline().strip() if ready else ""
    if not line.isdigit():
        process.kill()
        _, err = process.communicate(timeout=10)
        raise RuntimeError(f"gateway did not start: {line!r} {err[-2000:]}")
    gateway = GatewayProcess(process, int(line))
    threading.Thread(target=_drain, args=(process, gateway.log), daemon=True).start()
    return gateway


def _drain(process: subprocess.Popen[str], log: deque[str]) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        log.append(line)
