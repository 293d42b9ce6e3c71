"""`GrpcAgentRuntime`: a worker runtime. Its public API (registering agent factories, sending, RPCs with
deadlines, broadcast, topics and subscriptions, listing agents) is here, over four members: the stream to the
gateway, with reconnection and failover (`GatewayConnection`, `_connection.py`); building and sending envelopes and
the RPC bookkeeping (`Sender`, `_sending.py`); reading what arrives and dispatching it to the hosted agents
(`AgentHost`, `_hosting.py`); and the `LocalAgentRuntime` those agents live in."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import math
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

import grpc

from ext.core import (
    DEFAULT_RPC_TIMEOUT,
    Agent,
    AgentFactory,
    AgentId,
    AgentNotFoundError,
    AgentType,
    AsyncStartStop,
    CancellationToken,
    RoutedAgent,
    RuntimeClosedError,
    RuntimeObserver,
    SavePolicy,
    StateStore,
    Subscription,
    TopicId,
    UndeliverableError,
    agent_type_name,
    check_agent_id,
    check_factory,
    check_message_id,
    check_sender,
    check_subscription,
    check_timeout,
    check_topic_id,
)
from ext.runtime.local import LocalAgentRuntime

from ._connection import ConnectionOptions, GatewayConnection
from ._hosting import AgentHost
from ._sending import Sender
from ._serializer import ProtobufMessageSerializer
from ._wire import raise_control_error, subscription_of_wire, subscription_to_wire
from .protos import agent_worker_pb2 as pb

__all__ = ["GrpcAgentRuntime"]

logger = logging.getLogger(__name__)


class GrpcAgentRuntime(AsyncStartStop):
    """A worker runtime: hosts the agent types registered on it and reaches every other agent in the cluster
    through one bidirectional stream to a gateway.

    Args:
        address: `host:port` of the gateway, a list of them (replicas, with failover), or a `grpc.aio.Channel`
            you built; or a `ConnectionOptions` holding it with the other connection settings.
        **connection: the other fields of `ConnectionOptions` as keywords (not with a `ConnectionOptions`):
            `token`, `token_env` (default `EXT_GRPC_TOKEN`), `token_file`, `tls`, `root_certificates`,
            `tls_server_name`, `max_message_bytes`, `connect_timeout`, `reconnect_backoff`,
            `reconnect_max_backoff`. The token is looked up here, at construction (`token`, else `token_file`,
            else the `token_env` variable, else the file named by `<token_env>_FILE`): an unreadable or empty
            file raises `ValueError`.
        serializer: the `ProtobufMessageSerializer` (default: a new one). Register pydantic and dataclass
            message types with `register_message_type` on every worker that sends or receives them.
        stop_timeout: seconds `stop()` lets hosted handlers finish (default 5).
        on_undelivered: called with the recipient and the reason when the gateway reports that a one-way
            message this worker sent could not be delivered (it is also logged at WARNING).
            One-way messages are not acknowledged: this is the only word of a loss the gateway saw.
        state_store, save_policy, idle_timeout: durable state of the hosted agents, as for `LocalAgentRuntime`
            (which hosts them): loaded on activation, saved per the policy, idle agents deactivated. Workers
            of one cluster share state through `RedisStateStore`.
        observer: a `RuntimeObserver` (such as ext-telemetry-opentelemetry's `OpenTelemetryRuntimeObserver`) told
            of each message this worker sends and each one its agents handle. The trace context it gives a
            message travels as the CloudEvent's `traceparent` / `tracestate` attributes through the gateway (and
            between replicas) to the handler (`ctx.trace`), and an RPC's answer brings the handling's back.
    """

    def __init__(
        self,
        address: str | Sequence[str] | grpc.aio.Channel | ConnectionOptions,
        *,
        serializer: ProtobufMessageSerializer | None = None,
        stop_timeout: float = 5.0,
        on_undelivered: Callable[[AgentId, str], None] | None = None,
        state_store: StateStore | None = None,
        save_policy: SavePolicy | None = None,
        idle_timeout: float | None = None,
        observer: RuntimeObserver | None = None,
        **connection: Any,
    ) -> None:
        if isinstance(address, ConnectionOptions):
            if connection:
                given = ", ".join(sorted(connection))
                raise TypeError(
                    f"give the connection settings in the ConnectionOptions or as keywords, not both: {given}"
                )
            options = address
        else:
            options = ConnectionOptions(address, **connection)
        # The stream to the gateway (its token is looked up here); the hooks are this runtime's, below.
        self._connection = GatewayConnection(
            options, read=self._read_stream, announce=self._announce, lost=self._connection_lost
        )
        self.serializer = serializer if serializer is not None else ProtobufMessageSerializer()
        # The hosted agents live in a local runtime, which also keeps their state (one implementation for both).
        self._local = LocalAgentRuntime(
            stop_timeout=stop_timeout,
            state_store=state_store,
            save_policy=save_policy,
            idle_timeout=idle_timeout,
            observer=observer,
        )
        self._sender = Sender(self._connection, self.serializer, observer)
        self._host = AgentHost(self._connection, self._local, self.serializer, self._sender.pending, on_undelivered)
        # The agent types this worker hosts, with their factories (announced again on every connection).
        self._factories: dict[str, AgentFactory] = {}
        # The types whose builder the local runtime holds: it has no way to take one back, so a registration the
        # gateway refused leaves its builder there, finding no factory, until a retry puts one in place.
        self._built_locally: set[str] = set()
        self._started = False
        self._closed = False

    def __repr__(self) -> str:
        connection = self._connection
        target = connection.address or "<channel>"
        return f"GrpcAgentRuntime(address={target!r}, worker_id={connection.worker_id!r}, connected={self.connected})"

    @property
    def address(self) -> str | None:
        """The gateway address this worker connects to now (`None` for a channel you gave)."""
        return self._connection.address

    @property
    def worker_id(self) -> str:
        """This worker's cluster-unique id, assigned by the gateway on each connection."""
        return self._connection.worker_id

    @property
    def connected(self) -> bool:
        return self._connection.connected

    def register_message_type(self, message_type: type[Any], type_name: str | None = None) -> str:
        """Register a pydantic or dataclass message class with the serializer (see `ProtobufMessageSerializer`)."""
        return self.serializer.register(message_type, type_name)

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the gateway and register the agent types registered so far. Raises
        `AuthenticationError` for a rejected token, `UndeliverableError` when the gateway cannot be reached
        within `connect_timeout`."""
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")
        if self._started:
            return
        await self._connection.open()
        self._started = True

    async def stop(self) -> None:
        """Stop hosted agents (letting in-flight handlers finish up to `stop_timeout`), close them, and close
        the stream. Pending RPCs fail with `RuntimeClosedError`. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._connection.begin_close()
        await self._local.stop()
        self._sender.fail_pending(RuntimeClosedError("the runtime was stopped"))
        self._sender.deadlines.clear()
        await self._connection.close()

    # --- the connection's hooks ----------------------------------------------------------------------------

    def _read_stream(self, call: Any, done: asyncio.Future[None]) -> Coroutine[Any, Any, None]:
        return self._host.read(call, done)

    async def _announce(self) -> None:
        for agent_type in sorted(self._factories):
            await self._register_remote(agent_type)

    def _connection_lost(self) -> None:
        self._sender.fail_pending(UndeliverableError("the connection to the gateway was lost before the answer came"))
        self._host.cancel_hosted()

    # --- AgentRuntime ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")
        if not self._started:
            raise RuntimeError("the runtime is not started: call start() or use 'async with'")

    async def _register_remote(self, agent_type: str) -> None:
        request_id = self._sender.next_id()
        message = pb.Message(register=pb.RegisterAgentType(request_id=request_id, type=agent_type))
        reply = await self._sender.control(message, request_id)
        if reply.error:
            raise ValueError(f"the gateway refused agent_type {agent_type!r}: {reply.error}")

    async def register_agent_factory(self, agent_type: str | AgentType, factory: AgentFactory) -> AgentType:
        """Host `agent_type` on this worker (and announce it to the gateway when connected). Pydantic and
        dataclass types that a `RoutedAgent` factory class handles are registered with the serializer."""
        name = agent_type_name(agent_type)
        factory = check_factory(factory)
        if self._closed:
            raise RuntimeClosedError("the runtime was stopped")
        if name in self._factories:
            raise ValueError(f"agent_type {name!r} is already registered")
        if isinstance(factory, type) and issubclass(factory, RoutedAgent):
            for message_type in factory.handled_message_types():
                with contextlib.suppress(TypeError, ValueError):
                    if not self.serializer.is_registered(message_type):
                        self.serializer.register(message_type)

        if name not in self._built_locally:
            await self._local.register_agent_factory(name, functools.partial(self._build, name))
            self._built_locally.add(name)
        self._factories[name] = factory
        if self._connection.connected:
            try:
                await self._register_remote(name)
            except BaseException:
                # Refused (or cut short): nothing is left registered, so registering the type again works.
                del self._factories[name]
                raise
        return AgentType(name)

    async def _build(self, name: str, agent_id: AgentId, _local: Any) -> Agent:
        factory = self._factories.get(name)
        if factory is None:
            raise AgentNotFoundError(f"agent_type {name!r} is not registered on this worker")
        agent = factory(agent_id, self)
        if inspect.isawaitable(agent):
            agent = await agent
        return agent

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> None:
        """Send one way through the gateway. Returns once the gateway has the message; a recipient whose type
        no worker hosts, or a handler error, is logged (on this worker and on the hosting one)."""
        recipient = check_agent_id(recipient)
        check_sender(sender)
        self._check_open()
        if cancellation_token is not None and cancellation_token.is_cancelled():
            raise asyncio.CancelledError("cancelled by CancellationToken before sending")
        envelope, span = self._sender.delivery(pb.DELIVERY_KIND_ONE_WAY, message, sender, recipient)
        await self._sender.post_observed(envelope, span)

    async def send_and_await_response(
        self,
        message: Any,
        recipient: AgentId,
        timeout: float | None = DEFAULT_RPC_TIMEOUT,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> Any:
        """RPC through the gateway: returns the handler's return value. Raises `TimeoutError` (and cancels the
        remote handler) after `timeout`, `AgentNotFoundError` at once for a type no worker hosts,
        `UndeliverableError` when the hosting worker dies, `MessageHandlerError` for the handler's exception."""
        # The checks of check_agent_id / check_timeout / _check_open, with their common case first.
        if recipient.__class__ is not AgentId:
            recipient = check_agent_id(recipient)
        check_sender(sender)
        if type(timeout) is not float or not 0.0 < timeout < math.inf:
            timeout = check_timeout(timeout)
        if self._closed or not self._started:
            self._check_open()
        request_id = self._sender.next_id()
        envelope, span = self._sender.delivery(pb.DELIVERY_KIND_RPC, message, sender, recipient, request_id)
        if span is None:
            return await self._sender.rpc(envelope, request_id, message, recipient, timeout, cancellation_token)
        try:
            result = await self._sender.rpc(envelope, request_id, message, recipient, timeout, cancellation_token, span)
        except BaseException as exc:
            span.end(exc)
            raise
        return result

    async def broadcast(self, message: Any, agent_type: str | AgentType, *, sender: AgentId | None = None) -> None:
        """Send one way to every active agent of `agent_type` on every worker (except `sender`)."""
        name = agent_type_name(agent_type)
        check_sender(sender)
        self._check_open()
        envelope, span = self._sender.delivery(pb.DELIVERY_KIND_BROADCAST, message, sender, broadcast_type=name)
        await self._sender.post_observed(envelope, span)

    async def publish(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> None:
        """Publish one way to `topic_id`: the gateway sends it to the recipient of every matching subscription in
        the cluster's table (each agent once, `sender` skipped), placing and creating agents as `send_message`
        does. Returns once the gateway has it; a recipient whose type no worker hosts is reported as for
        `send_message` (logged, and `on_undelivered`)."""
        topic_id = check_topic_id(topic_id)
        check_sender(sender)
        check_message_id(message_id)
        self._check_open()
        if cancellation_token is not None and cancellation_token.is_cancelled():
            raise asyncio.CancelledError("cancelled by CancellationToken before sending")
        envelope, span = self._sender.delivery(
            pb.DELIVERY_KIND_PUBLISH, message, sender, topic=topic_id, message_id=message_id
        )
        await self._sender.post_observed(envelope, span)

    async def add_subscription(self, subscription: Subscription) -> None:
        """Add a subscription to the cluster's table (in the gateway's registry: every replica sees it). An equal
        one already there (same kind, topic type or prefix, agent type) changes nothing. Only `TypeSubscription`
        and `TypePrefixSubscription` can be shared; `UndeliverableError` when the registry cannot be reached."""
        wire = subscription_to_wire(check_subscription(subscription))
        self._check_open()
        request_id = self._sender.next_id()
        message = pb.Message(add_subscription=pb.AddSubscription(request_id=request_id, subscription=wire))
        reply = await self._sender.control(message, request_id)
        if reply.HasField("error"):
            raise_control_error(reply.error, f"add {subscription!r}")

    async def remove_subscription(self, id: str) -> None:
        """Remove the subscription `id` from the cluster's table; `LookupError` naming it when there is none."""
        if not isinstance(id, str):
            raise TypeError(f"id must be a str, got {type(id).__name__}")
        self._check_open()
        request_id = self._sender.next_id()
        message = pb.Message(remove_subscription=pb.RemoveSubscription(request_id=request_id, id=id))
        reply = await self._sender.control(message, request_id)
        if reply.HasField("error"):
            raise_control_error(reply.error, f"remove subscription {id!r}")

    async def list_subscriptions(self) -> list[Subscription]:
        """Every subscription in the cluster's table."""
        self._check_open()
        request_id = self._sender.next_id()
        message = pb.Message(list_subscriptions=pb.ListSubscriptions(request_id=request_id))
        reply = await self._sender.control(message, request_id)
        if reply.HasField("error"):
            raise_control_error(reply.error, "list the subscriptions")
        return [subscription_of_wire(s) for s in reply.subscriptions]

    async def list_agents(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        """Every active agent in the cluster (of one type, or all), from the gateway's registry. Raises
        `UndeliverableError` when the gateway cannot reach its registry."""
        name = "" if agent_type is None else agent_type_name(agent_type)
        self._check_open()
        request_id = self._sender.next_id()
        reply = await self._sender.control(
            pb.Message(list_agents=pb.ListAgents(request_id=request_id, type=name)), request_id
        )
        if reply.error:
            raise UndeliverableError(f"the gateway could not list the agents: {reply.error}")
        return [AgentId(a.type, a.key) for a in reply.agents]

    async def local_agents(self) -> list[AgentId]:
        """The agents hosted by this worker (active now: deactivated ones are not listed)."""
        return await self._local.list_agents()

    async def save_state(self) -> dict[str, Mapping[str, Any]]:
        """The state of each agent this worker hosts (and, with a state store, of each deactivated agent of a
        type it hosts), keyed by `str(agent_id)`. Agents on other workers are theirs to save."""
        self._check_open()
        return await self._local.save_state()

    async def load_state(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Give agents of the types this worker hosts their state (see `LocalAgentRuntime.load_state`)."""
        self._check_open()
        await self._local.load_state(state)
