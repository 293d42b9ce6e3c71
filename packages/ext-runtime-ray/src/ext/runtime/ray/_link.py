"""The driver link: how an agent's actor reaches objects that stay in the process that built the runtime.

Ray has no calls from an actor into a driver, so the namespace's registry actor keeps a queue of calls per member
runtime (`CallQueues`): an actor queues a call there; the runtime's `DriverServices` task long-polls its queue,
runs each call on the object in the driver's event loop and answers it. What is served this way:

- an `InMemoryStateStore` (it lives in one process by definition; other stores are pickled into each actor and
  open their own connections), through `ServedStateStore`;
- the runtime's `observer`: each handling's span is begun and ended in the driver (`ServedObserver`);
- objects of the types named in `driver_objects`, captured by a factory: the actor gets a `ServedObject` whose
  method calls (`journal.created.append(x)`) run on the original, one at a time, before the caller goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import itertools
import logging
import pickle
from collections.abc import Mapping
from typing import Any

import ray
from ext.core import AgentId, AgentType, MessageContext, RuntimeClosedError, SendInfo, StoredState, TraceContext
from ray import cloudpickle

from ._wire import portable_error

__all__ = [
    "CallQueues",
    "DriverServices",
    "Link",
    "ServedObject",
    "ServedObserver",
    "ServedStateStore",
    "dump_factory",
    "load_factory",
]

logger = logging.getLogger(__name__)


class CallQueues:
    """The calls from actors to each member (driver) of a namespace, kept by the namespace's registry actor: an
    actor queues a call (`call`), the member long-polls its queue (`take`) and answers each call (`answer`)."""

    def __init__(self) -> None:
        self._queues: dict[str, asyncio.Queue[tuple[int, int, tuple[str, ...], tuple[Any, ...]] | None]] = {}
        self._waiting: dict[int, tuple[str, asyncio.Future[tuple[bool, Any]]]] = {}
        self._ids = itertools.count(1)

    def open(self, member: str) -> None:
        self._queues.setdefault(member, asyncio.Queue())

    def close(self, member: str) -> None:
        """The member left: its poll ends and the calls waiting for it fail."""
        queue = self._queues.pop(member, None)
        if queue is not None:
            queue.put_nowait(None)
        for owner, future in list(self._waiting.values()):
            if owner == member and not future.done():
                future.set_result((False, RuntimeClosedError("the runtime that owns this object stopped")))

    async def call(self, member: str, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> tuple[bool, Any]:
        queue = self._queues.get(member)
        if queue is None:
            return False, RuntimeClosedError("the runtime that owns this object stopped")
        call_id = next(self._ids)
        future: asyncio.Future[tuple[bool, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = (member, future)
        queue.put_nowait((call_id, target, path, args))
        try:
            return await future
        finally:
            self._waiting.pop(call_id, None)

    async def take(self, member: str) -> list[tuple[int, int, tuple[str, ...], tuple[Any, ...]]] | None:
        queue = self._queues.get(member)
        if queue is None:
            return None
        first = await queue.get()
        if first is None:
            return None
        batch = [first]
        while not queue.empty():
            item = queue.get_nowait()
            if item is None:
                queue.put_nowait(None)
                break
            batch.append(item)
        return batch

    def answer(self, call_id: int, ok: bool, value: Any) -> None:
        waiting = self._waiting.get(call_id)
        if waiting is not None and not waiting[1].done():
            waiting[1].set_result((ok, value))


class DriverServices:
    """The driver's side: the served objects and the task answering their calls."""

    def __init__(self, registry: Any, member: str) -> None:
        self._objects: dict[int, Any] = {}
        self._ids = itertools.count(1)
        self._spans: dict[int, Any] = {}
        self._registry = registry
        self.link = Link(registry, member)
        self._poller: asyncio.Task[None] | None = None
        self._calls: set[asyncio.Task[None]] = set()

    def serve(self, obj: Any) -> int:
        for key, served in self._objects.items():
            if served is obj:
                return key
        key = next(self._ids)
        self._objects[key] = obj
        return key

    def start(self) -> None:
        if self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def stop(self) -> None:
        """After the member left the registry (which ends the poll)."""
        if self._poller is not None:
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(self._poller, 5)
        for task in list(self._calls):
            task.cancel()

    async def _poll(self) -> None:
        while True:
            try:
                batch = await self._registry.take.remote(self.link.member)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("the driver link failed: actors can no longer reach this process's objects")
                return
            if batch is None:
                return
            for call_id, target, path, args in batch:
                task = asyncio.get_running_loop().create_task(self._run(call_id, target, path, args))
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)

    async def _run(self, call_id: int, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> None:
        try:
            value = self._invoke(target, path, args)
            if inspect.isawaitable(value):
                value = await value
            ok = True
        except Exception as exc:
            ok, value = False, portable_error(exc)
        self._registry.answer.remote(call_id, ok, value)

    def _invoke(self, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> Any:
        if path and path[0] == "__span__":  # the end of a handling span begun by `on_process`
            span = self._spans.pop(target)
            span.end(*args)
            return None
        obj = self._objects[target]
        for name in path[:-1]:
            obj = getattr(obj, name)
        value = getattr(obj, path[-1])(*args)
        if path == ("on_process",):
            key = next(self._ids)
            self._spans[key] = value
            return key, value.trace
        return value


class Link:
    """How an actor reaches one member's objects: the registry's handle and the member's id (pickled into specs)."""

    __slots__ = ("member", "registry")

    def __init__(self, registry: Any, member: str) -> None:
        self.registry = registry
        self.member = member

    def __reduce__(self) -> tuple[Any, ...]:
        return (Link, (self.registry, self.member))


def _call_sync(link: Link, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> Any:
    # Blocks the actor's event loop for one round trip: the caller (a handler, the observer) goes on only once the
    # driver ran the call, so what it did is seen there before the agent's answer is.
    ok, value = ray.get(link.registry.call.remote(link.member, target, path, args))
    if not ok:
        raise value
    return value


async def _call(link: Link, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> Any:
    ok, value = await link.registry.call.remote(link.member, target, path, args)
    if not ok:
        raise value
    return value


class ServedObject:
    """Stands in an actor for an object that stays in the driver: `proxy.a.b(x)` runs `obj.a.b(x)` there."""

    def __init__(self, link: Any, target: int, path: tuple[str, ...] = ()) -> None:
        self._link = link
        self._target = target
        self._path = path

    def __getattr__(self, name: str) -> ServedObject:
        if name.startswith("__"):
            raise AttributeError(name)
        return ServedObject(self._link, self._target, (*self._path, name))

    def __call__(self, *args: Any) -> Any:
        return _call_sync(self._link, self._target, self._path, args)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ServedObject, (self._link, self._target, self._path))


class ServedStateStore:
    """A `StateStore` that stays in the driver (an `InMemoryStateStore`), reached from an actor."""

    def __init__(self, link: Any, target: int) -> None:
        self._link = link
        self._target = target

    async def get(self, agent_id: AgentId) -> StoredState | None:
        result: StoredState | None = await _call(self._link, self._target, ("get",), (agent_id,))
        return result

    async def put(self, agent_id: AgentId, state: Mapping[str, Any], expected_version: int | None) -> int:
        version: int = await _call(self._link, self._target, ("put",), (agent_id, dict(state), expected_version))
        return version

    async def delete(self, agent_id: AgentId) -> None:
        await _call(self._link, self._target, ("delete",), (agent_id,))

    async def keys(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        keys: list[AgentId] = await _call(self._link, self._target, ("keys",), (agent_type,))
        return keys

    async def close(self) -> None:
        """The store is the driver's: it closes it."""


class _ServedSpan:
    def __init__(self, link: Any, key: int, trace: TraceContext) -> None:
        self._link = link
        self._key = key
        self.trace = trace

    def end(self, error: BaseException | None = None, response: TraceContext | None = None) -> None:
        try:
            _call_sync(
                self._link, self._key, ("__span__",), (None if error is None else portable_error(error), response)
            )
        except Exception:
            logger.warning("the driver's observer could not be told a handling ended", exc_info=True)


class _NoSpan:
    trace = None

    def end(self, error: BaseException | None = None, response: TraceContext | None = None) -> None:
        pass


class ServedObserver:
    """The driver's `RuntimeObserver`, reached from an actor: spans are begun and ended in the driver. A driver
    that cannot be reached makes the handling untraced, never failed (observers must not raise)."""

    def __init__(self, link: Any, target: int) -> None:
        self._link = link
        self._target = target

    def on_send(self, info: SendInfo) -> Any:
        return self._span(("on_send",), info)

    def on_process(self, ctx: MessageContext) -> Any:
        # The context's cancellation token stays here: the driver gets what a span needs.
        copy = MessageContext(
            ctx.recipient,
            ctx.sender,
            ctx.is_rpc,
            ctx.message_id,
            is_broadcast=ctx.is_broadcast,
            topic_id=ctx.topic_id,
            trace=ctx.trace,
        )
        return self._span(("on_process",), copy)

    def _span(self, path: tuple[str, ...], arg: Any) -> Any:
        try:
            key, trace = _call_sync(self._link, self._target, path, (arg,))
        except Exception:
            logger.warning("the driver's observer could not be reached: this handling is not traced", exc_info=True)
            return _NoSpan()
        return _ServedSpan(self._link, key, trace)


class _Pickler(cloudpickle.CloudPickler):
    def __init__(self, file: io.BytesIO, services: DriverServices, types: tuple[type, ...]) -> None:
        super().__init__(file)  # type: ignore[no-untyped-call]
        self._services = services
        self._types = types

    def persistent_id(self, obj: Any) -> Any:
        if self._types and isinstance(obj, self._types):
            return ("ext-driver-object", self._services.serve(obj))
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, link: Any) -> None:
        super().__init__(file)
        self._link = link

    def persistent_load(self, pid: Any) -> Any:
        kind, target = pid
        if kind != "ext-driver-object":
            raise pickle.UnpicklingError(f"unknown persistent id {kind!r}")
        return ServedObject(self._link, target)


def dump_factory(factory: Any, services: DriverServices, driver_types: tuple[type, ...]) -> bytes:
    """The factory, pickled by value (closures and lambdas too); objects of `driver_types` it holds stay in this
    process (served). With Ray's own cloudpickle: a class defined in `__main__` and pickled by value then stays one
    class in the actor, whether it arrived in the factory or in a message (Ray pickles those)."""
    buffer = io.BytesIO()
    _Pickler(buffer, services, driver_types).dump(factory)  # type: ignore[no-untyped-call]
    return buffer.getvalue()


def load_factory(data: bytes, link: Any) -> Any:
    return _Unpickler(io.BytesIO(data), link).load()
