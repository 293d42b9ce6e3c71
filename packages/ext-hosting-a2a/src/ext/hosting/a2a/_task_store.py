"""A2A tasks in an ext `StateStore` (memory, file, Redis): the SDK's `VersionedTaskStore` and `TaskEventStream`.

The SDK's request handler is built for several replicas: every write of a task carries the version it was derived
from, a stale write fails (`ConcurrentTaskModificationError`), and a cancel written by one replica is seen by the
replica running the task on its next write, which then stops. `StateStore.put(expected_version=...)` is exactly
that compare-and-swap, so a task is one record, `AgentId("a2a_task", task_id)`:

    {"owner": <who created it>, "task": <the Task as JSON>, "events": [[version, <StreamResponse JSON>], ...]}

The event log holds the last `EVENT_WINDOW` events, written in the same `put` as the task they produced, so a
subscriber on another replica (`subscribe`, polling the record) sees each event exactly once and in order, and a
restart loses nothing that was acknowledged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from google.protobuf import json_format

from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    StoredTask,
    TaskEventStream,
    TaskVersion,
    VersionedEvent,
    VersionedTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import (
    ListTasksRequest,
    ListTasksResponse,
    Message,
    StreamResponse,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from ext.core import AgentId, StateConflictError, StateStore

logger = logging.getLogger(__name__)

TASK_TYPE = "a2a_task"
EVENT_WINDOW = 256
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def _event_json(event: Event) -> dict[str, Any]:
    response = StreamResponse()
    if isinstance(event, Task):
        response.task.CopyFrom(event)
    elif isinstance(event, Message):
        response.message.CopyFrom(event)
    elif isinstance(event, TaskStatusUpdateEvent):
        response.status_update.CopyFrom(event)
    else:
        response.artifact_update.CopyFrom(event)
    result: dict[str, Any] = json_format.MessageToDict(response)
    return result


def _event_from_json(data: dict[str, Any]) -> Event:
    response = json_format.ParseDict(data, StreamResponse())
    which = response.WhichOneof("payload")
    event: Event = getattr(response, which)
    return event


def _version_int(version: TaskVersion) -> int | None:
    """The StateStore version a TaskVersion wraps (None for MISSING). Versions are made here, from ints."""
    if version.is_missing:
        return None
    value = int(repr(version).removeprefix("TaskVersion(").removesuffix(")"))
    return value


class StateStoreTaskStore(VersionedTaskStore):
    """`VersionedTaskStore` over an ext `StateStore`: tasks shared by every server process on the same store."""

    def __init__(
        self,
        store: StateStore,
        *,
        owner_resolver: Callable[[ServerCallContext], str] = resolve_user_scope,
        task_type: str = TASK_TYPE,
    ) -> None:
        self._store = store
        self._owner = owner_resolver
        self._type = task_type

    def _id(self, task_id: str) -> AgentId:
        return AgentId(self._type, task_id)

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        owner = self._owner(context)
        key = self._id(task.id)
        record = await self._store.get(key)
        events: list[Any] = list(record.state.get("events", [])) if record is not None else []
        if record is not None and record.state.get("owner") != owner:
            raise ConcurrentTaskModificationError(task.id)
        if task.status.state == TaskState.TASK_STATE_CANCELED and event is not None and prev is not None:
            # A cancel overwrites any non-terminal state without a version check (the SDK's contract).
            if record is None or _stored_state(record.state) in TERMINAL:
                raise ConcurrentTaskModificationError(task.id)
            expected: int | None = record.version
        else:
            expected = _version_int(prev_version)
            if record is not None and expected is None and not prev_version.is_missing:
                raise ConcurrentTaskModificationError(task.id)
        state = {"owner": owner, "task": json_format.MessageToDict(task), "events": events}
        try:
            if event is not None:
                # The version this write will get is not known before the put; the log records it after.
                version = await self._store.put(key, {**state, "events": events}, expected)
                events.append([version, _event_json(event)])
                del events[:-EVENT_WINDOW]
                version = await self._store.put(key, {**state, "events": events}, version)
            else:
                version = await self._store.put(key, state, expected)
        except StateConflictError:
            raise ConcurrentTaskModificationError(task.id) from None
        return TaskVersion(version)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        record = await self._store.get(self._id(task_id))
        if record is None or record.state.get("owner") != self._owner(context):
            return None
        return StoredTask(json_format.ParseDict(record.state["task"], Task()), TaskVersion(record.version))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        # Filtering and paging are the SDK's own (its in-memory store over this owner's tasks): one code path.
        owner = self._owner(context)
        view = InMemoryTaskStore(owner_resolver=lambda _ctx: owner)
        for key in await self._store.keys(self._type):
            record = await self._store.get(key)
            if record is not None and record.state.get("owner") == owner:
                await view.save(json_format.ParseDict(record.state["task"], Task()), context)
        return await view.list(params, context)

    async def is_cancelled(self, task_id: str) -> bool:
        """Whether the stored task is `canceled` (by any process); for a running turn to notice."""
        record = await self._store.get(self._id(task_id))
        return record is not None and _stored_state(record.state) == TaskState.TASK_STATE_CANCELED

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        stored = await self.get(task_id, context)
        if stored is not None:
            await self._store.delete(self._id(task_id))


def _stored_state(state: dict[str, Any]) -> int:
    task = json_format.ParseDict(state["task"], Task())
    value: int = task.status.state
    return value


class StateStoreEventStream(TaskEventStream):
    """Task events for subscribers on any replica, read from the task records `StateStoreTaskStore` writes.

    `publish` is a no-op (the store logs each event with the write that made it); `subscribe` reads the record
    every `poll_interval` seconds and yields the logged events newer than `after`, ending after a terminal state."""

    def __init__(self, store: StateStore, *, poll_interval: float = 0.1, task_type: str = TASK_TYPE) -> None:
        self._store = store
        self._poll = poll_interval
        self._type = task_type

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        del task_id, event

    async def subscribe(self, task_id: str, *, after: TaskVersion) -> AsyncGenerator[VersionedEvent, None]:
        cursor = _version_int(after) or 0
        while True:
            record = await self._store.get(AgentId(self._type, task_id))
            if record is None:
                return
            for version, data in record.state.get("events", []):
                if version > cursor:
                    cursor = version
                    yield VersionedEvent(_event_from_json(data), TaskVersion(version))
            if _stored_state(record.state) in TERMINAL:
                return
            await asyncio.sleep(self._poll)

    async def destroy(self, task_id: str) -> None:
        del task_id  # the log stays with its task: a late subscriber still reads the end
