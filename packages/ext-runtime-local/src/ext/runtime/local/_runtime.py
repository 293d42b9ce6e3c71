"""`LocalAgentRuntime`: every agent in one process and one event loop. Its public API (lifecycle, registration,
state, sending, hosting for remote callers) is here; the mailboxes and their consumers are `Dispatcher`
(`_dispatch.py`), when agents are created and released is `Activation` (`_activation.py`)."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from ext.core import (
    DEFAULT_RPC_TIMEOUT,
    Agent,
    AgentFactory,
    AgentId,
    AgentNotFoundError,
    AgentType,
    AsyncStartStop,
    CancellationToken,
    InMemoryStateStore,
    MessageContext,
    RuntimeClosedError,
    RuntimeObserver,
    SavePolicy,
    SendInfo,
    StateStore,
    Subscription,
    SubscriptionTable,
    TopicId,
    TraceContext,
    UndeliverableError,
    agent_type_name,
    check_agent_id,
    check_factory,
    check_message_id,
    check_seconds,
    check_sender,
    check_timeout,
    check_topic_id,
)

from ._activation import Activation
from ._mailbox import AgentCall, Delivery, Reply, Slot, save_agent_state
from ._state import AgentStates, parse_runtime_state


class LocalAgentRuntime(Activation, AsyncStartStop):
    """The in-process agent runtime (the embedded default).

    Agents are created by their type's factory on the first message to their id and live until `stop()`
    (or, with `idle_timeout`, until they are idle that long). Each agent handles one message at a time, in the
    order messages were sent to it; different agents run concurrently. Not thread-safe: use it from the event
    loop that runs it.

    Args:
        stop_timeout: seconds `stop()` lets in-flight handlers finish before cancelling them (default 5.0).
        state_store: where agents' states are kept (`InMemoryStateStore`, `FileStateStore`, a Redis store).
            With one, an agent's stored state is loaded when it is created, and saved per `save_policy`, when
            it is deactivated and when the runtime stops. A handler that raises (or is cancelled) saves
            nothing: the agent object is dropped and the next message recreates it from the last saved state.
            Default None: states are not kept (unless `idle_timeout` is set: then in memory).
        save_policy: when to save (default `SavePolicy()`: after each message handled without error).
        idle_timeout: seconds after which an agent with nothing to do is deactivated: its state is saved, it
            is closed and released, and its next message creates it again with that state (default None:
            agents live until `stop()`).
        observer: a `RuntimeObserver` (such as ext-telemetry-opentelemetry's `OpenTelemetryRuntimeObserver`) told
            of each send and each handling; the trace context it gives a message reaches the handler as
            `ctx.trace` (default None: nothing is observed).
    """

    def __init__(
        self,
        *,
        stop_timeout: float = 5.0,
        state_store: StateStore | None = None,
        save_policy: SavePolicy | None = None,
        idle_timeout: float | None = None,
        observer: RuntimeObserver | None = None,
    ) -> None:
        if observer is not None and not isinstance(observer, RuntimeObserver):
            raise TypeError(f"observer must be a RuntimeObserver (on_send, on_process), got {type(observer).__name__}")
        self._stop_timeout = check_seconds(stop_timeout, "stop_timeout")
        if state_store is not None and not isinstance(state_store, StateStore):
            raise TypeError(f"state_store must be a StateStore, got {type(state_store).__name__}")
        if save_policy is not None and not isinstance(save_policy, SavePolicy):
            raise TypeError(f"save_policy must be a SavePolicy, got {type(save_policy).__name__}")
        idle_timeout = check_timeout(idle_timeout, "idle_timeout")
        if state_store is None and idle_timeout is not None:
            state_store = InMemoryStateStore()  # a deactivated agent must come back with its state
        states = AgentStates(state_store, save_policy or SavePolicy()) if state_store is not None else None
        super().__init__(states=states, idle_timeout=idle_timeout, observer=observer)
        self._subscriptions = SubscriptionTable()

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
        for slot in slots.values():
            await self._release(slot, save=True)

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

    @property
    def state_store(self) -> StateStore | None:
        """The state store, or None when states are not kept."""
        return None if self._states is None else self._states.store

    async def save_state(self) -> dict[str, Mapping[str, Any]]:
        """Each active agent's `save_state()` (taken in turn with its messages) and, with a state store, the
        stored state of each deactivated agent of a registered type, keyed by `str(agent_id)`."""
        self._check_open()
        result = {} if self._states is None else await self._states.stored(self._factories)
        for agent_id, slot in list(self._slots.items()):
            if slot.agent is not None and hasattr(slot.agent, "save_state"):
                result[str(agent_id)] = await self._call(slot, save_agent_state)
        return dict(sorted(result.items()))

    async def load_state(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Give each agent named in `state` (as `save_state` returned it) its state, creating it if needed;
        with a state store the state is also saved there at once. Bad keys fail before any agent changes."""
        self._check_open()
        for agent_id, agent_state in parse_runtime_state(state, self._factories):
            slot = self._slot(agent_id)
            await self._call(slot, functools.partial(self._load_into, slot, agent_state))

    async def _load_into(self, slot: Slot, state: Mapping[str, Any], agent: Agent) -> None:
        loader = getattr(agent, "load_state", None)
        if loader is None:
            raise TypeError(f"agent {slot.agent_id} has no load_state method (subclass BaseAgent to keep state)")
        await loader(state)
        if self._states is not None:
            await self._states.save(slot, agent)

    async def _call(self, slot: Slot, fn: Callable[[Agent], Awaitable[Any]]) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        ctx = MessageContext(slot.agent_id, None, True, self._next_id())
        self._enqueue(slot, AgentCall(fn), ctx, future, None)
        return await future

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
        ctx = MessageContext(recipient, sender, False, self._next_id())
        if self._observer is None:
            item = self._enqueue(slot, message, ctx, None, None)
        else:
            span = self._observer.on_send(SendInfo("send", recipient.type, recipient, sender, ctx.message_id))
            ctx.trace = span.trace
            item = self._enqueue(slot, message, ctx, None, None)
            span.end()
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
        span = None
        if self._observer is not None:
            span = self._observer.on_send(SendInfo("rpc", recipient.type, recipient, sender, ctx.message_id))
            ctx.trace = span.trace
        item = self._enqueue(slot, message, ctx, future, None)
        remove = cancellation_token.add_callback(lambda: self._cancel(item)) if cancellation_token else None
        timer = loop.call_later(timeout, self._expire, item, timeout) if timeout is not None else None
        try:
            result = await future
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                self._cancel(item)
            if span is not None:
                span.end(exc, item.answer_trace)
            raise
        else:
            if span is not None:
                span.end(None, item.answer_trace)
            return result
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
        if self._observer is None:
            self.broadcast_now(message, name, sender=sender)
            return
        span = self._observer.on_send(SendInfo("broadcast", name, None, sender))
        self.broadcast_now(message, name, sender=sender, trace=span.trace)
        span.end()

    async def publish(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> None:
        """Queue `message` for the recipient of every subscription matching `topic_id` (each agent once, `sender`
        skipped), creating agents as needed; no match is a no-op. As for `send_message`, a recipient whose type has
        no factory raises `AgentNotFoundError` at once, before anything is queued."""
        topic_id = check_topic_id(topic_id)
        check_sender(sender)
        check_message_id(message_id)
        self._check_open()
        recipients = [r for r in self._subscriptions.recipients(topic_id) if r != sender]
        missing = sorted({r.type for r in recipients if r.type not in self._factories})
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
        items = [
            self._enqueue(
                self._slot(r),
                message,
                MessageContext(r, sender, False, message_id, trace=trace, topic_id=topic_id),
                None,
                None,
            )
            for r in recipients
        ]
        if span is not None:
            span.end()
        if cancellation_token is not None:
            cancellation_token.add_callback(lambda: self._cancel_all(items))

    def _cancel_all(self, items: list[Delivery]) -> None:
        for item in items:
            self._cancel(item)

    async def add_subscription(self, subscription: Subscription) -> None:
        """Add a subscription (one equal to a subscription already there changes nothing)."""
        self._check_open()
        self._subscriptions.add(subscription)

    async def remove_subscription(self, id: str) -> None:
        """Remove the subscription `id`; `LookupError` naming it when there is none."""
        self._check_open()
        self._subscriptions.remove(id)

    async def list_subscriptions(self) -> list[Subscription]:
        """The subscriptions, in the order they were added."""
        return self._subscriptions.subscriptions()

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
        trace: TraceContext | None = None,
        topic_id: TopicId | None = None,
    ) -> Delivery:
        """Queue `message` for `recipient` now and return the `Delivery`: for runtimes that host agents on
        behalf of remote callers (`ext.runtime.grpc`). Deliveries are handled in call order.

        With `reply`, the runtime awaits `reply(result, None)` or `reply(None, error)` after the handler (the
        error is the handler's, `CancelledError` when cancelled; a one-way handler's error is also logged).
        `cancel_delivery(delivery)` cancels it. Raises `AgentNotFoundError` / `RuntimeClosedError` at once.
        `trace` is the trace context the message came with (the handler's `ctx.trace`); after the handler, the
        delivery's `answer_trace` is the one its answer carries back. `topic_id`: the topic of a published message
        (the handler's `ctx.topic_id`).
        """
        self._check_open()
        slot = self._slot(recipient)
        ctx = MessageContext(recipient, sender, rpc, message_id or self._next_id(), trace=trace, topic_id=topic_id)
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
        trace: TraceContext | None = None,
    ) -> tuple[Delivery, Coroutine[Any, Any, None] | None]:
        """`deliver`, plus: when the agent is idle, a coroutine that the calling task must await at once. It
        runs the agent's mailbox in the calling task, so the handler starts without a task switch (a hosting
        runtime's reader hands its stream to a fresh reader task first). None when the agent is busy: its
        consumer task handles the message in turn."""
        self._check_open()
        slot = self._slot(recipient)
        ctx = MessageContext(recipient, sender, rpc, message_id or self._next_id(), trace=trace)
        item = Delivery(slot, message, ctx, None, reply)
        slot.mailbox.append(item)
        slot.cancel_idle_timer()
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

    def broadcast_now(
        self, message: Any, agent_type: str, *, sender: AgentId | None = None, trace: TraceContext | None = None
    ) -> int:
        """`broadcast` for hosting runtimes: queues the deliveries now and returns how many there are;
        a type with no factory here reaches nobody. `trace`: as for `deliver`."""
        self._check_open()
        count = 0
        for agent_id, slot in list(self._slots.items()):
            if agent_id.type != agent_type or slot.agent is None or agent_id == sender:
                continue
            ctx = MessageContext(agent_id, sender, False, self._next_id(), is_broadcast=True, trace=trace)
            self._enqueue(slot, message, ctx, None, None)
            count += 1
        return count

    # --- the agents' factory ---------------------------------------------------------------------------

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
