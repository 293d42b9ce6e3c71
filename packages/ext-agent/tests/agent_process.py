"""A ChatAgent in its own process, for the tests that continue sessions across processes and kill processes.

Usage: python agent_process.py BASE_URL STORE SESSION COMMAND [ARG]

- STORE: a `redis://` URL (RedisStateStore) or a directory (FileStateStore).
- COMMAND: `run TEXT`, `resume`, `approve CALL_ID`, `deny CALL_ID` (then resume), or
  `host GATEWAY_ADDRESS` (host the agent on a gRPC worker as type `assistant` until killed).
- An exception ends the process with status 3 after a line `{"event": "error", "type": ..., "message": ...}`.
- Environment: `COUNTER` (the file the tools count their invocations in), `BLOCK_TOOL` (a tool name that
  blocks forever once it is invoked in this process), `WAIT_AFTER=1` (wait forever after the run, to be killed).

Prints JSON lines: each event of the run (`{"event": "ToolFinished", "name": ...}`), `{"event": "blocked", ...}`
when the blocking tool starts waiting, `{"event": "ready"}` when hosting, and the result last.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from ext.agent import AgentEvent, ChatAgent, RunFinished, RunResult, ToolFinished, ToolStarted
from ext.core import FunctionTool, StateStore
from ext.redis import RedisStateStore
from ext.runtime.local import FileStateStore


def emit(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def tool(name: str, counter: Path, block: bool) -> FunctionTool:
    def run(text: str) -> str:  # sync: runs in a thread, so a blocked call leaves the event loop free
        with counter.open("a", encoding="utf-8") as f:
            f.write(f"{name} {os.getpid()}\n")
            f.flush()
            os.fsync(f.fileno())
        if block:
            emit({"event": "blocked", "name": name})
            threading.Event().wait()
        return f"{name} did {text}"

    return FunctionTool(run, name=name, description=f"The {name} tool.")


def make_agent(base_url: str, store: StateStore) -> ChatAgent[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ext_agent_support import openai_client

    counter = Path(os.environ.get("COUNTER", os.devnull))
    blocking = os.environ.get("BLOCK_TOOL", "")
    tools = [tool(name, counter, name == blocking) for name in ("alpha", "beta", "charge")]
    return ChatAgent(
        openai_client(base_url),
        name="assistant",
        instructions="You are a careful assistant.",
        tools=tools,
        store=store,
        require_approval=["charge"],
    )


def show(event: AgentEvent[Any]) -> None:
    if isinstance(event, (ToolStarted, ToolFinished)):
        emit({"event": type(event).__name__, "name": event.call.name, "id": event.call.id})
    elif isinstance(event, RunFinished):
        emit(result_json(event.result))


def result_json(result: RunResult[Any]) -> dict[str, Any]:
    return {
        "event": "result",
        "status": result.status,
        "text": result.text,
        "pending": [p.call_id for p in result.pending],
        "version": result.version,
        "pid": os.getpid(),
    }


async def main(base_url: str, store_arg: str, session_id: str, command: str, arg: str | None) -> None:
    store: StateStore = RedisStateStore(store_arg) if store_arg.startswith("redis://") else FileStateStore(store_arg)
    agent = make_agent(base_url, store)
    async with agent:
        if command == "host":
            from ext.runtime.grpc import GrpcAgentRuntime

            assert arg is not None
            async with GrpcAgentRuntime(arg, token_env=None, connect_timeout=10) as worker:
                await agent.register(worker, "assistant")
                emit({"event": "ready"})
                await asyncio.Event().wait()
        session = agent.session(session_id)
        if command == "run":
            assert arg is not None
            async for event in session.run_stream(arg):
                show(event)
        elif command == "resume":
            async for event in session.resume_stream():
                show(event)
        elif command in ("approve", "deny"):
            assert arg is not None
            if command == "approve":
                await session.approve(arg)
            else:
                await session.deny(arg, "refused by the operator")
            async for event in session.resume_stream():
                show(event)
        else:
            raise SystemExit(f"unknown command {command!r}")
        if os.environ.get("WAIT_AFTER") == "1":
            emit({"event": "waiting"})
            await asyncio.Event().wait()
    await store.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    try:
        asyncio.run(main(args[0], args[1], args[2], args[3], args[4] if len(args) > 4 else None))
    except Exception as exc:  # reported to the test, which asserts on it
        emit({"event": "error", "type": type(exc).__name__, "message": str(exc)})
        raise SystemExit(3) from None
