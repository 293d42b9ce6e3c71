from __future__ import annotations

from collections.abc import Iterator

import pytest

from ext.testing.chroma import ChromaServer, start_chroma_server


@pytest.fixture(scope="session")
def chroma() -> Iterator[ChromaServer]:
    """One real Chroma server (`chroma run`) for the session, on 127.0.0.1; fails (never skips) naming the package to
    install when the chroma command is missing."""
    server = start_chroma_server()
    try:
        yield server
    finally:
        server.stop()
