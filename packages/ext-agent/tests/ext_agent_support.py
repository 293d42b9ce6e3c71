"""Shared by the tests and by the child processes they start: clients on the loopback servers, counting tools."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pydantic import BaseModel

from ext.core import ChatCompletionClient, FunctionTool
from ext.models.openai import OpenAIChatCompletionClient

KEY = "sk-agent-test"


class City(BaseModel):
    city: str
    country: str


def openai_client(base_url: str, model: str = "gpt-4o-mini") -> ChatCompletionClient:
    return OpenAIChatCompletionClient(
        model, base_url=base_url + "/v1", api_key=KEY, bundled_encodings=False, max_retries=0
    )


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def add_tool() -> FunctionTool:
    return FunctionTool(add, description="Add two integers.")


def counting_tool(
    name: str, counter: Path, *, block_after: int | None = None, marker: Path | None = None
) -> FunctionTool:
    """A tool that appends a line to `counter` per invocation (so a test counts them across processes). With
    `block_after=n`, the invocations after the n-th line in the file write `marker` and then wait forever (a
    process is killed while it waits)."""

    def run(text: str) -> str:  # sync: FunctionTool runs it in a thread
        with counter.open("a", encoding="utf-8") as f:
            f.write(f"{name} {os.getpid()}\n")
            f.flush()
            os.fsync(f.fileno())
        if block_after is not None and len(counter.read_text().splitlines()) > block_after:
            if marker is not None:
                marker.write_text("blocked")
            threading.Event().wait()  # until the test kills this process
        return f"{name} did {text}"

    return FunctionTool(run, description=f"The {name} tool.", name=name)


def count_lines(counter: Path, name: str) -> int:
    if not counter.exists():
        return 0
    return sum(1 for line in counter.read_text().splitlines() if line.split(" ")[0] == name)
