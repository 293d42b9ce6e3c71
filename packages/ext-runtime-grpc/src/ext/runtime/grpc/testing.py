"""Helpers for tests of apps built on the gRPC runtime: a gateway subprocess and a throwaway redis-server.

Both bind 127.0.0.1 only; call `kill()` / `stop()` in your fixture's teardown.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

REDIS_BINARY = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    process: subprocess.Popen[bytes]
    port: int
    directory: str

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def start_redis_server() -> RedisServer:
    """redis-server on 127.0.0.1 with an ephemeral port, a temp dir and no persistence."""
    if REDIS_BINARY is None:
        raise FileNotFoundError("redis-server is not installed (Debian: apt-get install -y redis-server)")
    directory = tempfile.mkdtemp(prefix="ext-redis-")
    port = free_port()
    process = subprocess.Popen(
        [
            REDIS_BINARY,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            directory,
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return RedisServer(process, port, directory)
        except OSError:
            time.sleep(0.02)  # polling a port that is not open yet; bounded by the deadline
    process.kill()
    raise RuntimeError("redis-server did not answer within 10 s")


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
