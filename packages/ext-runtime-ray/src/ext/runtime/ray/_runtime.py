"""`RayAgentRuntime`: the `AgentRuntime` contract on Ray actors, one per agent (`AgentActor`), found or created by
name through the namespace's `Registry`. This module is the public API and the sending side; an agent's hosting
is `_agent_actor.py`'s, what stays in the driver is `_link.py`'s."""

from __future__ import annotations

import asyncio
import itertools
import logging
import pickle
import uuid
from collections.abc import Mapping
from typing import Any, Literal

import ray
from ext.core import (
    DEFAULT_RPC_TIMEOUT,
    AgentFactory,
    AgentId,
    AgentNotFoundError,
    AgentType,
    AsyncStartStop,
    CancellationToken,
    InMemoryStateStore,
    RuntimeClosedError,
    RuntimeObserver,
    SavePolicy,
    StateStore,
    Subscription,
    SubscriptionTable,
    TopicId,
    agent_type_name,
    check_agent_id,
    check_factory,
    check_message_id,
    check_seconds,
    check_sender,
    check_timeout,
    check_topic_id,
)
from ray.exceptions import RayActorError

from ._link import DriverServices, dump_factory
from ._registry import RemoteRegistry
from ._sending import Sender
from ._spec import TypeSpec
from ._wire import REGISTRY_NAME

__all__ = ["ACTOR_OPTIONS", "RayAgentRuntime"]

logger = logging.getLogger(__name__)

ACTOR_OPTIONS = frozenset(
    {
        "num_cpus",
        "num_gpus",
        "memory",
        "resources",
        "scheduling_strategy",
        "runtime_env",
        "max_restarts",
        "label_selector",
    }
)
"""The Ray actor options `register_agent_factory(..., actor_options=...)` accepts for a type's actors."""

_members = itertools.count(1)


