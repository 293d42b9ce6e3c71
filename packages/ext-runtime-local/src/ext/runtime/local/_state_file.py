"""`FileStateStore`: agents' states in a directory, for the processes of one machine.

One file per agent (named by a hash of its id, so any key fits a file name), holding
`{"agent": "type/key", "version": n, "state": {...}}`. A write goes to a temporary file in the same directory,
is flushed to disk and renamed over the record (`os.replace` is atomic), so a reader or a crash sees the old
record or the new one, never half of one. The compare-and-set holds an exclusive `flock` on the directory's
lock file, so writers in several processes of this machine cannot both win.

Versions never repeat for an agent: `.deleted-version` holds the highest version a deleted record had (written
under the lock, before the record goes), and a new record starts one above it. A file that is not a record (a
full disk, an edit by hand) raises `StateCorruptError` naming the agent and the file; `keys()` skips it with a
warning naming the file, so the other agents are still listed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ext.core import (
    AgentId,
    AgentType,
    StateConflictError,
    StateCorruptError,
    StoredState,
    encode_state,
    expected_version_of,
    json_dumps_compact,
    json_loads,
    sorted_agent_ids,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: writers of one process are still serialized below
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileStateStore"]

logger = logging.getLogger(__name__)

_SUFFIX = ".state.json"
_LOCK_NAME = ".lock"
_DELETED_NAME = ".deleted-version"


class _Unreadable(ValueError):
    """A file that is not a state record; the message says why (never what it holds)."""


def _parse(data: bytes) -> tuple[AgentId, int, dict[str, Any]]:
    """The agent, version and state of a record file's bytes; `_Unreadable` when they are not one."""
    try:
        record = json_loads(data)
    except ValueError as exc:
        raise _Unreadable(f"not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise _Unreadable(f"a record is a JSON object, found {type(record).__name__}")
    version, state, agent = record.get("version"), record.get("state"), record.get("agent")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _Unreadable("its version is not a positive integer")
    if not isinstance(state, dict):
        raise _Unreadable("its state is not a JSON object")
    try:
        agent_id = AgentId.from_str(agent) if isinstance(agent, str) else None
    except (TypeError, ValueError):
        agent_id = None
    if agent_id is None:
        raise _Unreadable("its agent is not an agent id 'type/key'")
    return agent_id, version, state


class FileStateStore:
    """Agents' states as files under `directory` (created if missing). Safe for several processes of one
    machine (POSIX file locks); for several machines use `ext.redis.RedisStateStore`."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"directory must be a path, got {type(directory).__name__}")
        self._directory = Path(directory)
        self._directory.mkdir(parents=True, exist_ok=True)
        # Threads of this process take the file lock through separate opens, which flock serializes too; this
        # lock also covers platforms without flock.
        self._lock = asyncio.Lock()

    @property
    def directory(self) -> Path:
        return self._directory

    def _path(self, agent_id: AgentId) -> Path:
        digest = hashlib.sha256(str(agent_id).encode()).hexdigest()
        return self._directory / f"{digest}{_SUFFIX}"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self._directory / _LOCK_NAME, "a+b") as handle:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            yield  # closing the file releases the lock

    def _read(self, agent_id: AgentId) -> tuple[int, dict[str, Any]] | None:
        """The version and state of `agent_id`'s record (None when there is none); `StateCorruptError` naming
        the agent and the file when it is not a record of that agent."""
        path = self._path(agent_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            found, version, state = _parse(data)
            if found != agent_id:
                raise _Unreadable(f"it holds the record of {found}")
        except _Unreadable as exc:
            raise StateCorruptError(agent_id, str(path), str(exc)) from None
        return version, state

    def _deleted_version(self) -> int:
        path = self._directory / _DELETED_NAME
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        except ValueError:
            text = ""
        if not text.isdigit():
            # Without it a new record could take a version a stale writer still holds: refuse to guess.
            raise ValueError(
                f"{path} does not hold a version number: it keeps versions from repeating after a delete "
                "(write in it the highest version a record of this directory had)"
            )
        return int(text)

    def _write(self, path: Path, body: bytes) -> None:
        """`body` into `path`, atomically: a temp file in the directory, flushed to disk, renamed over it."""
        fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=self._directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    async def get(self, agent_id: AgentId) -> StoredState | None:
        record = await asyncio.to_thread(self._read, agent_id)
        return None if record is None else StoredState(record[1], record[0])

    async def put(self, agent_id: AgentId, state: Mapping[str, Any], expected_version: int | None) -> int:
        expected = expected_version_of(expected_version)
        data = encode_state(state)
        async with self._lock:
            return await asyncio.to_thread(self._put, agent_id, data, expected)

    def _put(self, agent_id: AgentId, data: bytes, expected: int | None) -> int:
        with self._locked():
            record = self._read(agent_id)
            found = None if record is None else record[0]
            if found != expected:
                raise StateConflictError(agent_id, expected, found)
            version = self._deleted_version() + 1 if found is None else found + 1
            body = b'{"agent":%s,"version":%d,"state":%s}' % (json_dumps_compact(str(agent_id)), version, data)
            self._write(self._path(agent_id), body)
        return version

    async def delete(self, agent_id: AgentId) -> None:
        async with self._lock:
            await asyncio.to_thread(self._delete, agent_id)

    def _delete(self, agent_id: AgentId) -> None:
        path = self._path(agent_id)
        with self._locked():
            try:
                record = self._read(agent_id)
            except StateCorruptError:
                record = None  # its version cannot be read: removed all the same, so the agent can start over
            if record is not None and record[0] > self._deleted_version():
                # First, so that a crash between the two steps leaves the record with the version raised.
                self._write(self._directory / _DELETED_NAME, b"%d\n" % record[0])
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    async def keys(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        return sorted_agent_ids(await asyncio.to_thread(self._ids), agent_type)

    def _ids(self) -> list[AgentId]:
        found: list[AgentId] = []
        for path in self._directory.glob(f"*{_SUFFIX}"):
            try:
                agent_id, _, _ = _parse(path.read_bytes())
            except FileNotFoundError:
                continue  # deleted meanwhile
            except _Unreadable as exc:
                logger.warning("skipping %s: not a state record (%s)", path, exc)
                continue
            if path != self._path(agent_id):
                logger.warning("skipping %s: it holds the record of %s, kept in another file", path, agent_id)
                continue
            found.append(agent_id)
        return found

    async def close(self) -> None:
        """Nothing stays open between calls."""

    def __repr__(self) -> str:
        return f"FileStateStore(directory={str(self._directory)!r})"
