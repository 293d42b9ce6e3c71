from __future__ import annotations

from collections.abc import Iterator

import pytest

from ext.testing.postgres import PostgresServer, start_postgres_server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL with pgvector for the session, on 127.0.0.1 with a password; fails (never skips) naming the
    package to install when pgserver is missing."""
    server = start_postgres_server()
    try:
        yield server
    finally:
        server.stop()
