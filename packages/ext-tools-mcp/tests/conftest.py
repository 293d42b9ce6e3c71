"""Servers for the tests: the mcp-SDK server in `sdk_server.py` and the npm reference servers.

HTTP servers run as subprocesses bound to 127.0.0.1 on an ephemeral port (the child prints it), once
per test session. The npm packages are installed once into a cache folder (see `npm_servers`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ext_mcp_support import (
    NPM_CACHE,
    NPM_PACKAGES,
    TOKEN,
    NpmServers,
    spawn_sdk_http,
    stop_server,
    wait_for_port,
)


@pytest.fixture(scope="session")
def sdk_servers() -> Iterator[dict[str, str]]:
    """The SDK server over SSE and streamable HTTP, with and without a required token, started together."""
    kinds = {
        "sse": ("sse",),
        "http": ("http",),
        "sse_auth": ("sse", "--token", TOKEN),
        "http_auth": ("http", "--token", TOKEN),
    }
    procs = {name: spawn_sdk_http(*args) for name, args in kinds.items()}
    try:
        urls = {}
        for name, proc in procs.items():
            base = wait_for_port(proc)
            urls[name] = base + ("/sse" if name.startswith("sse") else "/mcp")
        yield urls
    finally:
        for proc in procs.values():
            stop_server(proc)


@pytest.fixture(scope="session")
def sdk_sse(sdk_servers: dict[str, str]) -> str:
    return sdk_servers["sse"]


@pytest.fixture(scope="session")
def sdk_http(sdk_servers: dict[str, str]) -> str:
    return sdk_servers["http"]


@pytest.fixture(scope="session")
def sdk_http_auth(sdk_servers: dict[str, str]) -> str:
    """The streamable HTTP server, answering 401 unless the bearer token is `TOKEN`."""
    return sdk_servers["http_auth"]


@pytest.fixture(scope="session")
def sdk_sse_auth(sdk_servers: dict[str, str]) -> str:
    return sdk_servers["sse_auth"]


# --- npm reference servers ----------------------------------------------------------------------


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
        pytest.fail(
            "node/npm not found on PATH: the npm reference-server tests need Node.js 18+ and npm "
            "(apt-get install -y nodejs npm; tools/test.sh installs them)"
        )
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
