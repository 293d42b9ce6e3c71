"""What the AutoGen interop tests share: finding the `autogen` hatch environment's python, and `Peer`, a worker
process (AutoGen's or ext's) driven by JSON lines (see autogen_side/autogen_peer.py for the commands)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AUTOGEN_PEER = HERE / "autogen_side" / "autogen_peer.py"
AUTOGEN_HOST = HERE / "autogen_side" / "autogen_host.py"
EXT_PEER = HERE / "ext_peer.py"
EXT_PYTHON = sys.executable

# How long a test waits for a line a process must print (a failure guard, not a measurement).
LINE_TIMEOUT = 60.0

_INSTALL_HINT = (
    "the AutoGen interop tests need AutoGen 0.7.5's own runtime in the `autogen` hatch environment: run "
    "`hatch env create autogen` (tools/test.sh does), or set EXT_AUTOGEN_PYTHON to a python with "
    "autogen-ext[grpc]==0.7.5 installed"
)


def find_autogen_python() -> str:
    """The python of the `autogen` hatch environment (created when missing), or EXT_AUTOGEN_PYTHON."""
    explicit = os.environ.get("EXT_AUTOGEN_PYTHON")
    if explicit:
        return explicit
    hatch = shutil.which("hatch")
    if hatch is None:
        raise RuntimeError(f"hatch is not on PATH; {_INSTALL_HINT}")
    root = HERE.parents[2]
    created = subprocess.run([hatch, "env", "create", "autogen"], cwd=root, capture_output=True, text=True)
    if created.returncode != 0:
        raise RuntimeError(f"`hatch env create autogen` failed: {created.stderr.strip()[-2000:]}; {_INSTALL_HINT}")
    found = subprocess.run([hatch, "env", "find", "autogen"], cwd=root, capture_output=True, text=True, check=True)
    python = Path(found.stdout.strip()) / "bin" / "python"
    if not python.is_file():
        raise RuntimeError(f"no python at {python}; {_INSTALL_HINT}")
    return str(python)


def free_port() -> int:
    """A port nothing listens on now (for AutoGen's host, which does not report the port it bound)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Peer:
    """A worker process speaking JSON lines: commands on stdin, replies (by id) and events on stdout."""

    def __init__(self, process: asyncio.subprocess.Process, name: str) -> None:
        self.process = process
        self.name = name
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def start(cls, python: str, script: Path, *args: str, name: str = "") -> Peer:
        process = await asyncio.create_subprocess_exec(
            python,
            str(script),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        peer = cls(process, name or script.stem)
        ready = await peer.next_event()
        assert ready["event"] == "ready", ready
        return peer

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                break
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a library's own print
            if "event" in item:
                await self.events.put(item)
            else:
                future = self._replies.pop(item.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(item)
        await self.events.put({"event": "exited"})

    async def next_event(self) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(self.events.get(), LINE_TIMEOUT)
        except asyncio.TimeoutError:
            raise AssertionError(f"{self.name} printed no event within {LINE_TIMEOUT:g} s") from None

    async def wait_event(self, kind: str) -> dict[str, Any]:
        while True:
            event = await self.next_event()
            if event["event"] == kind:
                return event
            if event["event"] == "exited":
                raise AssertionError(f"{self.name} exited before {kind!r}")

    def command(self, **op: Any) -> asyncio.Future[dict[str, Any]]:
        """Send a command; the future gets its reply."""
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = future
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps({**op, "id": request_id}) + "\n").encode())
        return future

    async def reply(self, future: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(future, LINE_TIMEOUT)
        except asyncio.TimeoutError:
            raise AssertionError(f"{self.name} gave no reply within {LINE_TIMEOUT:g} s") from None

    async def call(self, target: tuple[str, str], message: str, text: str, wait: float = 30.0) -> dict[str, Any]:
        return await self.reply(self.command(op="call", target=list(target), message=message, text=text, wait=wait))

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def close(self) -> None:
        if self.process.returncode is None:
            assert self.process.stdin is not None
            with contextlib.suppress(Exception):
                self.process.stdin.write(b'{"op": "exit"}\n')
                self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except asyncio.TimeoutError:
                self.kill()
                await self.process.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


PeerFactory = Callable[..., Coroutine[Any, Any, Peer]]
"""`peers["autogen"]` / `peers["ext"]` (conftest): start a worker process given its gateway address and arguments."""


def describe_protocol(file: Any) -> dict[str, Any]:
    """A protocol's `FileDescriptorProto` as plain data: each message's fields (name, number, type, label, type
    name, oneof, proto3 optional) and each service method. Both environments run it: AutoGen's on its generated
    code (autogen_side/dump_protocol.py), ext's on ours."""
    messages: dict[str, list[list[Any]]] = {}

    def walk(prefix: str, message: Any) -> None:
        name = f"{prefix}{message.name}"
        messages[name] = [
            [
                f.name,
                f.number,
                f.type,
                f.label,
                f.type_name,
                message.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else "",
                f.proto3_optional,
            ]
            for f in message.field
        ]
        for nested in message.nested_type:
            walk(f"{name}.", nested)

    for message in file.message_type:
        walk("", message)
    methods = [
        [s.name, m.name, m.input_type, m.output_type, m.client_streaming, m.server_streaming]
        for s in file.service
        for m in s.method
    ]
    return {"package": file.package, "messages": messages, "methods": methods}
