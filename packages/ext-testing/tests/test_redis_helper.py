"""`ext.testing.redis`: a throwaway redis-server, killed and restarted empty on the same port."""

from __future__ import annotations

import socket

import pytest

from ext.testing.redis import INSTALL_HINT, REDIS_BINARY, start_redis_server


def command(port: int, *parts: str) -> bytes:
    """One RESP command over a fresh connection; the raw reply."""
    payload = f"*{len(parts)}\r\n".encode() + b"".join(f"${len(p)}\r\n{p}\r\n".encode() for p in parts)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        return sock.recv(1024)


def test_restart_keeps_the_port_and_loses_the_data() -> None:
    if REDIS_BINARY is None:
        pytest.fail(INSTALL_HINT)
    server = start_redis_server()
    try:
        assert command(server.port, "SET", "k", "v") == b"+OK\r\n"
        assert command(server.port, "GET", "k") == b"$1\r\nv\r\n"
        first_pid = server.process.pid

        server.kill()
        with pytest.raises(OSError):
            command(server.port, "PING")

        server.restart()
        assert server.process.pid != first_pid
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        assert command(server.port, "GET", "k") == b"$-1\r\n"  # no persistence: an empty server
    finally:
        server.stop()
    assert server.process.poll() is not None
