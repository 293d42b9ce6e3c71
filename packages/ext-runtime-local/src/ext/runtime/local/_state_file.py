"""`FileStateStore`: agents' states in a directory, for the processes of one machine.

One file per agent (named by a hash of its id, so any key fits a file name), holding
`{"agent": "type/key", "version": n, "state": {...}}`. A write goes to a temporary file in the same directory,
is flushed to disk and renamed over the record (`os.replace` is atomic), so a reader or a crash sees the old
record or the new one, never half of one. The compare-and-set holds an exclusive `flock` on the directory's
lock file, so writers in several processes of this machine cannot both win.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ext.core import (
    AgentId,
    AgentType,
    StateConflictError,
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

_SUFFIX = ".state.json"
_LOCK_NAME = ".lock"


class FileStateStore:
    """Agents' states as files under `directory` (created if missing). Safe for several processes of one
    machine (POSIX file locks); for several machines use `ext.runtime.grpc.RedisStateStore`."""

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

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        record = json_loads(data)
        if not isinstance(record, dict) or not isinstance(record.get("version"), int):
            raise ValueError(f"{path} is not a state record")
        return record

    async def get(self, agent_id: AgentId) -> StoredState | None:
        record = await asyncio.to_thread(self._read, self._path(agent_id))
        if record is None:
            return None
        state = record.get("state")
        if not isinstance(state, dict):
            raise ValueError(f"the state record of {agent_id} holds no JSON object")
        return StoredState(state, record["version"])

    async def put(self, agent_id: AgentId, state: Mapping[str, Any], expected_version: int | None) -> int:
        expected = expected_version_of(expected_version)
        data = encode_state(state)
        async with self._lock:
            return await asyncio.to_thread(self._put, agent_id, data, expected)

    def _put(self, agent_id: AgentId, data: bytes, expected: int | None) -> int:
        path = self._path(agent_id)
        with self._locked():
            record = self._read(path)
            found = None if record is None else int(record["version"])
            if found != expected:
                raise StateConflictError(agent_id, expected, found)
            version = 1 if found is None else found + 1
            body = b'{"agent":%s,"version":%d,"state":%s}' % (json_dumps_compact(str(agent_id)), version, data)
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
        return version

    async def delete(self, agent_id: AgentId) -> None:
        async with self._lock:
            await asyncio.to_thread(self._delete, self._path(agent_id))

    def _delete(self, path: Path) -> None:
        with self._locked(), contextlib.suppress(FileNotFoundError):
            path.unlink()

    async def keys(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        return sorted_agent_ids(await asyncio.to_thread(self._ids), agent_type)

    def _ids(self) -> list[AgentId]:
        found: list[AgentId] = []
        for path in self._directory.glob(f"*{_SUFFIX}"):
            record = self._read(path)
            if record is not None:
                found.append(AgentId.from_str(record["agent"]))
        return found

    async def close(self) -> None:
        """Nothing stays open between calls."""

    def __repr__(self) -> str:
        return f"FileStateStore(directory={str(self._directory)!r})"
