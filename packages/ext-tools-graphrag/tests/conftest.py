"""Offline graphrag: litellm's bundled cost map and tokenizer files, and a guard that fails any test reaching
beyond 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _project import API_BASE_ENV, FIXTURE, offline_env, responder

os.environ.update(offline_env())  # before graphrag (and tiktoken) are imported

from ext.testing.graphrag import GraphRagServer

_LOOPBACK = {"127.0.0.1", "localhost", "::1", None}
_outside: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.getaddrinfo" and args[0] not in _LOOPBACK:
        _outside.append(f"DNS lookup of {args[0]!r}")
    elif event == "socket.connect" and isinstance(args[1], tuple) and args[1] and args[1][0] not in _LOOPBACK:
        _outside.append(f"connect to {args[1]!r}")


sys.addaudithook(_audit)


@pytest.fixture(autouse=True)
def no_network_beyond_loopback() -> Iterator[None]:
    _outside.clear()
    yield
    assert not _outside, f"a test reached beyond 127.0.0.1: {_outside}"


@pytest.fixture
async def server() -> AsyncIterator[GraphRagServer]:
    async with GraphRagServer(responder(), api_key="sk-loopback-not-a-secret") as srv:
        yield srv


@pytest.fixture
def project(tmp_path: Path, server: GraphRagServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed, graphrag-built index, its models pointed at `server`."""
    root = tmp_path / "riverton"
    shutil.copytree(FIXTURE, root)
    (root / ".env").write_text("GRAPHRAG_API_KEY=sk-loopback-not-a-secret\n", encoding="utf-8")
    monkeypatch.setenv(API_BASE_ENV, server.base_url + "/v1")
    monkeypatch.setenv("GRAPHRAG_API_KEY", "sk-loopback-not-a-secret")  # what .env says; restored afterwards
    return root
