"""The agent runtime protocol: agents addressed by `AgentId`, created by factories, exchanging messages.

Implementations live in `ext.runtime.local` (one process) and `ext.runtime.grpc` (across machines); both
pass the same conformance suite (`ext.testing.conformance.RuntimeConformance`).
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar, Union, cast, overload, runtime_checkable

from ._agent_id import AgentId, AgentType
from ._cancellation import CancellationToken
from ._errors import ExtError
from ._topics import Subscription, TopicId
from ._trace_context import TraceContext

DEFAULT_RPC_TIMEOUT = 60.0
"""Seconds `send_and_await_response` waits when the caller passes no timeout."""


# --- errors ----------------------------------------------------------------------------------------


class UndeliverableError(ExtError, RuntimeError):
    """A message could not be delivered to its recipient (no such agent type, the hosting worker died,
    the factory failed)."""


class AgentNotFoundError(UndeliverableError, LookupError):
    """No factory is registered for the recipient's agent type (anywhere in the cluster)."""


class RuntimeClosedError(ExtError, RuntimeError):
    """The runtime was stopped (or lost its gateway for good) and cannot deliver messages."""


class CantHandleError(ExtError, TypeError):
    """The recipient has no handler for the message's type."""


class MessageHandlerError(ExtError, RuntimeError):
    """A handler in another process raised. `error_type` is the remote exception's class name.

    In-process runtimes re-raise the handler's own exception instead.
    """

    def __init__(self, message: str, *, error_type: str = "Exception") -> None:
        super().__init__(message)
        self.error_type = error_type


# --- message context, agent and runtime protocols -------------------------------------------------


class MessageContext:
    """What a handler knows about the message it is handling. Read-only by convention.

    Attributes:
        recipient: the agent handling the message.
        sender: the sending agent, or None when the message came from outside any agent.
        is_rpc: True for `send_and_await_response`: the handler's return value goes back to the caller.
        message_id: unique per delivery; an RPC's id is also its correlation id.
        is_broadcast: True when the message was delivered by `broadcast` or `publish`.
        topic_id: the topic a published message was published to (None for any other message).
        cancellation_token: cancelled when the caller stops waiting (timeout, cancellation) or the runtime
            stops (created on first use: most handlers never look at it).
        trace: the W3C trace context the message came with (None when the sender traced nothing).
    """

    # A plain slotted class rather than a frozen dataclass: one is built per delivered message.
    __slots__ = ("_token", "is_broadcast", "is_rpc", "message_id", "recipient", "sender", "topic_id", "trace")

    def __init__(
        self,
        recipient: AgentId,
        sender: AgentId | None,
        is_rpc: bool,
        message_id: str,
        cancellation_token: CancellationToken | None = None,
        is_broadcast: bool = False,
        trace: TraceContext | None = None,
        topic_id: TopicId | None = None,
    ) -> None:
        self.recipient = recipient
        self.sender = sender
        self.is_rpc = is_rpc
        self.message_id = message_id
        self.is_broadcast = is_broadcast or topic_id is not None
        self.trace = trace
        self.topic_id = topic_id
        self._token = cancellation_token

    @property
    def cancellation_token(self) -> CancellationToken:
        token = self._token
        if token is None:
            token = self._token = CancellationToken()
        return token

    def __repr__(self) -> str:
        return (
            f"MessageContext(recipient={self.recipient}, sender={self.sender}, is_rpc={self.is_rpc}, "
            f"message_id={self.message_id!r}, is_broadcast={self.is_broadcast}, topic_id={self.topic_id})"
        )


@runtime_checkable
class Agent(Protocol):
    """An agent: an id and a message handler. Runtimes call `close()` when they stop."""

    @property
    def id(self) -> AgentId: ...

    async def on_message(self, message: Any, ctx: MessageContext) -> Any: ...

    async def close(self) -> None: ...


AgentFactory = Callable[[AgentId, "AgentRuntime"], Union[Agent, Awaitable[Agent]]]
"""Builds the agent for an id on the first message to it: `factory(agent_id, runtime)`, sync or async.
An agent class whose constructor takes `(id, runtime)` (such as any `BaseAgent` subclass) is a factory."""


