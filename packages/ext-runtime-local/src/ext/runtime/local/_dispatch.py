"""The mailbox machinery of `LocalAgentRuntime`: queueing a message in its agent's mailbox, the consumer task
that runs the agent's handlers one at a time (inside the observer's process span when there is one), cancelling
and expiring deliveries, and settling each one's future and reply.

When an agent is created, rolled back and deactivated is `_activation.py`'s; the public API is `_runtime.py`'s."""

from __future__ import annotations

import asyncio
import itertools
import logging
from abc import ABC, abstractmethod
from typing import Any

from ext.core import (
    Agent,
    AgentFactory,
    AgentId,
    AgentNotFoundError,
    MessageContext,
    RuntimeClosedError,
    RuntimeObserver,
)

from ._mailbox import CANCELLING, DONE, QUEUED, RUNNING, AgentCall, Delivery, Reply, Slot, uncancel
from ._state import AgentStates

__all__ = ["Dispatcher"]

logger = logging.getLogger(__name__)

_runtime_ids = itertools.count(1)


class Dispatcher(ABC):
    """Per-agent mailboxes and their consumers. The hooks (`_ensure_agent`, `_roll_back`, `_on_idle`) are the
    agent's activation and deactivation (`Activation`)."""

    def __init__(
        self, *, states: AgentStates | None, idle_timeout: float | None, observer: RuntimeObserver | None
    ) -> None:
        self._observer = observer
        self._idle_timeout = idle_timeout
        self._states = states
        self._factories: dict[str, AgentFactory] = {}
        self._slots: dict[AgentId, Slot] = {}
        self._closed = False
        self._cancelling = False
        self._prefix = f"local{next(_runtime_ids)}-"
        self._seq = itertools.count(1)

    @abstractmethod
    async def _ensure_agent(self, slot: Slot) -> Agent:
        """The slot's agent, created (and its state loaded) if it is not active."""

    @abstractmethod
    async def _roll_back(self, slot: Slot) -> None:
        """After a handler raised (or was cancelled)."""

    @abstractmethod
    def _on_idle(self, slot: Slot) -> None:
        """`idle_timeout` seconds after the slot's mailbox ran empty."""

    def _next_id(self) -> str:
        return f"{self._prefix}{next(self._seq)}"

    def _slot(self, agent_id: AgentId) -> Slot:
        slot = self._slots.get(agent_id)
        if slot is None:
            if agent_id.type not in self._factories:
                raise AgentNotFoundError(f"no agent factory is registered for agent type {agent_id.type!r}")
            slot = self._slots[agent_id] = Slot(agent_id)
        return slot

    def _enqueue(
        self,
        slot: Slot,
        message: Any,
        ctx: MessageContext,
        future: asyncio.Future[Any] | None,
        reply: Reply | None,
    ) -> Delivery:
        item = Delivery(slot, message, ctx, future, reply)
        slot.mailbox.append(item)
        slot.cancel_idle_timer()
        if slot.consumer is None:
            slot.consumer = asyncio.get_running_loop().create_task(self._consume(slot))
        return item

    def _expire(self, item: Delivery, timeout: float) -> None:
        if item.future is not None and not item.future.done():
            recipient = item.ctx.recipient
            name = type(item.message).__qualname__
            item.future.set_exception(
                TimeoutError(f"no response from {recipient} within {timeout:g} s (message {name})")
            )
        self._cancel(item)

    def _cancel(self, item: Delivery) -> None:
        if item.state == QUEUED:
            item.ctx.cancellation_token.cancel()
            item.state = DONE
            error = asyncio.CancelledError()
            self._settle(item, None, error)
            if item.reply is not None:
                # Rare path (cancelled before it started): the reply runs in its own task.
                asyncio.get_running_loop().create_task(self._safe_reply(item, None, error))
        elif item.state == RUNNING:
            item.ctx.cancellation_token.cancel()
            item.state = CANCELLING
            consumer = item._slot.consumer
            if consumer is not None:
                consumer.cancel()

    async def _consume(self, slot: Slot) -> None:
        mailbox = slot.mailbox
        try:
            while mailbox:
                item = mailbox.popleft()
                if item.state != QUEUED:
                    continue
                item.state = RUNNING
                slot.current = item
                message = item.message
                try:
                    agent = slot.agent if slot.agent is not None else await self._ensure_agent(slot)
                    if message.__class__ is AgentCall:
                        result = await message.fn(agent)
                    elif self._observer is None:
                        result = await agent.on_message(message, item.ctx)
                        if self._states is not None:
                            await self._states.handled(slot, agent)
                    else:
                        result = await self._observed(agent, item)
                        if self._states is not None:
                            await self._states.handled(slot, agent)
                except asyncio.CancelledError as exc:
                    if item.state != CANCELLING:
                        raise  # the consumer itself is being cancelled: stop() past its grace period
                    uncancel()
                    await self._roll_back(slot)
                    await self._finish(item, None, exc)
                except Exception as exc:
                    await self._roll_back(slot)
                    await self._finish(item, None, exc)
                else:
                    if item.state == CANCELLING:
                        uncancel()  # the handler swallowed its cancellation
                    await self._finish(item, result, None)
        except asyncio.CancelledError:
            error = RuntimeClosedError(f"the runtime stopped before {slot.agent_id} handled the message")
            pending = [slot.current] if slot.current is not None and slot.current.state != DONE else []
            pending += [i for i in mailbox if i.state == QUEUED]
            mailbox.clear()
            for item in pending:
                item.ctx.cancellation_token.cancel()
                await self._finish(item, None, error)
            if not self._cancelling:
                raise
        finally:
            slot.current = None
            slot.consumer = None
            if mailbox and not self._closed:
                # A message queued while this task was finishing: hand the mailbox to a fresh consumer.
                slot.consumer = asyncio.get_running_loop().create_task(self._consume(slot))
            elif self._idle_timeout is not None and not self._closed:
                slot.idle_timer = asyncio.get_running_loop().call_later(self._idle_timeout, self._on_idle, slot)

    async def _observed(self, agent: Agent, item: Delivery) -> Any:
        """The handler inside the observer's process span, begun and ended in this task (so it may be current)."""
        assert self._observer is not None
        span = self._observer.on_process(item.ctx)
        item.answer_trace = span.trace
        try:
            result = await agent.on_message(item.message, item.ctx)
        except BaseException as exc:
            span.end(exc)
            raise
        span.end()
        return result

    def _settle(self, item: Delivery, result: Any, error: BaseException | None) -> None:
        future = item.future
        if future is not None and not future.done():
            if error is None:
                future.set_result(result)
            elif isinstance(error, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(error)

    async def _finish(self, item: Delivery, result: Any, error: BaseException | None) -> None:
        item.state = DONE
        item._slot.current = None
        self._settle(item, result, error)
        ctx = item.ctx
        if error is not None and not ctx.is_rpc and not isinstance(error, (asyncio.CancelledError, RuntimeClosedError)):
            # One-way: nobody awaits it, so the error is logged here, before the agent's next message.
            logger.error(
                "handler of %s failed on one-way %s from %s: %s",
                ctx.recipient,
                type(item.message).__qualname__,
                ctx.sender or "outside",
                error,
                exc_info=error,
            )
        if item.reply is not None:
            await self._safe_reply(item, result, error)

    async def _safe_reply(self, item: Delivery, result: Any, error: BaseException | None) -> None:
        assert item.reply is not None
        try:
            await item.reply(result, error)
        except Exception:
            logger.exception("replying for %s failed", item.ctx.recipient)
