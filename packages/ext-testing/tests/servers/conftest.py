from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import openai
import pytest

from ext.testing.servers import OpenAIServer


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


class RawConnection:
    """A hand-driven HTTP/1.1 client connection for tests that need exact bytes on the wire."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_response(self) -> RawResponse:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if status == 100:
            return RawResponse(status, headers, b"")
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n"))[:-2], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                body += await self.reader.readexactly(size)
                assert await self.reader.readexactly(2) == b"\r\n"
        elif "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        else:
            body = await self.reader.read()
        return RawResponse(status, headers, body)

    async def at_eof(self) -> bool:
        """Wait for the server to close the connection (True) or send more data (False)."""
        data = await asyncio.wait_for(self.reader.read(1), 5)
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


RawConnect = Callable[[int], Awaitable[RawConnection]]


@pytest.fixture
async def raw_connect() -> AsyncIterator[RawConnect]:
    connections: list[RawConnection] = []

    async def connect(port: int) -> RawConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conn = RawConnection(reader, writer)
        connections.append(conn)
        return conn

    yield connect
    for conn in connections:
        await conn.close()


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as srv:
        yield srv


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0) as c:
        yield c
