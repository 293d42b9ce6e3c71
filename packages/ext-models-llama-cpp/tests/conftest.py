"""Fixtures: the tiny GGUF, clients on it, and the llama.cpp client's "wire" for the scripted in-process model.

The wire part is the in-process counterpart of a loopback protocol server (see ext.testing.inprocess): `render`
writes a scripted Reply as the answer the model must generate (text, or tool calls in this client's JSON format)
and `decode` turns a recorded chat-handler call back into a NeutralRequest.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from ext.models.llama_cpp import TOOL_PREAMBLE, LlamaCppChatCompletionClient
from ext.testing.gguf import write_tiny_llama_gguf
from ext.testing.inprocess import ScriptedModel, llama_cpp_chat_handler
from ext.testing.script import NeutralMessage, NeutralRequest, NeutralToolResult, Reply, ToolCallSpec

_OPTIONS = ("temperature", "max_tokens", "top_p", "top_k", "frequency_penalty", "presence_penalty", "seed")


def render(reply: Reply) -> str:
    """The text the model writes for ``reply``: its text, or its tool calls as the client's JSON."""
    if reply.tool_calls:
        calls = [{"name": c.name, "arguments": c.arguments_dict} for c in reply.tool_calls]
        return json.dumps({"tool_calls": calls})
    return reply.text


def _json_object(text: str, key: str) -> Any:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value.get(key) if isinstance(value, dict) and set(value) == {key} else None


def decode(body: Mapping[str, Any]) -> NeutralRequest:
    """A recorded chat-handler call in neutral form."""
    wire = NeutralRequest(stream=bool(body.get("stream")), raw=dict(body), model=body.get("model"))
    for position, message in enumerate(body["messages"]):
        role, text = message["role"], message["content"]
        if role == "system":
            wire.system.append(text)
            if text.startswith(TOOL_PREAMBLE):
                lines = text.split("\n")
                for tool in json.loads(lines[1]):
                    wire.tools.append(tool["name"])
                    wire.tool_schemas[tool["name"]] = tool["parameters"]
                wire.tool_choice = "auto"
                for line in lines[3:]:
                    if line == "You must call at least one tool.":
                        wire.tool_choice = "required"
                    elif line.startswith("You must call the tool "):
                        wire.tool_choice = line[len("You must call the tool ") : -1]
            continue
        calls = _json_object(text, "tool_calls") if role == "assistant" else None
        results = _json_object(text, "tool_results") if role == "user" else None
        if calls is not None:
            specs = [ToolCallSpec(c["name"], c["arguments"], id=c.get("id")) for c in calls]
            wire.messages.append(NeutralMessage(role="assistant", tool_calls=specs, position=position))
        elif results is not None:
            neutral = [NeutralToolResult(r["call_id"], r["content"], r.get("is_error")) for r in results]
            wire.messages.append(NeutralMessage(role="tool", tool_results=neutral, position=position))
        else:
            wire.messages.append(NeutralMessage(role=role, text=text, position=position))
    response_format = body.get("response_format")
    if response_format:
        if "schema" in response_format:
            wire.json_schema = response_format["schema"]
        else:
            wire.json_mode = True
    for name in _OPTIONS:
        if body.get(name) is not None:
            wire.options[name] = body[name]
    if body.get("stop"):
        stop = body["stop"]
        wire.options["stop"] = [stop] if isinstance(stop, str) else list(stop)
    return wire


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real GGUF (random weights, byte-level vocabulary, ChatML template) that llama.cpp loads in milliseconds."""
    return write_tiny_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedModel]:
    async with ScriptedModel(decode) as model:
        yield model


MakeClient = Callable[..., LlamaCppChatCompletionClient]


@pytest.fixture
async def make_client(tiny_gguf: Path) -> AsyncIterator[MakeClient]:
    """Builds clients on the tiny model (closed at the end of the test)."""
    made: list[LlamaCppChatCompletionClient] = []

    def make(scripted: ScriptedModel | None = None, **kwargs: Any) -> LlamaCppChatCompletionClient:
        if scripted is not None:
            kwargs["chat_handler"] = llama_cpp_chat_handler(scripted, render)
        kwargs.setdefault("seed", 1)
        client = LlamaCppChatCompletionClient(tiny_gguf, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


@pytest.fixture
def llama_wire() -> tuple[Callable[[Mapping[str, Any]], NeutralRequest], Callable[[Reply], str]]:
    """(decode, render) for a ScriptedModel and ext.testing.inprocess.llama_cpp_chat_handler."""
    return decode, render