@runtime_checkable
class AgentRuntime(Protocol):
    """Delivers messages to agents, creating each agent on the first message to its id.

    Use it as an async context manager, or call `start()` and `stop()`.
    """

    async def start(self) -> None:
        """Start (connect, for remote runtimes). Idempotent."""
        ...

    async def stop(self) -> None:
        """Stop: later calls raise `RuntimeClosedError`; every active agent is closed. Idempotent."""
        ...

    async def register_agent_factory(self, agent_type: str | AgentType, factory: AgentFactory) -> AgentType:
        """Register the factory that builds agents of `agent_type`. Registering a type twice is an error."""
        ...

    async def send_message(
        self,
        message: Any,
        recipient: AgentId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> None:
        """Send one way. Returns once the message is accepted for delivery; handler errors are logged."""
        ...

    async def send_and_await_response(
        self,
        message: Any,
        recipient: AgentId,
        timeout: float | None = DEFAULT_RPC_TIMEOUT,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> Any:
        """Send and return the handler's return value; raises `TimeoutError` after `timeout` seconds
        (None waits without a deadline) and re-raises the handler's error."""
        ...

    async def broadcast(self, message: Any, agent_type: str | AgentType, *, sender: AgentId | None = None) -> None:
        """Send one way to every active agent of `agent_type` (except `sender`)."""
        ...

    async def publish(
        self,
        message: Any,
        topic_id: TopicId,
        *,
        sender: AgentId | None = None,
        cancellation_token: CancellationToken | None = None,
        message_id: str | None = None,
    ) -> None:
        """Send one way to the recipient of every subscription matching `topic_id`, each agent once (however
        many of its subscriptions match), except `sender`; recipients are created on demand. No matching
        subscription: nothing happens. Each recipient's `ctx.topic_id` is `topic_id` (and `ctx.is_broadcast`
        True); its `ctx.message_id` is `message_id` (default: a new id), the same for every recipient."""
        ...

    async def add_subscription(self, subscription: Subscription) -> None:
        """Add a subscription; adding one equal to a subscription already there (same kind, topic type or
        prefix, and agent type, whatever the id) changes nothing."""
        ...

    async def remove_subscription(self, id: str) -> None:
        """Remove the subscription `id`; `LookupError` naming it when there is none."""
        ...

    async def list_subscriptions(self) -> list[Subscription]:
        """Every subscription (in a cluster: the whole cluster's)."""
        ...

    async def list_agents(self, agent_type: str | AgentType | None = None) -> list[AgentId]:
        """The active agents (of one type, or all), sorted by type then key."""
        ...

    async def save_state(self) -> dict[str, Mapping[str, Any]]:
        """Each hosted agent's `save_state()` (and, with a state store, each deactivated agent's stored
        state), keyed by `str(agent_id)`."""
        ...

    async def load_state(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Give each agent named in `state` (`str(agent_id)` keys, as `save_state` returns) its state,
        activating it if needed (and saving it to the state store, if any)."""
        ...


# --- argument checks shared by runtimes -----------------------------------------------------------


def agent_type_name(value: object, argument: str = "agent_type") -> str:
    """The type name of a `str` or `AgentType` argument; a `ValueError` naming `argument` otherwise."""
    if isinstance(value, AgentType):
        return value.name
    if isinstance(value, str):
        try:
            return AgentType(value).name
        except ValueError as exc:
            raise ValueError(f"{argument}: {exc}") from None
    raise TypeError(f"{argument} must be a str or AgentType, got {type(value).__name__}")


def check_agent_id(value: object, argument: str = "recipient") -> AgentId:
    """`value` if it is an `AgentId`; a `TypeError` naming `argument` otherwise."""
    if not isinstance(value, AgentId):
        raise TypeError(f"{argument} must be an AgentId, got {type(value).__name__}")
    return value


def check_timeout(value: object, argument: str = "timeout") -> float | None:
    """A positive finite number of seconds, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{argument} must be a positive number of seconds or None, got {value!r}")
    return float(value)


def check_seconds(value: object, argument: str) -> float:
    """A positive finite number of seconds (None refused): `check_timeout` for a setting that must bound."""
    checked = check_timeout(value, argument)
    if checked is None:
        raise ValueError(f"{argument} must be a positive number of seconds, got None")
    return checked


def check_sender(value: object) -> AgentId | None:
    """`value` if it is an `AgentId` or None; a `TypeError` naming `sender` otherwise."""
    return None if value is None else check_agent_id(value, "sender")


def check_factory(value: object) -> AgentFactory:
    """`value` if it is callable (as `factory(agent_id, runtime)`); a `TypeError` otherwise."""
    if not callable(value):
        raise TypeError(f"factory must be callable as factory(agent_id, runtime), got {type(value).__name__}")
    return cast("AgentFactory", value)


# --- agents ------------------------------------------------------------------------------------------


class BaseAgent(ABC):
    """An agent bound to its id and runtime; the constructor signature `(id, runtime)` makes the class
    itself a factory. Subclasses implement `on_message` (or use `RoutedAgent`)."""

    def __init__(self, id: AgentId, runtime: AgentRuntime) -> None:
        self._id = check_agent_id(id, "id")
        self._runtime = runtime

    @property
    def id(self) -> AgentId:
        return self._id

    @property
    def runtime(self) -> AgentRuntime:
        return self._runtime

    @abstractmethod
    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        """Handle one message; for an RPC the return value is the response."""

    async def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources; called once when the runtime stops or deactivates the agent."""

    async def save_state(self) -> Mapping[str, Any]:
        """The agent's state as a JSON-compatible mapping (nothing by default: override it, and `load_state`,
        in agents that keep state). Runtimes with a state store save it per their `SavePolicy`."""
        return {}

    async def load_state(self, state: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what `save_state` returned (called on activation when a state store holds a record)."""

    async def send_message(
        self, message: Any, recipient: AgentId, *, cancellation_token: CancellationToken | None = None
    ) -> None:
        """`runtime.send_message` with this agent as the sender."""
        await self._runtime.send_message(message, recipient, sender=self._id, cancellation_token=cancellation_token)

    async def send_and_await_response(
        self,
        message: Any,
        recipient: AgentId,
        timeout: float | None = DEFAULT_RPC_TIMEOUT,
        *,
        cancellation_token: CancellationToken | None = None,
    ) -> Any:
        """`runtime.send_and_await_response` with this agent as the sender."""
        return await self._runtime.send_and_await_response(
            message, recipient, timeout, sender=self._id, cancellation_token=cancellation_token
        )

    async def broadcast(self, message: Any, agent_type: str | AgentType) -> None:
        """`runtime.broadcast` with this agent as the sender (so it does not receive its own message)."""
        await self._runtime.broadcast(message, agent_type, sender=self._id)

    async def publish_message(
        self, message: Any, topic_id: TopicId, *, cancellation_token: CancellationToken | None = None
    ) -> None:
        """`runtime.publish` with this agent as the sender (so it does not receive its own message)."""
        await self._runtime.publish(message, topic_id, sender=self._id, cancellation_token=cancellation_token)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._id})"


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_HANDLER_ATTR = "__ext_message_types__"


