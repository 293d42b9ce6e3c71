"""Helpers for the ext-cli tests: run the `ext` command as a real process."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KEY = "sk-cli-test-0123456789"
MCP_SERVER = f"{sys.executable} {HERE / 'cli_mcp_server.py'}"


@dataclass
class Ran:
    code: int
    out: str
    err: str


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for an `ext` process: no developer keys or endpoints, plus `extra`."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_", "ANTHROPIC_", "AWS_", "OLLAMA_"))
    }
    env.update(extra)
    return env


async def run_ext(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: str | None = None,
    cwd: Path | None = None,
) -> Ran:
    """Run `python -m ext.cli ARGS` as a real process (stdout and stderr piped, so not a terminal), in `cwd` (by
    default the tests' folder)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ext.cli",
        *args,
        cwd=cwd or HERE,
        env=env if env is not None else clean_env(),
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(None if stdin is None else stdin.encode()), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


class TinyHttpService:
    """A one-route HTTP service on 127.0.0.1 for `--http-tool`: GET /stock/{symbol} -> text; records the paths."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    async def __aenter__(self) -> TinyHttpService:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ", 2)[1].decode()
        self.paths.append(path)
        body = f"{path.rsplit('/', 1)[-1]}: 123.45 USD".encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n" % len(body))
        writer.write(b"Connection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()


def agent_spec(tmp_path: Path, base_url: str, **changes: Any) -> Path:
    """An agent spec file (ext-agent) on the OpenAI loopback server at `base_url`, with `cli_tools:get_weather`."""
    import yaml

    document: dict[str, Any] = {
        "name": "forecaster",
        "instructions": "You report the weather for {user}.",
        "variables": {"user": "Ada"},
        "model": {
            "client": {
                "provider": "openai",
                "options": {
                    "endpoint": base_url + "/v1",
                    "default_model": "gpt-4o-mini",
                    "api_key_env": "OPENAI_API_KEY",
                },
                "args": {"max_retries": 0},
            }
        },
        "tools": [{"python": "cli_tools:get_weather"}],
    }
    document.update(changes)
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
