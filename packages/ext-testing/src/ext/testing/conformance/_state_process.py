"""`StateStoreProcess`: a `StateStore` driven in a fresh Python interpreter, so `StateStoreConformance` can prove
what holds between writers in two processes (the same records, no shared memory).

The child runs the setup code it is given (which binds `store`), then answers one JSON line per command on stdin
(`get`, `put`, `delete`, `keys`) with one JSON line on stdout. Each call waits for its answer: the parent orders
the two processes' steps by their answers alone, never by sleeping."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from ext.core import AgentId, StateConflictError, StateCorruptError

__all__ = ["StateStoreProcess"]

_CHILD = r"""
import asyncio, json, sys
from ext.core import AgentId, StateConflictError, StateCorruptError

async def main():
    scope = {}
    exec(sys.argv[1], scope)
    store = scope["store"]
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            command = json.loads(line)
            op = command["op"]
            try:
                if op == "get":
                    record = await store.get(AgentId.from_str(command["agent"]))
                    answer = {"ok": None if record is None else [record.state, record.version]}
                elif op == "put":
                    version = await store.put(AgentId.from_str(command["agent"]), command["state"], command["expected"])
                    answer = {"ok": version}
                elif op == "delete":
                    await store.delete(AgentId.from_str(command["agent"]))
                    answer = {"ok": None}
                elif op == "keys":
                    answer = {"ok": [str(a) for a in await store.keys()]}
                else:
                    answer = {"error": "ValueError", "message": f"unknown op {op!r}"}
            except StateConflictError as exc:
                answer = {"error": "StateConflictError", "expected": exc.expected, "found": exc.found}
            except Exception as exc:
                answer = {"error": type(exc).__name__, "message": str(exc)}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    finally:
        await store.close()

asyncio.run(main())
"""


class StateStoreProcess:
    """A store in a child interpreter (see the module docstring). `await StateStoreProcess.start(setup)`, where
    `setup` is Python source binding `store`; then `get` / `put` / `delete` / `keys` as on a `StateStore`
    (`StateConflictError` and `StateCorruptError` are raised again here; any other failure in the child raises
    `RuntimeError` naming it); `close()` ends the child."""

    def __init__(self, process: asyncio.subprocess.Process, timeout: float) -> None:
        self._process = process
        self._timeout = timeout

    @classmethod
    async def start(cls, setup: str, *, timeout: float = 60.0) -> StateStoreProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            setup,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process, timeout)

    async def _call(self, command: dict[str, Any]) -> Any:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(command).encode() + b"\n")
        await self._process.stdin.drain()
        try:
            line = await asyncio.wait_for(self._process.stdout.readline(), self._timeout)
        except asyncio.TimeoutError:  # builtin TimeoutError on 3.11+, distinct on 3.10
            raise TimeoutError(f"the store process did not answer {command['op']} in {self._timeout} s") from None
        if not line:
            stderr = b""
            if self._process.stderr is not None:
                stderr = await asyncio.wait_for(self._process.stderr.read(), self._timeout)
            raise RuntimeError(f"the store process exited during {command['op']}: {stderr.decode()[-2000:]}")
        answer = json.loads(line)
        error = answer.get("error")
        if error == "StateConflictError":
            raise StateConflictError(AgentId.from_str(command["agent"]), answer["expected"], answer["found"])
        if error == "StateCorruptError":
            raise StateCorruptError(AgentId.from_str(command["agent"]), "in the store process", answer["message"])
        if error is not None:
            raise RuntimeError(f"the store process raised {error}: {answer['message']}")
        return answer["ok"]

    async def get(self, agent_id: AgentId) -> tuple[dict[str, Any], int] | None:
        found = await self._call({"op": "get", "agent": str(agent_id)})
        return None if found is None else (found[0], found[1])

    async def put(self, agent_id: AgentId, state: dict[str, Any], expected_version: int | None) -> int:
        version: int = await self._call(
            {"op": "put", "agent": str(agent_id), "state": state, "expected": expected_version}
        )
        return version

    async def delete(self, agent_id: AgentId) -> None:
        await self._call({"op": "delete", "agent": str(agent_id)})

    async def keys(self) -> list[AgentId]:
        return [AgentId.from_str(k) for k in await self._call({"op": "keys"})]

    async def close(self) -> None:
        """End the child (it closes its store when stdin closes); killed if it does not exit in time."""
        if self._process.returncode is not None:
            return
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), self._timeout)
        except asyncio.TimeoutError:  # builtin TimeoutError on 3.11+, distinct on 3.10
            self._process.kill()
            await self._process.wait()
