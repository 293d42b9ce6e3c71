"""The OpenAI, Azure AI and Ollama servers refuse what the real services refuse, driven by the real SDKs.

Each bad request goes out through the provider's SDK over a real socket; the SDK must raise its own error type
with the service's status and error body, and no script item may be used. Requests the real service accepts
(Ollama checks no tool pairing or ranges) must still be answered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import ollama
import openai
import pytest
from azure.ai.inference.aio import ChatCompletionsClient
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import HttpResponseError
from openai.types.chat import ChatCompletion

from ext.testing.script import Reply
from ext.testing.servers import AzureAIServer, OllamaServer, OpenAIServer

USER: dict[str, Any] = {"role": "user", "content": "What is 2 + 3?"}
CALL: dict[str, Any] = {
    "id": "call_a",
    "type": "function",
    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
}
CALL_B: dict[str, Any] = {
    "id": "call_b",
    "type": "function",
    "function": {"name": "mul", "arguments": '{"a": 2, "b": 3}'},
}
ASSISTANT_CALLS: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [CALL, CALL_B]}
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}},
]


def _tool(call_id: str, content: str = "5") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# (create kwargs, param, code, message) as the OpenAI API answers them.
OPENAI_CASES: list[tuple[dict[str, Any], str, str | None, str]] = [
    (
        {"messages": []},
        "messages",
        "empty_array",
        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
    ),
    (
        {"messages": [USER, _tool("call_a")]},
        "messages.[1].role",
        None,
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    ),
    (
        {"messages": [USER, ASSISTANT_CALLS, _tool("call_a"), _tool("call_zzz")]},
        "messages.[3].tool_call_id",
        None,
        "Invalid parameter: 'tool_call_id' of 'call_zzz' not found in 'tool_calls' of previous message.",
    ),
    (
        {"messages": [USER, ASSISTANT_CALLS, _tool("call_b"), USER]},
        "messages.[1].role",
        None,
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_a",
    ),
    (
        {"messages": [USER, ASSISTANT_CALLS]},
        "messages.[1].role",
        None,
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_a, call_b",
    ),
    (
        {"messages": [USER], "tool_choice": "auto"},
        "tool_choice",
        None,
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
    ),
    (
        {"messages": [USER], "temperature": 7},
        "temperature",
        "decimal_above_max_value",
        "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 7 instead.",
    ),
    (
        {"messages": [USER], "temperature": -0.5},
        "temperature",
        "decimal_below_min_value",
        "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -0.5 instead.",
    ),
    (
        {"messages": [USER], "top_p": 1.5},
        "top_p",
        "decimal_above_max_value",
        "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got 1.5 instead.",
    ),
]


@pytest.fixture
async def openai_server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(default=Reply(text="ok")) as srv:
        yield srv


@pytest.fixture
async def openai_client(openai_server: OpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=openai_server.base_url + "/v1", api_key="sk-x", max_retries=0) as c:
        yield c


@pytest.mark.parametrize(("kwargs", "param", "code", "message"), OPENAI_CASES)
async def test_openai_refuses_what_the_api_refuses(
    openai_server: OpenAIServer,
    openai_client: openai.AsyncOpenAI,
    kwargs: dict[str, Any],
    param: str,
    code: str | None,
    message: str,
) -> None:
    openai_server.default = None  # a refused request must not reach the script
    with pytest.raises(openai.BadRequestError) as info:
        await openai_client.chat.completions.create(model="gpt-4o", **kwargs)
    assert info.value.status_code == 400
    assert info.value.body == {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    assert openai_server.errors == []


async def test_openai_missing_messages(openai_server: OpenAIServer, openai_client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await openai_client.post("/chat/completions", cast_to=ChatCompletion, body={"model": "gpt-4o"})
    assert info.value.body == {
        "message": "Missing required parameter: 'messages'.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "missing_required_parameter",
    }


async def test_openai_accepts_answered_calls_in_any_order(
    openai_server: OpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    messages: list[Any] = [USER, ASSISTANT_CALLS, _tool("call_b", "6"), _tool("call_a"), USER]
    result = await openai_client.chat.completions.create(
        model="gpt-4o", messages=messages, tools=TOOLS, tool_choice="auto", temperature=2
    )
    assert result.choices[0].message.content == "ok"
    results = [r.call_id for m in openai_server.decode(openai_server.requests[-1]).messages for r in m.tool_results]
    assert results == ["call_b", "call_a"]


async def test_llama_cpp_mode_checks_none_of_it() -> None:
    # llama-cpp-python's server renders whatever it is sent: the llama-cpp mode is not stricter than it.
    async with (
        OpenAIServer(tools_need_tool_choice=True, default=Reply(text="ok")) as server,
        openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="sk-x", max_retries=0) as client,
    ):
        messages: list[Any] = [USER, _tool("x")]
        result = await client.chat.completions.create(model="m", messages=messages, temperature=7)
    assert result.choices[0].message.content == "ok"


# --- Azure AI Inference -----------------------------------------------------------------------------------

KEY = "azure-rules-key"


@pytest.fixture
async def azure_server() -> AsyncIterator[AzureAIServer]:
    async with AzureAIServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture
async def azure_client(azure_server: AzureAIServer) -> AsyncIterator[ChatCompletionsClient]:
    async with ChatCompletionsClient(azure_server.base_url, AzureKeyCredential(KEY), retry_total=0) as client:
        yield client


# (complete kwargs, status, error.code, message, details)
AZURE_CASES: list[tuple[dict[str, Any], int, str, str, Any]] = [
    (
        {"messages": []},
        422,
        "Invalid input",
        "Invalid input: body.messages: List should have at least 1 item after validation, not 0",
        [
            {
                "loc": ["body", "messages"],
                "msg": "List should have at least 1 item after validation, not 0",
                "type": "too_short",
            }
        ],
    ),
    (
        {"messages": [USER], "temperature": 7},
        422,
        "Invalid input",
        "Invalid input: body.temperature: Input should be less than or equal to 1",
        [{"loc": ["body", "temperature"], "msg": "Input should be less than or equal to 1", "type": "less_than_equal"}],
    ),
    (
        # Within OpenAI's 0..2, outside Azure AI's documented 0..1.
        {"messages": [USER], "temperature": 1.5},
        422,
        "Invalid input",
        "Invalid input: body.temperature: Input should be less than or equal to 1",
        [{"loc": ["body", "temperature"], "msg": "Input should be less than or equal to 1", "type": "less_than_equal"}],
    ),
    (
        {"messages": [USER], "tool_choice": "auto"},
        400,
        "Bad Request",
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
        None,
    ),
    (
        {"messages": [USER, _tool("call_a")]},
        400,
        "Bad Request",
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
        None,
    ),
    (
        {"messages": [USER, ASSISTANT_CALLS, _tool("call_a"), USER]},
        400,
        "Bad Request",
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_b",
        None,
    ),
]


@pytest.mark.parametrize(("kwargs", "status", "code", "message", "details"), AZURE_CASES)
async def test_azure_ai_refuses_what_the_service_refuses(
    azure_server: AzureAIServer,
    azure_client: ChatCompletionsClient,
    kwargs: dict[str, Any],
    status: int,
    code: str,
    message: str,
    details: Any,
) -> None:
    with pytest.raises(HttpResponseError) as info:
        await azure_client.complete(**kwargs)
    assert info.value.status_code == status
    assert info.value.error is not None
    assert (info.value.error.code, info.value.error.message) == (code, message)
    response = info.value.response
    assert response is not None
    body = json.loads(response.text())
    assert body["error"]["status"] == status
    assert body["error"].get("details") == details
    assert azure_server.pending == 0 and azure_server.errors == []


async def test_azure_ai_accepts_a_paired_history(
    azure_server: AzureAIServer, azure_client: ChatCompletionsClient
) -> None:
    azure_server.enqueue(Reply(text="5"))
    messages: list[Any] = [USER, ASSISTANT_CALLS, _tool("call_a"), _tool("call_b", "6")]
    result = await azure_client.complete(messages=messages, temperature=1, tools=TOOLS, tool_choice="auto")
    assert result.choices[0].message.content == "5"


# --- Ollama -----------------------------------------------------------------------------------------------


@pytest.fixture
async def ollama_server() -> AsyncIterator[OllamaServer]:
    async with OllamaServer() as srv:
        yield srv


OLLAMA_ASSISTANT: dict[str, Any] = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"function": {"name": "add", "arguments": {"a": 2, "b": 3}}},
        {"function": {"name": "mul", "arguments": {"a": 2, "b": 3}}},
    ],
}


async def test_ollama_string_arguments_fail_to_decode(ollama_server: OllamaServer) -> None:
    # The ollama SDK types `arguments` as a Mapping and refuses a string itself; a client that builds the body
    # (e.g. from an OpenAI-shaped history) reaches the server, which fails to decode it as `ollama serve` does.
    with pytest.raises(ValueError, match="arguments"):
        await ollama.AsyncClient(host=ollama_server.base_url).chat(
            model="llama3.2",
            messages=[USER, {"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": "{}"}}]}],
        )
    body = {
        "model": "llama3.2",
        "stream": False,
        "messages": [USER, {"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": "{}"}}]}],
    }
    async with httpx.AsyncClient(base_url=ollama_server.base_url) as http:
        response = await http.post("/api/chat", json=body)
    assert response.status_code == 400
    assert response.json() == {
        "error": "json: cannot unmarshal string into Go struct field ToolCallFunction.messages.tool_calls.function."
        "arguments of type api.ToolCallFunctionArguments"
    }
    # Any field of the wrong JSON kind fails the same way (here a list where Message.content is a string).
    async with httpx.AsyncClient(base_url=ollama_server.base_url) as http:
        response = await http.post("/api/chat", json={**body, "messages": [{"role": "user", "content": ["x"]}]})
    assert response.status_code == 400
    assert response.json()["error"].startswith("json: cannot unmarshal array into Go struct field Message.")


async def test_ollama_empty_messages_only_load_the_model(ollama_server: OllamaServer) -> None:
    # docs/api.md "Load a model": an empty messages array loads the model and answers done_reason "load".
    response = await ollama.AsyncClient(host=ollama_server.base_url).chat(model="llama3.2", messages=[])
    assert response.done is True
    assert response.done_reason == "load"
    assert response.message.content == ""
    assert ollama_server.request_count == 1 and ollama_server.errors == []


async def test_ollama_accepts_what_ollama_does_not_check(ollama_server: OllamaServer) -> None:
    # No tool pairing, option ranges or tool_choice in Ollama: `ollama serve` answers these.
    ollama_server.default = Reply(text="ok")
    client = ollama.AsyncClient(host=ollama_server.base_url)
    orphan = await client.chat(
        model="llama3.2",
        messages=[USER, {"role": "tool", "content": "5", "tool_name": "add"}],
        options={"temperature": 7},
    )
    assert orphan.message.content == "ok"
    (request,) = ollama_server.requests
    assert ollama_server.decode(request).messages[1].tool_results[0].call_id == ""


async def test_ollama_pairs_results_by_tool_name_then_position(ollama_server: OllamaServer) -> None:
    ollama_server.default = Reply(text="ok")
    client = ollama.AsyncClient(host=ollama_server.base_url)
    await client.chat(
        model="llama3.2",
        messages=[
            USER,
            OLLAMA_ASSISTANT,
            # Answered in reverse order, named: paired by name.
            {"role": "tool", "content": "6", "tool_name": "mul"},
            {"role": "tool", "content": "5", "tool_name": "add"},
        ],
    )
    await client.chat(
        model="llama3.2",
        messages=[
            USER,
            OLLAMA_ASSISTANT,
            # Unnamed (older clients): paired by position.
            {"role": "tool", "content": "5"},
            {"role": "tool", "content": "6"},
        ],
    )
    for request in ollama_server.requests:
        wire = ollama_server.decode(request)
        calls = {c.call_id: c.name for c in wire.messages[1].tool_calls}
        pairs = {calls[r.call_id]: r.content for m in wire.messages for r in m.tool_results}
        assert pairs == {"add": "5", "mul": "6"}


async def test_ollama_ignores_ids_it_does_not_define(ollama_server: OllamaServer) -> None:
    # A `tool_call_id` naming the other call does not change the pairing: Ollama has no such field.
    ollama_server.default = Reply(text="ok")
    body = {
        "model": "llama3.2",
        "stream": False,
        "messages": [
            USER,
            {**OLLAMA_ASSISTANT, "tool_calls": [{"id": "x1", **c} for c in OLLAMA_ASSISTANT["tool_calls"]]},
            {"role": "tool", "content": "5", "tool_name": "add", "tool_call_id": "x2"},
            {"role": "tool", "content": "6", "tool_name": "mul", "tool_call_id": "x1"},
        ],
    }
    async with httpx.AsyncClient(base_url=ollama_server.base_url) as http:
        response = await http.post("/api/chat", json=body)
    assert response.status_code == 200
    wire = ollama_server.decode(ollama_server.requests[-1])
    calls = {c.call_id: c.name for c in wire.messages[1].tool_calls}
    assert "x1" not in calls and "x2" not in calls
    assert {calls[r.call_id]: r.content for m in wire.messages for r in m.tool_results} == {"add": "5", "mul": "6"}
