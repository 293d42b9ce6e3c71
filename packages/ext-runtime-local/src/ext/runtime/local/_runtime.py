"""`LocalAgentRuntime`: every agent in one process and one event loop."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any

from ext.core import (
    DEFAULT_RPC_TIMEOUT,
    Agent,
    AgentFactory,
    AgentId,
    AgentNotFoundError,
    AgentType,
    CancellationToken,
    MessageContext,
    RuntimeClosedError,
    UndeliverableError,
    agent_type_name,
    check_agent_id,
    check_factory,
    check_seconds,
    check_sender,
    check_timeout,
)

logger = logging.getLogger(__name__)

_runtime_ids = itertools.count(1)

Reply = Callable[[Any, "BaseException | None"], Awaitable[None]]

_QUEUED, _RUNNING, _CANCELLING, _DONE = range(4)


class Delivery:
    """One message on its way to one agent: queued in the agent's mailbox, then handled. Returned by
    `LocalAgentRuntime.deliver` so a hosting runtime can cancel it."""

    __slots__ = ("_slot", "ctx", "future", "message", "reply", "state")

    def __init__(
        self,
        slot: _Slot,
        message: Any,
        ctx: MessageContext,
        future: asyncio.Future[Any] | None,
        reply: Reply | None,
    ) -> None:
        self._slot = slot
        self.message = message
        self.ctx = ctx
        self.future = future
        self.reply = reply
        self.state = _QUEUED

    @property
    def done(self) -> bool:
        return self.state == _DONE


class _Slot:
    """One agent id: its instance once created, and its mailbox. A consumer task runs while the mailbox
    has messages, so handlers of one agent run one at a time, in arrival order, with no task per message."""

    __slots__ = ("agent", "agent_id", "consumer", "create_lock", "current", "mailbox")

    def __init__(self, agent_id: AgentId) -> None:
        self.agent_id = agent_id
        self.agent: Agent | None = None
        self.mailbox: deque[Delivery] = deque()
        self.consumer: asyncio.Task[None] | None = None
        self.current: Delivery | None = None
        self.create_lock: asyncio.Lock | None = None


class LocalAgentRuntime:
    """The in-process agent runtime (the embedded default).

    Agents are created by their type's factory on the first message to their id and live until `stop()`.
    Each agent handles one message at a time, in the order messages were sent to it; different agents run
    concurrently. Not thread-safe: use it from the event loop that runs it.

    Args:
        stop_timeout: seconds `stop()` lets in-flight handlers finish before cancelling them (default 5.0).
    """

    def __init__(self, *, stop_timeout: float = 5.0) -> None:
        self._stop_timeout = check_seconds(stop_timeout, "stop_timeout")
        self._factories: dict[str, AgentFactory] = {}
        self._slots: dict[AgentId, _Slot] = {}
        self._closed = False
        self._cancelling = False
        self._prefix = f"local{next(_runtime_ids)}-"
        self._seq = itertools.count(1)

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Nothing to connect: kept for the `AgentRuntime` protocol. Raises if the runtime was stopped."""
        self._check_open()

    async def stop(self) -> None:
        """Refuse new messages, let queued and in-flight handlers finish (up to `stop_timeout`, then cancel
        them), and close every agent. Idempotent."""
        if self._closed:
            return
        self._closed = True
        current = asyncio.current_task()
        consumers = {s.consumer for s in self._slots.values() if s.consumer is not None and s.consumer is not current}
        if consumers:
            _, not_done = await asyncio.wait(consumers, timeout=self._stop_timeout)
            if not_done:
                self._cancelling = True
                for slot in self._slots.values():
                    if slot.current is not None:
                        slot.current.ctx.cancellation_token.cancel()
                for task in not_done:
                    task.cancel()
                # A handler that swallows cancellation must not hang stop() either.
                await asyncio.wait(not_done, timeout=self._stop_timeout)
        slots, self._slots = self._slots, {}
        for agent_id, slot in slots.items():
            if slot.agent is None:
                continue
            try:
                await slot.agent.close()
            except Exception:
                logger.exception("closing agent %s failed", agent_id)

    async def __aenter__(self) -> LocalAgentRuntime:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")

    # --- registration and the registry -----------------------------------------------------------------

    async def register_agent_factory(self, agent_type: str | AgentType, factory: AgentFactory) -> AgentType:
        """Register the factory for `agent_type`; a type can be registered once."""
        name = agent_type_name(agent_type)
        factory = check_factory(factory)
        self._check_open()
        if name in self._factories:
            raise ValueError(f"agent_type {name!r} is already registered")
        self._factories[name] = factory
        return AgentType(name)

    async def list_agents(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        """The agents created so far (of one type, or all), sorted by type then key."""
        name = None if agent_type is None else agent_type_name(agent_type)
        found = [a for a, s in self._slots.items() if s.agent is not None and (name is None or a.type == name)]
        return sorted(found, key=lambda a: (a.type, a.key))

    async def get_agent(self, agent_id: AgentId) -> Agent:
        """The local instance for `agent_id`, created now if it does not exist yet."""
        agent_id = check_agent_id(agent_id, "agent_id")
        self._check_open()
        return await self._ensure_agent(self._slot(agent_id))

    # --- messaging -------------------------------------------------------------------------------------

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> None:
        """Queue `message` for `recipient` and return; a handler error is logged with its traceback.
        Raises `AgentNotFoundError` at once when no factory is registered for the recipient's type."""
        recipient = check_agent_id(recipient)
        check_sender(sender)
        self._check_open()
        slot = self._slot(recipient)
        item = self._enqueue(slot, message, MessageContext(recipient, sender, False, self._next_id()), None, None)
        if cancellation_token is not None:
            cancellation_token.add_callback(lambda: self._cancel(item))

    async def send_and_await_response(
        self,
        message: Any,
        recipient: AgentId,
        timeout: float | None = DEFAULT_RPC_TIMEOUT,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> Any:
        """Deliver `message` and return what the handler returns. The handler's exception is re-raised
        as is; after `timeout` seconds the handler is cancelled and `TimeoutError` raised."""
        recipient = check_agent_id(recipient)
        check_sender(sender)
        timeout = check_timeout(timeout)
        self._check_open()
        slot = self._slot(recipient)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        ctx = MessageContext(recipient, sender, True, self._next_id())
        item = self._enqueue(slot, message, ctx, future, None)
        remove = cancellation_token.add_callback(lambda: self._cancel(item)) if cancellation_token else None
        timer = loop.call_later(timeout, self._expire, item, timeout) if timeout is not None else None
        try:
            return await future
        except asyncio.CancelledError:
            self._cancel(item)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if remove is not None:
                remove()

    async def broadcast(self, message: Any, agent_type: str | AgentType, *, sender: AgentId | None = None) -> None:
        """Queue `message` for every agent of `agent_type` created so far, except `sender`. Creates no agent."""
        name = agent_type_name(agent_type)
        check_sender(sender)
        self._check_open()
        if name not in self._factories:
            raise AgentNotFoundError(f"no agent factory is registered for agent type {name!r}")
        self.broadcast_now(message, name, sender=sender)

    # --- hosting for remote callers ----------------------------------------------------------------------

    def deliver(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        rpc: bool = False,
        message_id: str | None = None,
        reply: Reply | None = None,
    ) -> Delivery:
        """Queue `message` for `recipient` now and return the `Delivery`: for runtimes that host agents on
        behalf of remote callers (`ext.runtime.grpc`). Deliveries are handled in call order.

        With `reply`, the runtime awaits `reply(result, None)` or `reply(None, error)` after the handler (the
        error is the handler's, `CancelledError` when cancelled; a one-way handler's error is also logged).
        `cancel_delivery(delivery)` cancels it. Raises `AgentNotFoundError` / `RuntimeClosedError` at once.
        """
        self._check_open()
        slot = self._slot(recipient)
        ctx = MessageContext(recipient, sender, rpc, message_id or self._next_id())
        return self._enqueue(slot, message, ctx, None, reply)

    def deliver_here(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        rpc: bool = False,
        message_id: str | None = None,
        reply: Reply | None = None,
    ) -> tuple[Delivery, Coroutine[Any, Any, None] | None]:
        """`deliver`, plus: when the agent is idle, a coroutine that the calling task must await at once. It
        runs the agent's mailbox in the calling task, so the handler starts without a task switch (a hosting
        runtime's reader hands its stream to a fresh reader task first). None when the agent is busy: its
        consumer task handles the message in turn."""
        self._check_open()
        slot = self._slot(recipient)
        ctx = MessageContext(recipient, sender, rpc, message_id or self._next_id())
        item = Delivery(slot, message, ctx, None, reply)
        slot.mailbox.append(item)
        if slot.consumer is not None:
            return item, None
        task = asyncio.current_task()
        assert task is not None, "deliver_here must be called from a task"
        slot.consumer = task
        return item, self._consume(slot)

    def cancel_delivery(self, delivery: Delivery) -> None:
        """Cancel a delivery: skipped if still queued, its handler cancelled if running (the handler's
        cancellation token is cancelled first)."""
        self._cancel(delivery)

    def broadcast_now(self, message: Any, agent_type: str, *, sender: AgentId | None = None) -> int:
        """`broadcast` for hosting runtimes: queues the deliveries now and returns how many there are;
        a type with no factory here reaches nobody."""
        self._check_open()
        count = 0
        for agent_id, slot in list(self._slots.items()):
            if agent_id.type != agent_type or slot.agent is None or agent_id == sender:
                continue
            ctx = MessageContext(agent_id, sender, False, self._next_id(), is_broadcast=True)
            self._enqueue(slot, message, ctx, None, None)
            count += 1
        return count

    # --- internals -------------------------------------------------------------------------------------

    def _next_id(self) -> str:
        return f"{self._prefix}{next(self._seq)}"

    def _slot(self, agent_id: AgentId) -> _Slot:
        slot = self._slots.get(agent_id)
        if slot is None:
            if agent_id.type not in self._factories:
                raise AgentNotFoundError(f"no agent factory is registered for agent type {agent_id.type!r}")
            slot = self._slots[agent_id] = _Slot(agent_id)
        return slot

    def _enqueue(
        self,
        slot: _Slot,
        message: Any,
        ctx: MessageContext,
        future: asyncio.Future[Any] | None,
        reply: Reply | None,
    ) -> Delivery:
        item = Delivery(slot, message, ctx, future, reply)
        slot.mailbox.append(item)
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
        if item.state == _QUEUED:
            item.ctx.cancellation_token.cancel()
            item.state = _DONE
            error = asyncio.CancelledError()
            self._settle(item, None, error)
            if item.reply is not None:
                # Rare path (cancelled before it started): the reply runs in its own task.
                asyncio.get_running_loop().create_task(self._safe_reply(item, None, error))
        elif item.state == _RUNNING:
            item.ctx.cancellation_token.cancel()
            item.state = _CANCELLING
            consumer = item._slot.consumer
            if consumer is not None:
                consumer.cancel()

    async def _ensure_agent(self, slot: _Slot) -> Agent:
        if slot.agent is not None:
            return slot.agent
        if slot.create_lock is None:
            slot.create_lock = asyncio.Lock()
        async with slot.create_lock:
            if slot.agent is None:
                slot.agent = await self._create(slot.agent_id)
            return slot.agent

    async def _create(self, agent_id: AgentId) -> Agent:
        factory = self._factories[agent_id.type]
        try:
            agent = factory(agent_id, self)
            if inspect.isawaitable(agent):
                agent = await agent
        except Exception as exc:
            raise UndeliverableError(f"the factory for {agent_id.type!r} failed to create {agent_id}: {exc}") from exc
        if not isinstance(agent, Agent):
            raise UndeliverableError(
                f"the factory for {agent_id.type!r} returned {type(agent).__name__}, not an Agent "
                "(an object with id, on_message and close)"
            )
        if agent.id != agent_id:
            raise UndeliverableError(f"the factory for {agent_id.type!r} returned an agent with id {agent.id}")
        return agent

    async def _consume(self, slot: _Slot) -> None:
        mailbox = slot.mailbox
        try:
            while mailbox:
                item = mailbox.popleft()
                if item.state != _QUEUED:
                    continue
                item.state = _RUNNING
                slot.current = item
                try:
                    agent = slot.agent if slot.agent is not None else await self._ensure_agent(slot)
                    result = await agent.on_message(item.message, item.ctx)
                except asyncio.CancelledError as exc:
                    if item.state != _CANCELLING:
                        raise  # the consumer itself is being cancelled: stop() past its grace period
                    _uncancel()
                    await self._finish(item, None, exc)
                except Exception as exc:
                    await self._finish(item, None, exc)
                else:
                    if item.state == _CANCELLING:
                        _uncancel()  # the handler swallowed its cancellation
                    await self._finish(item, result, None)
        except asyncio.CancelledError:
            error = RuntimeClosedError(f"the runtime stopped before {slot.agent_id} handled the message")
            pending = [slot.current] if slot.current is not None and slot.current.state != _DONE else []
            pending += [i for i in mailbox if i.state == _QUEUED]
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
        item.state = _DONE
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


def _uncancel() -> None:
    """Forget a handled cancellation (3.11+), so later handlers on this consumer see a clean task."""
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()