class RayAgentRuntime(AsyncStartStop):
    """Agents on Ray: each agent is a Ray actor named after its id (`ext-agent:<type>/<key>`) in the runtime's Ray
    namespace, created on its first message by whichever process sends it, so every process of the cluster (every
    driver, every agent) reaches the same one. Ray must be started by the application (`ray.init()` or
    `ray.init(address=...)`); this runtime starts nothing else (no dashboard, no usage reporting of its own).

    The runtime that registers a type owns it: its `state_store`, `save_policy`, `idle_timeout` and `observer`
    apply to the type's agents, and its `stop()` deactivates them (state saved, agent closed, actor gone).

    Args:
        namespace: the Ray namespace of the agents and the registry (default "ext": every process of the cluster
            reaches the same agents).
        state_store: where the agents' states are kept. An `InMemoryStateStore` stays in this process (actors
            reach it through it: one machine, tests); any other store is pickled into each actor, which opens its
            own connections (`FileStateStore` on one machine, a Redis store on several).
        save_policy, idle_timeout, stop_timeout: as for `LocalAgentRuntime`; an idle agent's actor exits.
        observer: told of each send from this process, and of each handling of the agents of the types this
            runtime registers (those spans are begun and ended here, reported by the actors).
        max_restarts: how many times Ray restarts a dead agent actor (default 3; -1: always). A restarted
            actor reloads the agent's last saved state.
        delivery: "at_most_once" (default): an RPC in flight to an actor that dies fails with
            `AgentActorDiedError`, a one-way message is lost. "at_least_once": Ray resends the call to the
            restarted actor (`max_task_retries`), so a handler may see a message twice.
        driver_objects: types whose instances, captured by a factory, stay in this process: the actor gets a
            stand-in whose method calls run on the original here (a collector of results, a test's journal).
        activation_timeout: seconds an agent's actor may take to be placed and started (default 60) before the
            message fails with `UndeliverableError`; an RPC's `timeout` runs from when the actor is up.
        lazy_start: start on first use instead of by `start()` (the runtime an agent's actor gives its agent).
    """

    def __init__(
        self,
        *,
        namespace: str = "ext",
        state_store: StateStore | None = None,
        save_policy: SavePolicy | None = None,
        idle_timeout: float | None = None,
        stop_timeout: float = 5.0,
        observer: RuntimeObserver | None = None,
        max_restarts: int = 3,
        delivery: Literal["at_most_once", "at_least_once"] = "at_most_once",
        driver_objects: tuple[type, ...] = (),
        activation_timeout: float = 60.0,
        lazy_start: bool = False,
    ) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"namespace must be a non-empty str, got {namespace!r}")
        if observer is not None and not isinstance(observer, RuntimeObserver):
            raise TypeError(f"observer must be a RuntimeObserver (on_send, on_process), got {type(observer).__name__}")
        if state_store is not None and not isinstance(state_store, StateStore):
            raise TypeError(f"state_store must be a StateStore, got {type(state_store).__name__}")
        if save_policy is not None and not isinstance(save_policy, SavePolicy):
            raise TypeError(f"save_policy must be a SavePolicy, got {type(save_policy).__name__}")
        self._idle_timeout = check_timeout(idle_timeout, "idle_timeout")
        self._stop_timeout = check_seconds(stop_timeout, "stop_timeout")
        self._activation_timeout = check_seconds(activation_timeout, "activation_timeout")
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
            raise ValueError(f"max_restarts must be an int >= -1 (-1: always restart), got {max_restarts!r}")
        if delivery not in ("at_most_once", "at_least_once"):
            raise ValueError(f"delivery must be 'at_most_once' or 'at_least_once', got {delivery!r}")
        if not isinstance(driver_objects, tuple) or not all(isinstance(t, type) for t in driver_objects):
            raise TypeError("driver_objects must be a tuple of types")
        if state_store is None and self._idle_timeout is not None:
            state_store = InMemoryStateStore()  # a deactivated agent must come back with its state
        self._namespace = namespace
        self._store = state_store
        self._save_policy = save_policy
        self._observer = observer
        self._max_restarts = max_restarts
        self._delivery = delivery
        self._driver_objects = driver_objects
        self._member = f"{uuid.uuid4().hex[:12]}-{next(_members)}"
        self._services: DriverServices | None = None
        self._owned: set[str] = set()
        self._registry: Any = None
        self._sender: Sender | None = None
        self._started = False
        self._closed = False
        self._lazy_start = lazy_start

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the namespace's registry (created if it is not running). Ray must be initialized. Idempotent."""
        self._check_open()
        if self._started:
            return
        if not ray.is_initialized():
            raise RuntimeError(
                "Ray is not initialized: call ray.init() (one machine) or ray.init(address=...) (a cluster) before "
                "starting a RayAgentRuntime"
            )
        for attempt in range(3):
            self._registry = RemoteRegistry.options(
                name=REGISTRY_NAME, namespace=self._namespace, lifetime="detached", get_if_exists=True
            ).remote(self._namespace)
            try:
                await self._registry.join.remote(self._member)
                break
            except RayActorError:
                if attempt == 2:
                    raise
                # The registry was exiting (its last member had just left): a new one takes its name.
                await asyncio.sleep(0.2 * (attempt + 1))
        self._sender = Sender(self._registry, self._member, self._observer, self._delivery, self._activation_timeout)
        self._started = True

    async def stop(self) -> None:
        """Refuse new messages; deactivate the agents of the types this runtime registered (each saves its state
        and is closed; their actors exit); leave the registry. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        assert self._sender is not None
        await self._sender.close()
        try:
            agents = await self._registry.release_types.remote(self._member)
            await asyncio.gather(*(self._deactivate(agent_id, handle) for agent_id, handle in agents))
            await self._registry.leave.remote(self._member)
        except RayActorError:
            logger.warning("the registry of namespace %r is gone: agents of this runtime's types stay", self._namespace)
        if self._services is not None:
            await self._services.stop()

    async def _deactivate(self, agent_id: AgentId, handle: Any) -> None:
        try:
            await asyncio.wait_for(handle.deactivate.remote(), self._stop_timeout + 10)
        except (RayActorError, asyncio.TimeoutError) as exc:
            logger.warning("%s could not be deactivated (%s): its unsaved changes are lost", agent_id, exc)
        ray.kill(handle, no_restart=True)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")

    async def _ready(self) -> Sender:
        self._check_open()
        if self._sender is None:
            if not self._lazy_start:
                raise RuntimeError("the runtime is not started: await runtime.start() first")
            await self.start()
            assert self._sender is not None
        return self._sender

    @property
    def namespace(self) -> str:
        """The Ray namespace of the agents and the registry."""
        return self._namespace

    @property
    def state_store(self) -> StateStore | None:
        return self._store

    # --- registration and the registry -----------------------------------------------------------------

    async def register_agent_factory(
        self,
        agent_type: str | AgentType,
        factory: AgentFactory,
        *,
        actor_options: Mapping[str, Any] | None = None,
    ) -> AgentType:
        """Register the factory for `agent_type` in the whole namespace (a type can be registered once).

        The factory is pickled by value (cloudpickle: a lambda or closure works; what it captures is copied into
        each actor, except objects of `driver_objects` types) and called in the agent's actor with the agent id and
        the actor's own `RayAgentRuntime`. `actor_options` (`ACTOR_OPTIONS`: `num_cpus` (default 0), `resources`,
        `scheduling_strategy`...) go to Ray for the type's actors."""
        name = agent_type_name(agent_type)
        factory = check_factory(factory)
        options = dict(actor_options or {})
        unknown = sorted(set(options) - ACTOR_OPTIONS)
        if unknown:
            raise ValueError(f"actor_options: {', '.join(unknown)} not accepted (one of {sorted(ACTOR_OPTIONS)})")
        await self._ready()
        services = self._services_started()
        options.setdefault("max_restarts", self._max_restarts)
        store = self._store
        served_store = services.serve(store) if isinstance(store, InMemoryStateStore) else None
        if store is not None and served_store is None:
            try:
                pickle.dumps(store)
            except Exception as exc:
                raise TypeError(
                    f"state_store {type(store).__name__} cannot be sent to the agents' actors (not picklable: {exc})"
                ) from None
        try:
            data = dump_factory(factory, services, self._driver_objects)
        except Exception as exc:
            raise TypeError(f"the factory for {name!r} cannot be sent to its actors (not picklable: {exc})") from None
        assert self._namespace is not None
        spec = TypeSpec(
            factory=data,
            owner=self._member,
            link=services.link,
            namespace=self._namespace,
            registry_name=REGISTRY_NAME,
            save_policy=self._save_policy,
            idle_timeout=self._idle_timeout,
            stop_timeout=self._stop_timeout,
            store=None if served_store is not None else store,
            served_store=served_store,
            served_observer=None if self._observer is None else services.serve(self._observer),
            actor_options=options,
            runtime_class=RayAgentRuntime,
        )
        if not await self._registry.register.remote(name, spec):
            raise ValueError(f"agent_type {name!r} is already registered")
        self._owned.add(name)
        return AgentType(name)

    def _services_started(self) -> DriverServices:
        if self._services is None:
            self._services = DriverServices(self._registry, self._member)
            self._services.start()
        return self._services

    async def list_agents(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        """The active agents of the namespace (of one type, or all), sorted by type then key."""
        name = None if agent_type is None else agent_type_name(agent_type)
        await self._ready()
        actors = await self._registry.active.remote(name)
        active = await asyncio.gather(*(_is_active(h) for _, h in actors))
        return sorted((a for (a, _), on in zip(actors, active, strict=True) if on), key=lambda a: (a.type, a.key))

    async def save_state(self) -> dict[str, Mapping[str, Any]]:
        """Each active agent's `save_state()` (taken in turn with its messages) and the stored state of each
        deactivated agent of the types this runtime registered (from its store), keyed by `str(agent_id)`."""
        await self._ready()
        result: dict[str, Mapping[str, Any]] = {}
        if self._store is not None:
            for agent_id in await self._store.keys():
                record = await self._store.get(agent_id) if agent_id.type in self._owned else None
                if record is not None:
                    result[str(agent_id)] = record.state
        actors = await self._registry.active.remote(None)
        states = await asyncio.gather(*(h.save_state.remote() for _, h in actors))
        for (agent_id, _), state in zip(actors, states, strict=True):
            if state is not None:
                result[str(agent_id)] = state
        return dict(sorted(result.items()))

    async def load_state(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Give each agent named in `state` its state, activating it if needed (and saving it to its store).
        Bad keys and unregistered types fail before any agent changes."""
        sender = await self._ready()
        targets = _parse_state(state)
        types = sorted({a.type for a, _ in targets})
        known = set(await self._registry.registered.remote(types))
        for agent_id, _ in targets:
            if agent_id.type not in known:
                raise AgentNotFoundError(
                    f"state[{str(agent_id)!r}]: no agent factory is registered for {agent_id.type!r}"
                )
        for agent_id, agent_state in targets:
            handle = await sender.actor(agent_id)
            await handle.load_state.remote(dict(agent_state))

    # --- messaging -------------------------------------------------------------------------------------

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> None:
        """Send one way: returns once the message is on its way to the agent's actor (created if needed). A
        handler's error is logged here, with the agent's name. `AgentNotFoundError` at once for an unknown type."""
        recipient = check_agent_id(recipient)
        check_sender(sender)
        await (await self._ready()).send(message, recipient, sender, cancellation_token)

    async def send_and_await_response(
        self,
        message: Any,
        recipient: AgentId,
        timeout: float | None = DEFAULT_RPC_TIMEOUT,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> Any:
        """Deliver `message` and return what the handler returns; re-raise the handler's error (as itself when it
        pickles, else `MessageHandlerError`). After `timeout` seconds the handler is cancelled and `TimeoutError`
        raised; an actor that dies meanwhile raises `AgentActorDiedError` at once."""
        recipient = check_agent_id(recipient)
        check_sender(sender)
        timeout = check_timeout(timeout)
        return await (await self._ready()).call(message, recipient, sender, timeout, cancellation_token)

    async def broadcast(self, message: Any, agent_type: str | AgentType, *, sender: AgentId | None = None) -> None:
        """Send one way to every active agent of `agent_type` in the namespace, except `sender`. Creates none."""
        name = agent_type_name(agent_type)
        check_sender(sender)
        await (await self._ready()).broadcast(message, name, sender)

    async def publish(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> None:
        """Send one way to the recipient of every subscription matching `topic_id` (each agent once, `sender`
        skipped), creating agents as needed; no match is a no-op. An unknown recipient type fails before sending."""
        topic_id = check_topic_id(topic_id)
        check_sender(sender)
        check_message_id(message_id)
        await (await self._ready()).publish(message, topic_id, sender, cancellation_token, message_id)

    async def add_subscription(self, subscription: Subscription) -> None:
        """Add a subscription for the whole namespace (an equal one already there changes nothing)."""
        SubscriptionTable().add(subscription)  # checks it before it leaves
        await self._ready()
        await self._registry.add_subscription.remote(subscription)

    async def remove_subscription(self, id: str) -> None:
        """Remove the subscription `id`; `LookupError` naming it when there is none."""
        await self._ready()
        error = await self._registry.remove_subscription.remote(id)
        if error is not None:
            raise LookupError(error)

    async def list_subscriptions(self) -> list[Subscription]:
        """The namespace's subscriptions, in the order they were added."""
        await self._ready()
        subscriptions: list[Subscription] = await self._registry.subscriptions.remote()
        return subscriptions

    def __repr__(self) -> str:
        return f"RayAgentRuntime(namespace={self._namespace!r})"


async def _is_active(handle: Any) -> bool:
    try:
        return bool(await handle.is_active.remote())
    except RayActorError:
        return False


def _parse_state(state: object) -> list[tuple[AgentId, Mapping[str, Any]]]:
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a mapping of 'type/key' to agent states, got {type(state).__name__}")
    targets: list[tuple[AgentId, Mapping[str, Any]]] = []
    for key, agent_state in state.items():
        try:
            agent_id = AgentId.from_str(key)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"state: key {key!r} is not an agent id 'type/key': {exc}") from None
        if not isinstance(agent_state, Mapping):
            raise TypeError(f"state[{key!r}] must be a mapping, got {type(agent_state).__name__}")
        targets.append((agent_id, agent_state))
    return targets