@overload
def message_handler(func: F, *, types: None = None) -> F: ...


@overload
def message_handler(
    func: None = None, *, types: type[Any] | tuple[type[Any], ...] | None = None
) -> Callable[[F], F]: ...


def message_handler(
    func: F | None = None, *, types: type[Any] | tuple[type[Any], ...] | None = None
) -> F | Callable[[F], F]:
    """Mark an async method `(self, message: T, ctx: MessageContext)` of a `RoutedAgent` as the handler
    for messages of type `T` (a union routes several types). The hint is read when the class is created;
    pass `types=` when the hint cannot be resolved (a class defined inside a function)."""

    explicit: tuple[type[Any], ...] | None
    if types is None:
        explicit = None
    elif isinstance(types, type):
        explicit = (types,)
    elif isinstance(types, tuple) and types and all(isinstance(t, type) for t in types):
        explicit = types
    else:
        raise TypeError(f"message_handler types must be a class or a non-empty tuple of classes, got {types!r}")

    def decorate(fn: F) -> F:
        is_async = inspect.iscoroutinefunction(fn)  # kept apart so mypy does not narrow `fn`
        if not is_async:
            raise TypeError(f"message handler {fn.__qualname__} must be an async def method")
        setattr(fn, _HANDLER_ATTR, explicit if explicit is not None else ())
        return fn

    if func is not None:
        return decorate(func)
    return decorate


