"""Two ext A2A server processes on one Redis: a task started on one is read, followed and cancelled on the other;
a server killed mid-task and restarted still serves the task's state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from a2a.client import A2AClientError, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a_hosting_support import start_server_process

from ext.testing.redis import RedisServer, free_port, start_redis_server


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()


def request(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=f"m-{text}", role=Role.ROLE_USER, parts=[Part(text=text)]),
        configuration=SendMessageConfiguration(return_immediately=True),
    )


async def client_for(port: int, http: httpx.AsyncClient) -> Client:
    return await ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create_from_url(
        f"http://127.0.0.1:{port}"
    )


async def test_a_task_started_on_one_server_is_read_followed_and_cancelled_on_another(redis: RedisServer) -> None:
    port_a, port_b = free_port(), free_port()
    a, b = start_server_process(port_a, redis.url), start_server_process(port_b, redis.url)
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            on_a, on_b = await client_for(port_a, http), await client_for(port_b, http)
            # Started on A, streamed from A until its first piece is out.
            events = on_a.send_message(
                SendMessageRequest(message=Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="slow job")]))
            )
            first = await anext(events)
            task_id = first.task.id
            async for event in events:
                if event.HasField("artifact_update"):
                    break
            # Read on B: working, with the piece A wrote.
            seen = await on_b.get_task(GetTaskRequest(id=task_id))
            assert seen.status.state == TaskState.TASK_STATE_WORKING
            assert seen.artifacts[0].parts[0].text == "started slow job"
            # Followed from B, cancelled on B: B's subscriber and A's stream both end canceled.
            following = on_b.subscribe(SubscribeToTaskRequest(id=task_id))
            snapshot = await anext(following)
            assert snapshot.task.id == task_id
            cancelled = await on_b.cancel_task(CancelTaskRequest(id=task_id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            tail_b = [e async for e in following]
            assert final_state(tail_b[-1]) == TaskState.TASK_STATE_CANCELED
            tail_a = await asyncio.wait_for(_drain(events), 15)
            assert final_state(tail_a[-1]) == TaskState.TASK_STATE_CANCELED
            assert (await on_a.get_task(GetTaskRequest(id=task_id))).status.state == TaskState.TASK_STATE_CANCELED
    finally:
        for process in (a, b):
            process.kill()
            process.wait(10)


def final_state(event: StreamResponse) -> int:
    """The state a stream's last event carries (a status update, or the whole task after a reload)."""
    state: int = event.task.status.state if event.HasField("task") else event.status_update.status.state
    return state


async def _drain(events: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [e async for e in events]


async def test_a_server_killed_mid_task_and_restarted_still_serves_the_task(redis: RedisServer) -> None:
    port = free_port()
    server = start_server_process(port, redis.url)
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            client = await client_for(port, http)
            done = [e async for e in client.send_message(request("finished job"))]
            finished_id = done[0].task.id if done[0].HasField("task") else done[0].status_update.task_id
            events = client.send_message(
                SendMessageRequest(message=Message(message_id="m2", role=Role.ROLE_USER, parts=[Part(text="slow one")]))
            )
            running_id = (await anext(events)).task.id
            async for event in events:
                if event.HasField("artifact_update"):
                    break
            server.kill()
            server.wait(10)
            with pytest.raises(A2AClientError):  # the stream breaks with the server: an error, not a hang
                await asyncio.wait_for(_drain(events), 15)
            server = start_server_process(port, redis.url)
            client = await client_for(port, http)
            running = await client.get_task(GetTaskRequest(id=running_id))
            assert running.status.state == TaskState.TASK_STATE_WORKING
            assert running.artifacts[0].parts[0].text == "started slow one"
            # A task whose process died can still be cancelled by the restarted one.
            cancelled = await client.cancel_task(CancelTaskRequest(id=running_id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            finished = await client.get_task(GetTaskRequest(id=finished_id))
            assert finished.status.state in (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_WORKING)
    finally:
        server.kill()
        server.wait(10)
