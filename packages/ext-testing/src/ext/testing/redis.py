"""A throwaway `redis-server` for tests: 127.0.0.1, an ephemeral port, a temp dir, no persistence.

Used by the tests of ext-runtime-grpc (gateway replicas sharing a registry) and ext-redis (its stores).
`start_redis_server()` raises `FileNotFoundError` naming the package to install when there is no `redis-server` on
PATH, so a test that needs it fails saying what is missing. Call `stop()` in teardown.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass

REDIS_BINARY = shutil.which("redis-server")
INSTALL_HINT = "redis-server is not installed (Debian: apt-get install -y redis-server)"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A running `redis-server` process (see `start_redis_server`)."""

    process: subprocess.Popen[bytes]
    port: int
    directory: str

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        """Kill the server (idempotent) and remove its directory."""
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def kill(self) -> None:
        """Kill the server process (SIGKILL; idempotent), keeping its port and directory for `restart`. With
        no persistence, everything it held is gone."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def restart(self) -> None:
        """Kill the server if it runs, and start a fresh one on the same port (empty: no persistence); returns
        once it answers (up to 10 s). Clients see their connections drop, then the same URL answer again."""
        self.kill()
        self.process = _spawn(self.port, self.directory)


def start_redis_server(port: int | None = None) -> RedisServer:
    """Start `redis-server` on 127.0.0.1 (`port`, or an ephemeral one) and wait (up to 10 s) until it answers."""
    if REDIS_BINARY is None:
        raise FileNotFoundError(INSTALL_HINT)
    directory = tempfile.mkdtemp(prefix="ext-redis-")
    port = free_port() if port is None else port
    try:
        process = _spawn(port, directory)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return RedisServer(process, port, directory)


def _spawn(port: int, directory: str) -> subprocess.Popen[bytes]:
    """Start `redis-server` on `port` and wait (up to 10 s) until it answers PING."""
    if REDIS_BINARY is None:
        raise FileNotFoundError(INSTALL_HINT)
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
                    return process
        except OSError:
            time.sleep(0.02)  # polling a port that is not open yet; bounded by the deadline
    process.kill()
    process.wait(timeout=10)
    raise RuntimeError("redis-server did not answer within 10 s")
