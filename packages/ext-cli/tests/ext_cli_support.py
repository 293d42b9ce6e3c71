"""Helpers for the ext-cli tests: run the `ext` command as a real process."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

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


async def run_ext(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Ran:
    """Run `python -m ext.cli ARGS` as a real process (stdout and stderr piped, so not a terminal)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ext.cli",
        *args,
        cwd=HERE,
        env=env if env is not None else clean_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())
