"""ext's A2A server driven by the SDK's own client (each transport) and by ext-tools-a2a."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from a2a_hosting_support import echo, serving, slow
from starlette.applications import Starlette

from ext.core import ConfigurationError, InMemoryStateStore, StateStore
from ext.hosting.a2a import FunctionResponder, a2a_app
from ext.tools.a2a import A2AAgentTool, A2ARefusedError, A2ATaskFailedError

TRANSPORTS = ["JSONRPC", "HTTP+JSON"]


def request(text: str, *, task_id: str = "", return_immediately: bool = False) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=f"m-{text}", role=Role.ROLE_USER, parts=[Part(text=text)], task_id=task_id),
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )


def app_for(
    fn: Callable[[str], AsyncIterator[str]] = echo, store: StateStore | None = None
) -> Callable[[str], Starlette]:
    return lambda base: a2a_app(FunctionResponder(fn), name="Echo", description="Echoes.", url=base, store=store)


async def sdk_client(base: str, transport: str, *, streaming: bool = True, http: httpx.AsyncClient):  # type: ignore[no-untyped-def]
    factory = ClientFactory(
        ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=[transport])
    )
    return await factory.create_from_url(base)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_sdk_client_streams_artifact_updates_ending_in_a_terminal_status(transport: str) -> None:
    async with serving(app_for()) as base, httpx.AsyncClient(timeout=10) as http:
        client = await sdk_client(base, transport, http=http)
        events: list[StreamResponse] = [e async for e in client.send_message(request("hello"))]
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task"
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [c.append for c in chunks] == [False, True, True]
    assert "".join(c.artifact.parts[0].text for c in chunks) == "echo: hello"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_sdk_client_sends_reads_and_cancels(transport: str) -> None:
    async with (
        serving(app_for(lambda t: echo(t) if t != "wait" else slow(t))) as base,
        httpx.AsyncClient(timeout=10) as http,
    ):
        client = await sdk_client(base, transport, streaming=False, http=http)
        [done] = [e async for e in client.send_message(request("hi"))]
        assert done.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert (
            done.task.artifacts[0].parts[0].text + "".join(p.text for p in done.task.artifacts[0].parts[1:])
            == "echo: hi"
        )
        read = await client.get_task(GetTaskRequest(id=done.task.id))
        assert read.status.state == TaskState.TASK_STATE_COMPLETED
        [started] = [e async for e in client.send_message(request("wait", return_immediately=True))]
        cancelled = await client.cancel_task(CancelTaskRequest(id=started.task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        assert (await client.get_task(GetTaskRequest(id=started.task.id))).status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))


async def test_ext_tool_calls_ext_server() -> None:
    async with serving(app_for()) as base, await A2AAgentTool.from_url(base, required_skills=["chat"]) as tool:
        assert tool.name == "Echo"
        assert [d async for d in tool.stream("abc")] == ["ech", "o: ", "abc"]
        with pytest.raises(A2ARefusedError):
            await tool.send("x", task_id="unknown-task")


async def test_malformed_requests_get_protocol_errors() -> None:
    async with serving(app_for()) as base, httpx.AsyncClient(timeout=10) as http:
        parse = await http.post(base + "/", content=b"{not json", headers={"content-type": "application/json"})
        assert parse.json()["error"]["code"] == -32700
        unknown = await http.post(base + "/", json={"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}})
        assert unknown.json()["error"]["code"] == -32601
        bad = await http.post(
            base + "/", json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": 7}}
        )
        assert bad.json()["error"]["code"] in (-32602, -32600)


async def test_tasks_outlive_the_server_that_ran_them() -> None:
    store = InMemoryStateStore()
    async with serving(app_for(store=store)) as base, A2AAgentTool(base, "echo", "Echo.") as tool:
        reply = await tool.send("keep me")
    async with serving(app_for(store=store)) as base, httpx.AsyncClient(timeout=10) as http:
        client = await sdk_client(base, "JSONRPC", http=http)
        task = await client.get_task(GetTaskRequest(id=reply.task_id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "".join(p.text for p in task.artifacts[0].parts) == "echo: keep me"


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="transports: 'GRPC'"):
        a2a_app(FunctionResponder(echo), name="x", url="http://127.0.0.1:1", transports=["GRPC"])
    with pytest.raises(ConfigurationError, match="url must be"):
        a2a_app(FunctionResponder(echo), name="x", url="127.0.0.1:1")


async def test_an_agent_error_fails_the_task_with_its_message() -> None:
    async def broken(text: str) -> AsyncIterator[str]:
        yield "partial "
        raise RuntimeError("the model is down")

    async with serving(app_for(broken)) as base, A2AAgentTool(base, "echo", "Echo.") as tool:
        with pytest.raises(A2ATaskFailedError) as info:
            await tool.send("hi")
    assert info.value.state == "failed"
    assert info.value.agent_message == "RuntimeError: the model is down"


async def test_an_a2a_0_3_client_is_answered_in_0_3() -> None:
    # The A2A 0.3 wire (method names, `kind` fields, camelCase) as 0.3 peers send it.
    send = {
        "jsonrpc": "2.0",
        "id": "1",
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "parts": [{"kind": "text", "text": "old"}],
                "kind": "message",
                "messageId": "m1",
            }
        },
    }
    async with serving(app_for()) as base, httpx.AsyncClient(timeout=10) as http:
        task = (await http.post(base + "/", json=send)).json()["result"]
        assert (task["kind"], task["status"]["state"]) == ("task", "completed")
        assert "".join(p["text"] for p in task["artifacts"][0]["parts"]) == "echo: old"
        get = {"jsonrpc": "2.0", "id": "2", "method": "tasks/get", "params": {"id": task["id"]}}
        read = (await http.post(base + "/", json=get)).json()["result"]
        assert (read["id"], read["status"]["state"]) == (task["id"], "completed")
