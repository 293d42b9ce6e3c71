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
        # Per running task: the version, owner and event log this process last wrote (dropped when it ends).
        self._last: dict[str, tuple[int, str, list[Any]]] = {}

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
        expected = _version_int(prev_version)
        cancel = task.status.state == TaskState.TASK_STATE_CANCELED and event is not None and prev is not None
        known = self._last.get(task.id)
        if known is not None and known[0] == expected and known[1] == owner and not cancel:
            # This process wrote the version the caller derives from: no read needed (the put still checks it).
            events: list[Any] = list(known[2])
        else:
            record = await self._store.get(key)
            if record is not None and record.state.get("owner") != owner:
                raise ConcurrentTaskModificationError(task.id)
            events = list(record.state.get("events", [])) if record is not None else []
            if cancel:
                # A cancel overwrites any non-terminal state without a version check (the SDK's contract).
                if record is None or _stored_state(record.state) in TERMINAL:
                    raise ConcurrentTaskModificationError(task.id)
                expected = record.version
        task_json = json_format.MessageToDict(task)
        # Every store here numbers a record's writes one by one; the event is logged under the version its write
        # should get, and logged again under the one it got if a store numbers otherwise.
        predicted = (expected or 0) + 1
        if event is not None:
            events.append([predicted, _event_json(event)])
            del events[:-EVENT_WINDOW]
        try:
            version = await self._store.put(key, {"owner": owner, "task": task_json, "events": events}, expected)
            if event is not None and version != predicted:
                events[-1] = [version, events[-1][1]]
                version = await self._store.put(key, {"owner": owner, "task": task_json, "events": events}, version)
        except StateConflictError:
            self._last.pop(task.id, None)
            raise ConcurrentTaskModificationError(task.id) from None
        if task.status.state in TERMINAL:
            self._last.pop(task.id, None)
        else:
            self._last[task.id] = (version, owner, events)
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
