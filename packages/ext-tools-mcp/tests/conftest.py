"""Servers for the tests: the mcp-SDK server in `sdk_server.py` and the npm reference servers.

HTTP servers run as subprocesses bound to 127.0.0.1 on an ephemeral port (the child prints it), once
per test session. The npm packages are installed once into a cache folder (see `npm_servers`).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ext_mcp_support import HERE, LOOPBACK_PRELOAD, SDK_SERVER, TOKEN  # noqa: E402

# Pinned so a new upstream release cannot change what the tests see.
NPM_PACKAGES = {
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "@modelcontextprotocol/server-memory": "2026.8.31",
}
NPM_CACHE = Path(os.environ.get("EXT_MCP_NPM_CACHE", HERE.parent / ".npm-servers"))


def _read_line(proc: subprocess.Popen[bytes], pattern: str, timeout: float) -> re.Match[bytes]:
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


def _stop(proc: subprocess.Popen[bytes]) -> None:
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


def start_sdk_http(kind: str, *extra: str) -> HttpServer:
    proc = subprocess.Popen(
        [sys.executable, SDK_SERVER, kind, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    port = int(_read_line(proc, r"PORT (\d+)", 30).group(1))
    return HttpServer(proc, f"http://127.0.0.1:{port}")


@pytest.fixture(scope="session")
def sdk_sse() -> Iterator[str]:
    server = start_sdk_http("sse")
    yield server.base + "/sse"
    _stop(server.proc)


@pytest.fixture(scope="session")
def sdk_http() -> Iterator[str]:
    server = start_sdk_http("http")
    yield server.base + "/mcp"
    _stop(server.proc)


@pytest.fixture(scope="session")
def sdk_http_auth() -> Iterator[str]:
    """The streamable HTTP server, answering 401 unless the bearer token is `TOKEN`."""
    server = start_sdk_http("http", "--token", TOKEN)
    yield server.base + "/mcp"
    _stop(server.proc)


@pytest.fixture(scope="session")
def sdk_sse_auth() -> Iterator[str]:
    server = start_sdk_http("sse", "--token", TOKEN)
    yield server.base + "/sse"
    _stop(server.proc)


# --- npm reference servers ----------------------------------------------------------------------


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


def _installed(root: Path) -> bool:
    for package, version in NPM_PACKAGES.items():
        meta = root / "node_modules" / package / "package.json"
        if not meta.exists() or json.loads(meta.read_text()).get("version") != version:
            return False
    return True


@pytest.fixture(scope="session")
def npm_servers() -> NpmServers:
    """The pinned npm servers, installed with `npm install --prefix` into a cache folder if missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node/npm not found on PATH: the npm reference-server tests need Node.js 18+ and npm")
    NPM_CACHE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if not _installed(NPM_CACHE):
        specs = [f"{name}@{version}" for name, version in NPM_PACKAGES.items()]
        proc = subprocess.run(
            [npm, "install", "--prefix", str(NPM_CACHE), "--no-audit", "--no-fund", "--loglevel=error", *specs],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"npm install failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return NpmServers(node, NPM_CACHE, time.monotonic() - started)


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
        env=clean_env(PORT=str(port), HOST="127.0.0.1"),
        start_new_session=True,
    )
    _read_line(proc, r"(?i)listening|running", 30)
    return HttpServer(proc, f"http://127.0.0.1:{port}")
