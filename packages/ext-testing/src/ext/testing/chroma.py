"""A throwaway Chroma server for tests: `chroma run` on 127.0.0.1, an ephemeral port, a temp dir.

The server is the one the `chromadb` package ships (its `chroma` command starts Chroma's own server binary). It
has no authentication of its own: tests that check a store's token use a proxy in front of it. `start_chroma_server()`
raises `FileNotFoundError` naming the package to install when there is no `chroma` command, so a test that needs it
fails saying what is missing. Call `stop()` in teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ext.testing.redis import free_port

INSTALL_HINT = "the chroma command is not installed (pip install 'chromadb>=1.5,<2')"


def chroma_command() -> str | None:
    """The `chroma` command of this interpreter's environment (else the one on PATH), or None."""
    beside = Path(sys.executable).parent / "chroma"
    if beside.exists():
        return str(beside)
    return shutil.which("chroma")


@dataclass
class ChromaServer:
    """A running Chroma server process (see `start_chroma_server`)."""

    process: subprocess.Popen[bytes]
    port: int
    directory: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        """What the server wrote so far (its last 4000 characters)."""
        path = self.directory / "server.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self) -> None:
        """Kill the server (idempotent) and remove its directory."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as response:
            return "nanosecond heartbeat" in json.loads(response.read())
    except (OSError, ValueError):
        return False


def start_chroma_server(timeout: float = 60.0) -> ChromaServer:
    """Start `chroma run` on 127.0.0.1 and an ephemeral port, persisting to a temp dir; returns once its heartbeat
    answers (about 2 s here; up to `timeout` s on a busy machine)."""
    command = chroma_command()
    if command is None:
        raise FileNotFoundError(INSTALL_HINT)
    directory = Path(tempfile.mkdtemp(prefix="ext-chroma-"))
    port = free_port()
    # The client library's product telemetry is off in the server's environment too (no network here, and none wanted).
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    with (directory / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [command, "run", "--path", str(directory / "data"), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    server = ChromaServer(process, port, directory)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            detail = server.log()
            server.stop()
            raise RuntimeError(f"chroma run exited with {process.returncode}: {detail}")
        if _answers(server.url):
            return server
        time.sleep(0.05)  # polling a port that is not open yet; bounded by the deadline
    detail = server.log()
    server.stop()
    raise RuntimeError(f"chroma run did not answer within {timeout} s: {detail}")
