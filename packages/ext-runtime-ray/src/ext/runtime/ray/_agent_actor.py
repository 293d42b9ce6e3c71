"""`AgentActor`: the Ray actor that hosts one agent.

It holds a `LocalAgentRuntime` with the agent's one factory, so an agent on Ray handles one message at a time in
arrival order, saves per the same `SavePolicy`, is rolled back after a failed handler and traced by the same
observer calls as on the local runtime: the actor is async (Ray runs its calls concurrently, `max_concurrency`),
so that a cancellation or a deactivation reaches it while a handler runs, and the local runtime's mailbox (not
Ray) is what makes the agent's handlers run one at a time. Ray starts the calls of one caller in the order they
were submitted and `deliver` queues the message before its first `await`, so one sender's messages keep their
order.

The agent's state is loaded from the store when its first message creates it: after Ray restarts a dead actor
(`max_restarts`) that is on the first message to the new process, from the last save. After `idle_timeout`
seconds with nothing to do, the actor retires: it refuses new messages (`Outcome(retired=True)`, so senders
activate a fresh actor and resend), saves and closes the agent, tells the registry and exits.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections import OrderedDict
from collections.abc import Coroutine, Mapping
from typing import Any

import ray
from ext.core import AgentId, RuntimeClosedError
from ext.runtime.local import Delivery, LocalAgentRuntime

from ._link import load_factory
from ._ordering import Streams
from ._spec import TypeSpec
from ._wire import Envelope, Outcome, portable_error

__all__ = ["AgentActor"]

logger = logging.getLogger(__name__)

_CANCELLED_KEPT = 1000


class AgentActor:
    """One agent's actor (see the module docstring). Created by the registry, named after the agent id."""

    def __init__(self, agent_id: AgentId, incarnation: str, spec: TypeSpec, namespace: str) -> None:
        self._agent_id = agent_id
        self._incarnation = incarnation
        self._spec = spec
        self._idle_timeout = spec.idle_timeout
        factory = load_factory(spec.factory, spec.link)
        # Started on the agent's first send (joining the registry takes a call this constructor cannot await).
        # The agents' own runtime (their sends go through Ray too), of the class the spec names (`RayAgentRuntime`).
        self._client: Any = spec.runtime_class(namespace=namespace, observer=spec.observer(), lazy_start=True)
        self._local = LocalAgentRuntime(
            stop_timeout=spec.stop_timeout,
            state_store=spec.state_store(),
            save_policy=spec.save_policy,
            observer=spec.observer(),
        )
        # Registered now, before any message can arrive: the local runtime's registration is a coroutine with no
        # await in it (it only records the factory), so it completes in one step.
        client = self._client
        _complete(self._local.register_agent_factory(agent_id.type, lambda aid, _local: factory(aid, client)))
        self._running: dict[str, Delivery] = {}
        with warnings.catch_warnings():  # Ray 2.60 calls a deprecated API of its own in this property
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self._streams = Streams(restarted=restarted)
        # Cancellations that arrived before their message (Ray runs an async actor's calls out of order).
        self._cancelled: OrderedDict[str, None] = OrderedDict()
        self._idle: asyncio.TimerHandle | None = None
        self._retiring = False

    def ready(self) -> bool:
        """Answers once the actor is constructed (the sender waits for it before an RPC's deadline starts)."""
        return True

    async def deliver(self, envelope: Envelope) -> Outcome:
        await self._streams.turn(envelope.stream, envelope.seq)
        try:
            return await self._deliver(envelope)
        finally:
            # Queued (or refused): the stream's next message may go in.
            self._streams.queued(envelope.stream, envelope.seq)

    async def _deliver(self, envelope: Envelope) -> Outcome:
        if self._retiring:
            return Outcome(retired=True)
        if self._cancelled.pop(envelope.message_id, False) is None:
            return Outcome(cancelled=True)
        self._cancel_idle()
        local = self._local
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

        async def reply(result: Any, error: BaseException | None) -> None:
            if not future.done():
                future.set_result(_outcome(result, error, delivery.answer_trace))

        try:
            delivery = local.deliver(
                envelope.message,
                self._agent_id,
                sender=envelope.sender,
                rpc=envelope.rpc,
                message_id=envelope.message_id,
                reply=reply,
                trace=envelope.trace,
                topic_id=envelope.topic_id,
            )
        except RuntimeClosedError:
            return Outcome(retired=True)
        self._running[envelope.message_id] = delivery
        self._streams.queued(envelope.stream, envelope.seq)
        try:
            return await future
        finally:
            self._running.pop(envelope.message_id, None)
            self._arm_idle()

    def cancel(self, message_id: str) -> None:
        delivery = self._running.get(message_id)
        if delivery is not None:
            self._local.cancel_delivery(delivery)
            return
        self._cancelled[message_id] = None
        while len(self._cancelled) > _CANCELLED_KEPT:
            self._cancelled.popitem(last=False)

    async def broadcast(self, message: Any, sender: AgentId | None, trace: Any) -> int:
        """`broadcast`: reaches the agent only if it exists (a broadcast creates no agent)."""
        if self._retiring:
            return 0
        return self._local.broadcast_now(message, self._agent_id.type, sender=sender, trace=trace)

    async def save_state(self) -> Mapping[str, Any] | None:
        """The agent's state (taken in turn with its messages), None when it is not active or keeps none."""
        saved = await self._local.save_state()
        return saved.get(str(self._agent_id)) if await self._local.list_agents() else None

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self._local.load_state({str(self._agent_id): state})

    async def is_active(self) -> bool:
        return bool(await self._local.list_agents())

    async def deactivate(self) -> None:
        """Save and close the agent, then leave (the registry is told by whoever asked)."""
        await self._retire(tell_registry=False)

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _arm_idle(self) -> None:
        if self._idle_timeout is not None and not self._running and not self._retiring:
            self._cancel_idle()
            loop = asyncio.get_running_loop()
            self._idle = loop.call_later(self._idle_timeout, lambda: loop.create_task(self._on_idle()))

    async def _on_idle(self) -> None:
        self._idle = None
        if not self._running and not self._retiring:
            await self._retire(tell_registry=True)

    async def _retire(self, *, tell_registry: bool) -> None:
        if self._retiring:
            return
        self._retiring = True
        self._cancel_idle()
        await self._local.stop()  # lets what is running finish, saves the state, closes the agent
        await self._client.stop()
        if tell_registry:
            try:
                registry = ray.get_actor(self._spec.registry_name, namespace=self._spec.namespace)
                await registry.retired.remote(self._agent_id, self._incarnation)
            except Exception:
                logger.warning("%s: the registry could not be told this actor retired", self._agent_id, exc_info=True)
            # No restart: the next message to this agent activates a new actor, from the state just saved.
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def __repr__(self) -> str:
        return f"AgentActor({self._agent_id})"


def _complete(coroutine: Coroutine[Any, Any, Any]) -> None:
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise RuntimeError("the local runtime's registration awaited: it cannot run in an actor's constructor")


def _outcome(result: Any, error: BaseException | None, trace: Any) -> Outcome:
    if error is None:
        return Outcome(result=result, answer_trace=trace)
    if isinstance(error, asyncio.CancelledError):
        return Outcome(cancelled=True, answer_trace=trace)
    return Outcome(error=portable_error(error), answer_trace=trace)
