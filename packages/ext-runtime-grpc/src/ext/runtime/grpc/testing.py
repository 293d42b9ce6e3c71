"""Helpers for tests of apps built on the gRPC runtime: a gateway subprocess.

It binds 127.0.0.1 only; call `kill()` in your fixture's teardown. A throwaway redis-server (for replicas sharing
a registry) is `ext.testing.redis.start_redis_server` in ext-testing.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from dataclasses import dataclass


@dataclass
class GatewayProcess:
    process: subprocess.Popen[str]
    port: int

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
    return GatewayProcess(process, int(line))
