"""Constants shared by the tests and the test server (imported by name: conftest puts this folder on sys.path)."""

from __future__ import annotations

import base64
import json
import os
import re
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
SDK_SERVER = str(HERE / "sdk_server.py")
LOOPBACK_PRELOAD = str(HERE / "loopback.cjs")
TOKEN = "test-token-123"
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PNG = base64.b64decode(PNG_B64)
WAV = (  # an empty 8 kHz mono 16-bit WAV file
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00\x80>\x00\x00\x02\x00\x10\x00"
    b"data\x00\x00\x00\x00"
)


def read_line(proc: subprocess.Popen[bytes], pattern: str, timeout: float) -> re.Match[bytes]:
    """Read the child's stdout until a line matches `pattern` (bounded by `timeout`)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
            match = re.search(pattern.encode(), line)
            if match:
                return match
    proc.kill()
    raise RuntimeError(f"server did not print {pattern!r} within {timeout} s; output: {seen[-2000:]!r}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()


@dataclass
class HttpServer:
    proc: subprocess.Popen[bytes]
    base: str


def spawn_sdk_http(kind: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, SDK_SERVER, kind, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )


def wait_for_port(proc: subprocess.Popen[bytes]) -> str:
    """The base URL once the child printed its port."""
    port = int(read_line(proc, r"PORT (\d+)", 30).group(1))
    return f"http://127.0.0.1:{port}"


def start_sdk_http(kind: str, *extra: str) -> HttpServer:
    proc = spawn_sdk_http(kind, *extra)
    return HttpServer(proc, wait_for_port(proc))


# Pinned so a new upstream release cannot change what the tests see.
NPM_PACKAGES = {
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "@modelcontextprotocol/server-memory": "2026.8.31",
}
NPM_CACHE = Path(os.environ.get("EXT_MCP_NPM_CACHE", HERE.parent / ".npm-servers"))


@dataclass
class NpmServers:
    node: str
    root: Path
    install_seconds: float

    def script(self, package: str) -> str:
        """The package's executable entry (run with node, no npx)."""
        pkg_dir = self.root / "node_modules" / package
        meta = json.loads((pkg_dir / "package.json").read_text())
        bin_field = meta["bin"]
        entry = bin_field if isinstance(bin_field, str) else next(iter(bin_field.values()))
        return str(pkg_dir / entry)


def clean_env(**extra: str) -> dict[str, str]:
    """A minimal environment for npm servers (server-everything's get-env tool prints it)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(NPM_CACHE)}
    env.update(extra)
    return env


def start_npm_http(npm: NpmServers, package: str, mode: str) -> HttpServer:
    """server-everything in `sse` or `streamableHttp` mode on 127.0.0.1 and a free port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [npm.node, "--require", LOOPBACK_PRELOAD, npm.script(package), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=clean_env(PORT=str(port)),
        start_new_session=True,
    )
    read_line(proc, r"(?i)listening|running", 30)
    return HttpServer(proc, f"http://127.0.0.1:{port}")
