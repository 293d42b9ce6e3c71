"""The driver link: how an agent's actor reaches objects that stay in the process that built the runtime.

Ray has no calls from an actor into a driver, so each runtime that registers a factory owns a small `Link` actor
(not detached: it dies with its driver). An actor queues a call on it (`call`); the runtime's `DriverServices`
task long-polls the queue (`take`), runs each call on the object in the driver's event loop and answers it
(`answer`). What is served this way:

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

import cloudpickle
import ray

from ext.core import AgentId, AgentType, MessageContext, SendInfo, StoredState, TraceContext

from ._wire import portable_error

__all__ = [
    "DriverServices",
    "Link",
    "ServedObject",
    "ServedObserver",
    "ServedStateStore",
    "dump_factory",
    "load_factory",
]

logger = logging.getLogger(__name__)


class Link:
    """The queue of calls from actors to one driver (a Ray actor; see the module docstring)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[int, int, tuple[str, ...], tuple[Any, ...]]] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future[tuple[bool, Any]]] = {}
        self._ids = itertools.count(1)

    async def call(self, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> tuple[bool, Any]:
        call_id = next(self._ids)
        future: asyncio.Future[tuple[bool, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        self._queue.put_nowait((call_id, target, path, args))
        try:
            return await future
        finally:
            self._waiting.pop(call_id, None)

    async def take(self) -> list[tuple[int, int, tuple[str, ...], tuple[Any, ...]]]:
        batch = [await self._queue.get()]
        while not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    def answer(self, call_id: int, ok: bool, value: Any) -> None:
        future = self._waiting.get(call_id)
        if future is not None and not future.done():
            future.set_result((ok, value))


RemoteLink = ray.remote(num_cpus=0)(Link)


class DriverServices:
    """The driver's side: the served objects and the task answering their calls."""

    def __init__(self) -> None:
        self._objects: dict[int, Any] = {}
        self._ids = itertools.count(1)
        self._spans: dict[int, Any] = {}
        self.handle: Any = None
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
        if self.handle is None:
            self.handle = RemoteLink.remote()
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        for task in list(self._calls):
            task.cancel()
        if self.handle is not None:
            ray.kill(self.handle)
        self.handle = None

    async def _poll(self) -> None:
        while True:
            try:
                batch = await self.handle.take.remote()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("the driver link failed: actors can no longer reach this process's objects")
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
        self.handle.answer.remote(call_id, ok, value)

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


def _call_sync(link: Any, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> Any:
    # Blocks the actor's event loop for one round trip: the caller (a handler, the observer) goes on only once the
    # driver ran the call, so what it did is seen there before the agent's answer is.
    ok, value = ray.get(link.call.remote(target, path, args))
    if not ok:
        raise value
    return value


async def _call(link: Any, target: int, path: tuple[str, ...], args: tuple[Any, ...]) -> Any:
    ok, value = await link.call.remote(target, path, args)
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
            _call_sync(self._link, self._key, ("__span__",), (None if error is None else portable_error(error), response))
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
        super().__init__(file)
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
    """The factory, pickled by value (cloudpickle: closures and lambdas too); objects of `driver_types` it holds
    stay in this process (served)."""
    buffer = io.BytesIO()
    _Pickler(buffer, services, driver_types).dump(factory)
    return buffer.getvalue()


def load_factory(data: bytes, link: Any) -> Any:
    return _Unpickler(io.BytesIO(data), link).load()
