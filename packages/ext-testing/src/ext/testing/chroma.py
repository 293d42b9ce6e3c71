"""A throwaway Chroma server for tests: `chroma run` on 127.0.0.1, an ephemeral port, a temp dir.

The server is the one the `chromadb` package ships (its `chroma` command starts Chroma's own server binary). It
has no authentication of its own: tests that check a client's token use `ChromaTokenGate`, a loopback server
with Chroma's token check alone. `start_chroma_server()`
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ext.testing.redis import free_port
from ext.testing.servers import LoopbackServer, RecordedRequest, Response, Route, json_response

INSTALL_HINT = "the chroma command is not installed (pip install 'chromadb>=1.5,<2')"
COLLECTIONS = "/api/v2/tenants/default_tenant/databases/default_database/collections"
"""The collections of Chroma's default tenant and database (HTTP API v2)."""


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


class ChromaTokenGate(LoopbackServer):
    """Chroma's token authentication alone, for what the test server (no auth) cannot show: which token a client
    sends, and what it makes of a refusal.

    As chromadb's token authn (`chromadb/auth/token_authn`): the token comes in `X-Chroma-Token` or in
    `Authorization: Bearer`; a request without an accepted one is refused with `ChromaAuthError`
    (chromadb/errors.py: 403, {"error": "AuthError", "message": "Forbidden"}). Past the gate it serves only the
    collection lookup (GET `COLLECTIONS/{name}`), answering as Chroma does for a missing collection: 404
    {"error": "NotFoundError", "message": "Collection [name] does not exist"}. Every request is recorded.
    """

    def __init__(self, tokens: Sequence[str]) -> None:
        self.tokens = set(tokens)
        super().__init__()

    def routes(self) -> Sequence[Route]:
        return [Route("GET", COLLECTIONS + "/{name}", "get_collection", self._lookup)]

    def _lookup(self, request: RecordedRequest) -> Response:
        bearer = (request.headers.get("authorization") or "").removeprefix("Bearer ")
        if not {request.headers.get("x-chroma-token"), bearer} & self.tokens:
            return json_response({"error": "AuthError", "message": "Forbidden"}, status=403)
        message = f"Collection [{request.params['name']}] does not exist"
        return json_response({"error": "NotFoundError", "message": message}, status=404)
