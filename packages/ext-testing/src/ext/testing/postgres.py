"""A throwaway PostgreSQL with the pgvector extension for tests: 127.0.0.1, an ephemeral port, a temp dir,
password authentication (scram-sha-256).

The server comes from the `pgserver` wheel, which bundles PostgreSQL and pgvector (Debian's PostgreSQL has no
pgvector package here). `start_postgres_server()` raises `FileNotFoundError` naming the package to install when
`pgserver` is missing, so a test that needs it fails saying what is missing. PostgreSQL refuses to run as root:
under root the server runs as the system user `pgserver` (created if missing, as pgserver itself does). Call
`stop()` in teardown.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from ext.testing.redis import free_port

INSTALL_HINT = (
    "the pgserver wheel is not installed (pip install 'ext-testing[postgres]', or 'pgserver>=0.1.4,<0.2'; "
    "CPython 3.10 to 3.12)"
)
PASSWORD = "pg-test-secret-8c1f"
"""The password of the `postgres` user of every server this module starts (tests check it never leaks)."""


@dataclass
class PostgresServer:
    """A running PostgreSQL (see `start_postgres_server`)."""

    directory: Path
    port: int
    user: str | None

    @property
    def url(self) -> str:
        """The URL with the password in it (what a user would paste)."""
        return f"postgresql://postgres:{PASSWORD}@127.0.0.1:{self.port}/postgres"

    @property
    def url_without_password(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        """Stop the server at once (idempotent) and remove its directory."""
        import pgserver

        if (self.directory / "data" / "postmaster.pid").exists():
            pgserver.pg_ctl(["-m", "immediate", "stop"], pgdata=self.directory / "data", user=self.user, timeout=30)
        shutil.rmtree(self.directory, ignore_errors=True)


def _open_to(path: Path, user: str) -> None:
    # The server runs as another system user: it must traverse to the binaries and own its directory.
    import pwd

    for parent in reversed(path.parents):
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def start_postgres_server() -> PostgresServer:
    """Start PostgreSQL (with pgvector available) on 127.0.0.1 and an ephemeral port; returns once it accepts
    connections (pg_ctl waits, up to 60 s)."""
    try:
        with warnings.catch_warnings():
            # pgserver asks platformdirs for a runtime dir at import and warns when XDG_RUNTIME_DIR is unset
            # (CI, containers); this helper never uses that dir.
            warnings.simplefilter("ignore")
            import pgserver
            from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists
    except ImportError as exc:
        raise FileNotFoundError(INSTALL_HINT) from exc
    binaries = Path(pgserver.__file__).parent / "pginstall"
    directory = Path(tempfile.mkdtemp(prefix="ext-postgres-"))
    user: str | None = None
    if os.geteuid() == 0:
        user = "pgserver"
        ensure_user_exists(user)
        ensure_prefix_permissions(binaries / "bin")
        ensure_folder_permissions(binaries / "bin", stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(binaries / "lib", stat.S_IRGRP | stat.S_IROTH)
    password_file = directory / "password"
    password_file.write_text(PASSWORD)
    if user is not None:
        _open_to(directory, user)
    port = free_port()
    try:
        pgserver.initdb(
            ["--auth=scram-sha-256", f"--pwfile={password_file}", "-U", "postgres", "--encoding=utf8"],
            pgdata=directory / "data",
            user=user,
            timeout=120,
        )
        pgserver.pg_ctl(
            ["-w", "-t", "60", "-o", f"-h 127.0.0.1 -p {port} -k {directory}", "-l", str(directory / "log"), "start"],
            pgdata=directory / "data",
            user=user,
            timeout=90,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log = directory / "log"
        detail = log.read_text() if log.exists() else str(exc)
        shutil.rmtree(directory, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {detail[-2000:]}") from exc
    return PostgresServer(directory=directory, port=port, user=user)