def _types_of_hint(hint: Any) -> tuple[type[Any], ...] | None:
    if isinstance(hint, type):
        return (hint,)
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        found: list[type[Any]] = []
        for arg in typing.get_args(hint):
            inner = _types_of_hint(arg)
            if inner is None:
                return None
            found.extend(inner)
        return tuple(found)
    if origin is not None and isinstance(origin, type):
        return (origin,)
    return None


def _handler_types(cls: type, name: str, fn: Callable[..., Any]) -> tuple[type[Any], ...]:
    explicit: tuple[type[Any], ...] = getattr(fn, _HANDLER_ATTR)
    if explicit:
        return explicit
    params = list(inspect.signature(fn).parameters.values())
    if len(params) < 3:
        raise TypeError(f"message handler {cls.__qualname__}.{name} must take (self, message, ctx)")
    message_param = params[1].name
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # NameError for names not visible at module level
        raise TypeError(
            f"cannot resolve the type hint of {message_param!r} in {cls.__qualname__}.{name} ({exc}); "
            "define the message class at module level or pass @message_handler(types=...)"
        ) from None
    hint = hints.get(message_param)
    found = _types_of_hint(hint) if hint is not None else None
    if not found:
        raise TypeError(
            f"message handler {cls.__qualname__}.{name} needs a class type hint on {message_param!r} "
            f"(got {hint!r}) or @message_handler(types=...)"
        )
    return found


class RoutedAgent(BaseAgent):
    """An agent whose `@message_handler` methods receive messages by type (the most specific class in
    the message's MRO wins). A message with no handler goes to `on_unhandled_message`, which raises
    `CantHandleError`."""

    _routes: ClassVar[dict[type[Any], str]] = {}
    _route_cache: ClassVar[dict[type[Any], str | None]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        routes: dict[type[Any], str] = {}
        for base in reversed(cls.__mro__[1:]):
            routes.update(getattr(base, "_routes", {}))
        own: dict[type[Any], str] = {}
        for name, fn in vars(cls).items():
            if callable(fn) and hasattr(fn, _HANDLER_ATTR):
                for message_type in _handler_types(cls, name, fn):
                    if message_type in own:
                        raise TypeError(
                            f"{cls.__qualname__}: {message_type.__qualname__} is handled by both "
                            f"{own[message_type]} and {name}"
                        )
                    own[message_type] = name
        routes.update(own)
        cls._routes = routes
        cls._route_cache = {}

    @classmethod
    def handled_message_types(cls) -> tuple[type[Any], ...]:
        """Every message class this agent has a handler for (runtimes that serialize use it)."""
        return tuple(cls._routes)

    def _route(self, message_type: type[Any]) -> str | None:
        cache = type(self)._route_cache
        try:
            return cache[message_type]
        except KeyError:
            pass
        routes = type(self)._routes
        name = next((routes[k] for k in message_type.__mro__ if k in routes), None)
        cache[message_type] = name
        return name

    async def on_message(self, message: Any, ctx: MessageContext) -> Any:
        name = self._route(type(message))
        if name is None:
            return await self.on_unhandled_message(message, ctx)
        return await getattr(self, name)(message, ctx)

    async def on_unhandled_message(self, message: Any, ctx: MessageContext) -> Any:
        """Called for a message with no handler; raises `CantHandleError` unless overridden."""
        raise CantHandleError(f"agent {self.id} has no handler for messages of type {type(message).__qualname__}")


__all__ = [
    "DEFAULT_RPC_TIMEOUT",
    "Agent",
    "AgentFactory",
    "AgentNotFoundError",
    "AgentRuntime",
    "BaseAgent",
    "CantHandleError",
    "MessageContext",
    "MessageHandlerError",
    "RoutedAgent",
    "RuntimeClosedError",
    "UndeliverableError",
    "agent_type_name",
    "check_agent_id",
    "check_factory",
    "check_seconds",
    "check_sender",
    "check_timeout",
    "message_handler",
]
