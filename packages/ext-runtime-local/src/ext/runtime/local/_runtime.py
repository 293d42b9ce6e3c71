"""`LocalAgentRuntime`: every agent in one process and one event loop."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any

from ext.core import AgentId, AgentType, CancellationToken
from ext.core._runtime import (
    DEFAULT_RPC_TIMEOUT,
    Agent,
    AgentFactory,
    AgentNotFoundError,
    MessageContext,
    RuntimeClosedError,
    UndeliverableError,
    agent_type_name,
    check_agent_id,
    check_timeout,
)

logger = logging.getLogger(__name__)

_ids = itertools.count(1)


class _Slot:
    """One agent id: its instance once created, and the lock that makes its handlers run one at a time."""

    __slots__ = ("agent", "lock")

    def __init__(self) -> None:
        self.agent: Agent | None = None
        self.lock = asyncio.Lock()


class LocalAgentRuntime:
    """The in-process agent runtime (the embedded default).

    Agents are created by their type's factory on the first message to their id and live until `stop()`.
    Each agent handles one message at a time, in the order messages were sent to it; different agents run
    concurrently. Not thread-safe: use it from the event loop that runs it.

    Args:
        stop_timeout: seconds `stop()` lets in-flight handlers finish before cancelling them (default 5.0).
    """

    def __init__(self, *, stop_timeout: float = 5.0) -> None:
        checked = check_timeout(stop_timeout, "stop_timeout")
        if checked is None:
            raise ValueError("stop_timeout must be a positive number of seconds, got None")
        self._stop_timeout = checked
        self._factories: dict[str, AgentFactory] = {}
        self._slots: dict[AgentId, _Slot] = {}
        self._tasks: dict[asyncio.Task[Any], MessageContext] = {}
        self._closed = False
        self._cancelling = False
        self._prefix = f"local{next(_ids)}"
        self._seq = itertools.count(1)

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Nothing to connect: kept for the `AgentRuntime` protocol. Raises if the runtime was stopped."""
        self._check_open()

    async def stop(self) -> None:
        """Refuse new messages, let in-flight handlers finish (up to `stop_timeout`, then cancel them), and
        close every agent. Idempotent."""
        if self._closed:
            return
        self._closed = True
        current = asyncio.current_task()
        pending = [t for t in self._tasks if t is not current and not t.done()]
        if pending:
            _, not_done = await asyncio.wait(pending, timeout=self._stop_timeout)
            if not_done:
                self._cancelling = True
                for task in not_done:
                    self._abort(task)
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
        if not callable(factory):
            raise TypeError(f"factory must be callable as factory(agent_id, runtime), got {type(factory).__name__}")
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
        slot = self._slot(agent_id)
        async with slot.lock:
            if slot.agent is None:
                slot.agent = await self._create(agent_id)
            return slot.agent

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
        if sender is not None:
            check_agent_id(sender, "sender")
        self._check_open()
        slot = self._slot(recipient)
        ctx = MessageContext(recipient, sender, False, self._next_id())
        task = self._spawn(self._deliver(slot, message, ctx), ctx)
        if cancellation_token is not None:
            self._link(cancellation_token, task)

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
        if sender is not None:
            check_agent_id(sender, "sender")
        timeout = check_timeout(timeout)
        self._check_open()
        slot = self._slot(recipient)
        ctx = MessageContext(recipient, sender, True, self._next_id())
        task = self._spawn(self._deliver(slot, message, ctx), ctx)
        if cancellation_token is not None:
            self._link(cancellation_token, task)
        try:
            done, _ = await asyncio.wait((task,), timeout=timeout)
        except asyncio.CancelledError:
            self._abort(task)
            raise
        if not done:
            self._abort(task)
            raise TimeoutError(
                f"no response from {recipient} within {timeout:g} s (message {type(message).__qualname__})"
            )
        return task.result()

    async def broadcast(self, message: Any, agent_type: str | AgentType, *, sender: AgentId | None = None) -> None:
        """Queue `message` for every agent of `agent_type` created so far, except `sender`. Creates no agent."""
        name = agent_type_name(agent_type)
        if sender is not None:
            check_agent_id(sender, "sender")
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
        reply: Callable[[Any, BaseException | None], Awaitable[None]] | None = None,
    ) -> asyncio.Task[Any]:
        """Start delivering `message` now and return the delivery task: for runtimes that host agents on
        behalf of remote callers (`ext.runtime.grpc`). Deliveries start in call order.

        With `reply`, the task awaits `reply(result, None)` or `reply(None, error)` after the handler (for an
        RPC the error is the handler's; a one-way handler's error is logged instead). `cancel_delivery(task)`
        cancels it. Raises `AgentNotFoundError` / `RuntimeClosedError` at once.
        """
        self._check_open()
        slot = self._slot(recipient)
        ctx = MessageContext(recipient, sender, rpc, message_id or self._next_id())
        coro = self._deliver(slot, message, ctx) if reply is None else self._deliver_and_reply(slot, message, ctx, reply)
        return self._spawn(coro, ctx)

    def cancel_delivery(self, task: asyncio.Task[Any]) -> None:
        """Cancel a task from `deliver`: the handler's cancellation token first, then the task."""
        self._abort(task)

    def broadcast_now(self, message: Any, agent_type: str, *, sender: AgentId | None = None) -> int:
        """`broadcast` for hosting runtimes: starts the deliveries now and returns how many there are;
        a type with no factory here reaches nobody."""
        self._check_open()
        count = 0
        for agent_id, slot in list(self._slots.items()):
            if agent_id.type != agent_type or slot.agent is None or agent_id == sender:
                continue
            ctx = MessageContext(agent_id, sender, False, self._next_id(), is_broadcast=True)
            self._spawn(self._deliver(slot, message, ctx), ctx)
            count += 1
        return count

    # --- internals -------------------------------------------------------------------------------------

    async def _deliver_and_reply(
        self,
        slot: _Slot,
        message: Any,
        ctx: MessageContext,
        reply: Callable[[Any, BaseException | None], Awaitable[None]],
    ) -> Any:
        try:
            result = await self._deliver(slot, message, ctx)
        except asyncio.CancelledError as exc:
            await reply(None, exc)
            raise
        except Exception as exc:
            await reply(None, exc)
            return None
        await reply(result, None)
        return result

    def _next_id(self) -> str:
        return f"{self._prefix}-{next(self._seq)}"

    def _slot(self, agent_id: AgentId) -> _Slot:
        slot = self._slots.get(agent_id)
        if slot is None:
            if agent_id.type not in self._factories:
                raise AgentNotFoundError(f"no agent factory is registered for agent type {agent_id.type!r}")
            slot = self._slots[agent_id] = _Slot()
        return slot

    def _spawn(self, coro: Coroutine[Any, Any, Any], ctx: MessageContext) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks[task] = ctx
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        # Marks the exception retrieved: an RPC caller that gave up, or a one-way send cut short by stop().
        if not task.cancelled():
            task.exception()

    def _link(self, token: CancellationToken, task: asyncio.Task[Any]) -> None:
        remove = token.add_callback(lambda: self._abort(task))
        task.add_done_callback(lambda _t: remove())

    def _abort(self, task: asyncio.Task[Any]) -> None:
        """Cancel a delivery: the handler's token first, so the handler sees it cancelled when it unwinds."""
        ctx = self._tasks.get(task)
        if ctx is None:
            return
        ctx.cancellation_token.cancel()
        task.cancel()

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

    async def _deliver(self, slot: _Slot, message: Any, ctx: MessageContext) -> Any:
        try:
            async with slot.lock:
                if slot.agent is None:
                    slot.agent = await self._create(ctx.recipient)
                return await slot.agent.on_message(message, ctx)
        except asyncio.CancelledError:
            ctx.cancellation_token.cancel()
            if self._cancelling:
                raise RuntimeClosedError(f"the runtime stopped before {ctx.recipient} handled the message") from None
            raise
        except Exception as exc:
            if not ctx.is_rpc:
                # One-way: nobody awaits this task, so the error is logged here, before the agent's next message.
                logger.error(
                    "handler of %s failed on one-way %s from %s: %s",
                    ctx.recipient,
                    type(message).__qualname__,
                    ctx.sender or "outside",
                    exc,
                    exc_info=exc,
                )
                return None
            raise
