"""The sending side of `RayAgentRuntime`: finding an agent's actor (through the registry, then from a cache),
sending one-way messages and RPCs to it, and reading what comes back.

- A one-way message's outcome is watched here: a handler's error is logged in the sender's process, naming the
  agent, and before an RPC to the same agent returns (the actor handled them in order), so it is never lost in a
  worker's log.
- An actor that retired (idle) answers `retired` or, once gone, fails with `ActorDiedError`; the registry knows
  each retired incarnation, so the message (which was not handled) is sent again to a fresh activation.
- An actor that died otherwise fails the RPC with `AgentActorDiedError` as soon as Ray knows (at most once);
  `delivery="at_least_once"` lets Ray resend it to the restarted actor instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from typing import Any

from ext.core import (
    AgentId,
    AgentNotFoundError,
    CancellationToken,
    RuntimeClosedError,
    RuntimeObserver,
    SendInfo,
    TopicId,
    UndeliverableError,
)
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from ._wire import NOT_FOUND, AgentActorDiedError, Envelope, Outcome

__all__ = ["Sender"]

logger = logging.getLogger(__name__)

_RESENDS = 3


class _DyingActor(Exception):
    pass


async def _until_ready(handle: Any) -> None:
    """Until the actor answers; while Ray restarts it, it is asked again (the caller bounds the wait)."""
    delay = 0.05
    while True:
        try:
            await handle.ready.remote()
            return
        except ActorUnavailableError:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


class Sender:
    def __init__(
        self, registry: Any, member: str, observer: RuntimeObserver | None, delivery: str, activation_timeout: float
    ) -> None:
        self._registry = registry
        self._activation_timeout = activation_timeout
        self._seqs: dict[tuple[AgentId, str], int] = {}
        self._restarting: set[AgentId] = set()
        self._observer = observer
        self._retries = -1 if delivery == "at_least_once" else 0
        self._actors: dict[AgentId, tuple[Any, str]] = {}
        self._one_way: dict[AgentId, set[asyncio.Future[None]]] = {}
        self._ids = itertools.count(1)
        self._prefix = f"ray-{member}-"
        self._closed = False

    def _next_id(self) -> str:
        return f"{self._prefix}{next(self._ids)}"

    async def close(self) -> None:
        """Refuse new messages; wait (briefly) for the outcomes of the one-way messages already sent."""
        self._closed = True
        pending = [f for futures in self._one_way.values() for f in futures]
        if pending:
            await asyncio.wait(pending, timeout=5)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")

    # --- finding actors ---

    async def _activate(self, agent_id: AgentId) -> tuple[Any, str]:
        found = self._actors.get(agent_id)
        if found is not None:
            if agent_id in self._restarting:
                # Its actor failed a call while Ray restarted it: wait until it is back before sending more.
                await self._ready(agent_id, found[0])
                self._restarting.discard(agent_id)
            return found
        for attempt in range(_RESENDS):
            try:
                return await self._activate_once(agent_id)
            except _DyingActor:
                # The name still belonged to a retiring actor: wait for it to go, and ask again.
                await asyncio.sleep(0.1 * (attempt + 1))
        return await self._activate_once(agent_id)

    async def _activate_once(self, agent_id: AgentId) -> tuple[Any, str]:
        answer = await self._registry.activate.remote(agent_id)
        if answer == NOT_FOUND:
            raise AgentNotFoundError(f"no agent factory is registered for agent type {agent_id.type!r}")
        handle, incarnation = answer
        try:
            await self._ready(agent_id, handle)
        except RayActorError as exc:
            await self._registry.dead.remote(agent_id, incarnation)
            if isinstance(exc, ActorDiedError) and "ray.kill" in str(exc):
                raise _DyingActor() from None
            raise UndeliverableError(f"the actor of {agent_id} could not start: {exc}") from None
        self._actors[agent_id] = (handle, incarnation)
        return handle, incarnation

    async def _ready(self, agent_id: AgentId, handle: Any) -> None:
        # Placing and starting an actor can take long (a busy cluster, an autoscaler): it has its own bound, and an
        # RPC's deadline starts once the agent's actor runs.
        try:
            await asyncio.wait_for(_until_ready(handle), self._activation_timeout)
        except asyncio.TimeoutError:
            raise UndeliverableError(
                f"the actor of {agent_id} did not start within {self._activation_timeout:g} s "
                "(does a node have the resources its type asks for?)"
            ) from None

    async def actor(self, agent_id: AgentId) -> Any:
        return (await self._activate(agent_id))[0]

    async def _stale(self, agent_id: AgentId, incarnation: str, error: BaseException | None) -> bool:
        """Whether `incarnation` retired (so the message was not handled: send it again); forgets it either way."""
        if isinstance(error, ActorUnavailableError):
            self._restarting.add(agent_id)
            return False  # restarting: the same actor (and handle) will be back
        if self._actors.get(agent_id, (None, None))[1] == incarnation:
            del self._actors[agent_id]
        self._seqs.pop((agent_id, incarnation), None)
        if error is None:
            return True  # it answered `retired`
        return isinstance(error, ActorDiedError) and bool(await self._registry.was_retired.remote(incarnation))

    async def _deliver(self, envelope: Envelope) -> tuple[Outcome, Any]:
        """Send `envelope` to its agent's actor and wait for the outcome (and the actor's handle)."""
        for _ in range(_RESENDS):
            handle, incarnation = await self._activate(envelope.recipient)
            key = (envelope.recipient, incarnation)
            seq = self._seqs[key] = self._seqs.get(key, 0) + 1
            numbered = dataclasses.replace(envelope, stream=self._prefix, seq=seq)
            try:
                outcome: Outcome = await handle.deliver.options(max_task_retries=self._retries).remote(numbered)
            except RayActorError as exc:
                if await self._stale(envelope.recipient, incarnation, exc):
                    continue
                raise AgentActorDiedError(
                    f"the actor of {envelope.recipient} died before answering "
                    f"(message {type(envelope.message).__qualname__}); it may or may not have been handled: {exc}"
                ) from None
            if outcome.retired and await self._stale(envelope.recipient, incarnation, None):
                continue
            return outcome, handle
        raise AgentActorDiedError(f"{envelope.recipient} kept deactivating while a message was sent to it")

    # --- one way ---

    async def send(
        self, message: Any, recipient: AgentId, sender: AgentId | None, token: CancellationToken | None
    ) -> None:
        self._check_open()
        message_id = self._next_id()
        span = None
        if self._observer is not None:
            span = self._observer.on_send(SendInfo("send", recipient.type, recipient, sender, message_id))
        envelope = Envelope(message, recipient, sender, False, message_id, None if span is None else span.trace)
        handle, _ = await self._activate(recipient)  # AgentNotFoundError now, not in the watcher
        self._watch(envelope)
        if span is not None:
            span.end()
        if token is not None:
            token.add_callback(lambda: handle.cancel.remote(message_id))

    def _watch(self, envelope: Envelope) -> None:
        future = asyncio.ensure_future(self._one_way_outcome(envelope))
        futures = self._one_way.setdefault(envelope.recipient, set())
        futures.add(future)
        future.add_done_callback(futures.discard)

    async def _one_way_outcome(self, envelope: Envelope) -> None:
        try:
            outcome, _ = await self._deliver(envelope)
        except Exception as exc:
            outcome = Outcome(error=exc)
        if outcome.error is not None and not isinstance(outcome.error, RuntimeClosedError):
            logger.error(
                "handler of %s failed on one-way %s from %s: %s",
                envelope.recipient,
                type(envelope.message).__qualname__,
                envelope.sender or "outside",
                outcome.error,
            )

    async def _settled_one_way(self, recipient: AgentId) -> None:
        """The outcomes of the one-way messages sent to `recipient` so far (handled before an RPC sent after)."""
        pending = list(self._one_way.get(recipient, ()))
        if pending:
            await asyncio.wait(pending)

    # --- RPC ---

    async def call(
        self,
        message: Any,
        recipient: AgentId,
        sender: AgentId | None,
        timeout: float | None,
        token: CancellationToken | None,
    ) -> Any:
        self._check_open()
        message_id = self._next_id()
        span = None
        if self._observer is not None:
            span = self._observer.on_send(SendInfo("rpc", recipient.type, recipient, sender, message_id))
        envelope = Envelope(message, recipient, sender, True, message_id, None if span is None else span.trace)
        try:
            await self._activate(recipient)
        except BaseException as exc:
            if span is not None:
                span.end(exc)
            raise
        waiter = asyncio.ensure_future(self._deliver(envelope))
        remove = token.add_callback(waiter.cancel) if token is not None else None
        outcome: Outcome | None = None
        try:
            try:
                outcome, _ = await asyncio.wait_for(waiter, timeout)
            except asyncio.TimeoutError:
                name = type(message).__qualname__
                raise TimeoutError(f"no response from {recipient} within {timeout:g} s (message {name})") from None
            finally:
                if outcome is None:
                    self._cancel_remote(recipient, message_id)
            await self._settled_one_way(recipient)
            assert outcome is not None
            if outcome.cancelled:
                raise asyncio.CancelledError()
            if outcome.error is not None:
                raise outcome.error
        except BaseException as exc:
            if span is not None:
                span.end(exc, None if outcome is None else outcome.answer_trace)
            raise
        finally:
            if remove is not None:
                remove()
        assert outcome is not None
        if span is not None:
            span.end(None, outcome.answer_trace)
        return outcome.result

    def _cancel_remote(self, recipient: AgentId, message_id: str) -> None:
        found = self._actors.get(recipient)
        if found is not None:
            found[0].cancel.remote(message_id)

    # --- broadcast and publish ---

    async def broadcast(self, message: Any, agent_type: str, sender: AgentId | None) -> None:
        self._check_open()
        if not await self._registry.registered.remote([agent_type]):
            raise AgentNotFoundError(f"no agent factory is registered for agent type {agent_type!r}")
        span = (
            None if self._observer is None else self._observer.on_send(SendInfo("broadcast", agent_type, None, sender))
        )
        trace = None if span is None else span.trace
        actors = await self._registry.active.remote(agent_type)
        calls = [h.broadcast.remote(message, sender, trace) for a, h in actors if a != sender]
        results = await asyncio.gather(*calls, return_exceptions=True)
        for error in (r for r in results if isinstance(r, BaseException)):
            logger.warning("a broadcast to %r missed an agent whose actor is gone: %s", agent_type, error)
        if span is not None:
            span.end()

    async def publish(
        self,
        message: Any,
        topic_id: TopicId,
        sender: AgentId | None,
        token: CancellationToken | None,
        message_id: str | None,
    ) -> None:
        self._check_open()
        recipients, missing = await self._registry.recipients.remote(topic_id, sender)
        if missing:
            names = ", ".join(repr(m) for m in missing)
            raise AgentNotFoundError(
                f"no agent factory is registered for agent type {names} (subscribed to {topic_id})"
            )
        if not recipients:
            return
        message_id = message_id or self._next_id()
        span = None
        if self._observer is not None:
            span = self._observer.on_send(SendInfo("publish", topic_id.type, None, sender, message_id))
        trace = None if span is None else span.trace
        await asyncio.gather(*(self._activate(r) for r in recipients))
        for recipient in recipients:
            self._watch(Envelope(message, recipient, sender, False, message_id, trace, topic_id))
        if span is not None:
            span.end()
        if token is not None:
            token.add_callback(lambda: self._cancel_all(recipients, message_id))

    def _cancel_all(self, recipients: list[AgentId], message_id: str) -> None:
        for recipient in recipients:
            self._cancel_remote(recipient, message_id)
