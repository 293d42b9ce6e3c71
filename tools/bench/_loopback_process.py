"""ext-testing's loopback OpenAI servers in a process of their own, for benchmarks that time a client.

A server sharing the client's event loop (or its process, under the GIL) takes turns with the code under test:
whatever the server still has to do after sending a reply (closing the response, reading the next request) runs
before the client's next awaited I/O completes, so a Redis reply that arrives meanwhile waits behind it, and the
middleware making that round trip is charged for the server's work. In a separate process the two only share the
machine's cores.

Use::

    async with loopback_servers({"ok": "reply", "failing": "server_error"}) as urls:
        urls["ok"]  # "http://127.0.0.1:PORT"

Each value is ``"reply"`` (always the same short answer, 9 + 9 tokens) or a ``Fault`` kind. The child prints one
JSON line of base URLs and serves until its stdin closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any, cast

KEY = "sk-bench"


async def _serve(kinds: dict[str, str]) -> None:
    from ext.testing.script import FAULT_KINDS, Fault, Reply
    from ext.testing.servers import OpenAIServer

    reply = Reply(text="Hello! How can I help you today?", prompt_tokens=9, completion_tokens=9)

    def answer(kind: str) -> Reply | Fault:
        if kind == "reply":
            return reply
        if kind not in FAULT_KINDS:
            raise SystemExit(f"a server kind must be 'reply' or one of {sorted(FAULT_KINDS)}, got {kind!r}")
        return Fault(cast("Any", kind))

    servers = {name: OpenAIServer(api_key=KEY, default=answer(kind), record=False) for name, kind in kinds.items()}
    async with contextlib.AsyncExitStack() as stack:
        for server in servers.values():
            await stack.enter_async_context(server)
        print(json.dumps({name: server.base_url for name, server in servers.items()}), flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


@contextlib.asynccontextmanager
async def loopback_servers(kinds: dict[str, str]) -> AsyncIterator[dict[str, str]]:
    """Start the servers in a child process (this interpreter); yield their base URLs; stop them on exit."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        json.dumps(kinds),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
        if not line:
            raise SystemExit("the loopback server process exited before listening")
        urls: dict[str, Any] = json.loads(line)
        yield urls
    finally:
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            process.kill()
            await process.wait()


if __name__ == "__main__":
    asyncio.run(_serve(json.loads(sys.argv[1])))
