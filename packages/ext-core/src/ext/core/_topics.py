"""Topics and subscriptions: `publish(message, TopicId(type, source))` reaches every agent whose subscription
matches the topic, as `AgentId(subscribed agent type, key=topic source)`.

The vocabulary is AutoGen's (`TopicId`, `TypeSubscription`, `TypePrefixSubscription`), with the same validation
and equality rules, so AutoGen workers and ext workers can share one subscription table. `SubscriptionTable` is
the table itself, shared by the runtimes and the gRPC gateway's registry.
"""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

from ._agent_id import AgentId, AgentType

__all__ = [
    "Subscription",
    "SubscriptionTable",
    "TopicId",
    "TypePrefixSubscription",
    "TypeSubscription",
    "check_message_id",
    "check_subscription",
    "check_topic_id",
]

# AutoGen's rule for topic types (autogen_core/_topic.py: `is_valid_topic_type`), kept so that a topic valid on
# one side is valid on the other.
_TOPIC_TYPE_RE = re.compile(r"^[\w\-\.\:\=]+\Z")
_TOPIC_TYPE_RULE = "letters, digits, '_', '-', '.', ':' or '='"


def _check_topic_type(value: object, field: str) -> str:
    if not isinstance(value, str) or not _TOPIC_TYPE_RE.match(value):
        raise ValueError(f"{field} must be {_TOPIC_TYPE_RULE} (at least one), got {value!r}")
    return value


def _check_agent_type(value: object, field: str) -> str:
    if isinstance(value, AgentType):
        return value.name
    try:
        return AgentType(value).name  # type: ignore[arg-type]  # validated by AgentType
    except ValueError:
        raise ValueError(f"{field} must be letters, digits, '_', '-', '.' or ':', got {value!r}") from None


@dataclass(frozen=True, slots=True)
class TopicId:
    """Where a published message goes: a topic `type` (what it is about) and a `source` (which instance of it:
    the recipients' agent key). String form `type/source`."""

    type: str
    source: str

    def __post_init__(self) -> None:
        _check_topic_type(self.type, "TopicId.type")
        # The source becomes the recipients' agent key (`AgentId(agent type, source)`), so it follows the key's rule
        # here, where a bad one can be named, not later inside `publish`.
        if not isinstance(self.source, str) or not self.source or not self.source.isprintable():
            raise ValueError(
                f"TopicId.source must be a non-empty printable string (it becomes the recipients' agent key), "
                f"got {self.source!r}"
            )

    @classmethod
    def from_str(cls, value: str) -> TopicId:
        """Parse `type/source` (the source may itself contain '/')."""
        if not isinstance(value, str):
            raise TypeError(f"TopicId string must be a str, got {type(value).__name__}")
        topic_type, sep, source = value.partition("/")
        if not sep:
            raise ValueError(f"TopicId string must look like 'type/source', got {value!r}")
        return cls(topic_type, source)

    def __str__(self) -> str:
        return f"{self.type}/{self.source}"


class Subscription(ABC):
    """Maps the topics it matches to a recipient agent. Equal subscriptions (same kind, topic type or prefix,
    and agent type, whatever their ids) are one entry in a subscription table."""

    @property
    @abstractmethod
    def id(self) -> str:
        """Unique per subscription; `remove_subscription(id)` removes it."""

    @property
    @abstractmethod
    def agent_type(self) -> str:
        """The type of the agents it maps topics to."""

    @abstractmethod
    def is_match(self, topic_id: TopicId) -> bool:
        """Whether a message published to `topic_id` reaches this subscription's agent."""

    @abstractmethod
    def map_to_agent(self, topic_id: TopicId) -> AgentId:
        """The recipient of a message published to `topic_id`; `ValueError` when the topic does not match."""


class _TopicTypeSubscription(Subscription):
    """The two built-in kinds: a topic type (or prefix) and an agent type; the recipient's key is the source."""

    __slots__ = ("_agent_type", "_id", "_topic")
    _field = ""

    def __init__(self, topic: str, agent_type: str | AgentType, id: str | None = None) -> None:
        name = type(self).__name__
        self._topic = _check_topic_type(topic, f"{name}.{self._field}")
        self._agent_type = _check_agent_type(agent_type, f"{name}.agent_type")
        if id is None:
            id = str(uuid.uuid4())
        elif not isinstance(id, str) or not id:
            raise ValueError(f"{name}.id must be a non-empty string or None, got {id!r}")
        self._id = id

    @property
    def id(self) -> str:
        return self._id

    @property
    def agent_type(self) -> str:
        return self._agent_type

    def map_to_agent(self, topic_id: TopicId) -> AgentId:
        if not self.is_match(topic_id):
            raise ValueError(f"topic {topic_id} does not match {self!r}")
        return AgentId(self._agent_type, topic_id.source)

    def _key(self) -> tuple[str, str, str]:
        return (type(self).__name__, self._topic, self._agent_type)

    def __eq__(self, other: object) -> bool:
        # AutoGen's rule: the id does not count, so adding the same mapping twice is one entry.
        if not isinstance(other, _TopicTypeSubscription):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._field}={self._topic!r}, agent_type={self._agent_type!r}, id={self._id!r})"


class TypeSubscription(_TopicTypeSubscription):
    """Matches topics whose type is exactly `topic_type`: a message published to `TopicId(topic_type, source)`
    reaches `AgentId(agent_type, source)`."""

    __slots__ = ()
    _field = "topic_type"

    def __init__(self, topic_type: str, agent_type: str | AgentType, id: str | None = None) -> None:
        super().__init__(topic_type, agent_type, id)

    @property
    def topic_type(self) -> str:
        return self._topic

    def is_match(self, topic_id: TopicId) -> bool:
        return topic_id.type == self._topic


class TypePrefixSubscription(_TopicTypeSubscription):
    """Matches topics whose type starts with `topic_type_prefix`: a message published to
    `TopicId(type, source)` with a matching type reaches `AgentId(agent_type, source)`."""

    __slots__ = ()
    _field = "topic_type_prefix"

    def __init__(self, topic_type_prefix: str, agent_type: str | AgentType, id: str | None = None) -> None:
        super().__init__(topic_type_prefix, agent_type, id)

    @property
    def topic_type_prefix(self) -> str:
        return self._topic

    def is_match(self, topic_id: TopicId) -> bool:
        return topic_id.type.startswith(self._topic)


def check_topic_id(value: object, argument: str = "topic_id") -> TopicId:
    """`value` if it is a `TopicId`; a `TypeError` naming `argument` otherwise."""
    if not isinstance(value, TopicId):
        raise TypeError(f"{argument} must be a TopicId, got {type(value).__name__}")
    return value


def check_message_id(value: object) -> str | None:
    """`value` if it is a non-empty str or None (a `publish`'s `message_id`); a `ValueError` naming it otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"message_id must be a non-empty string or None, got {value!r}")
    return value


def check_subscription(value: object, argument: str = "subscription") -> Subscription:
    """`value` if it is a `Subscription`; a `TypeError` naming `argument` otherwise."""
    if not isinstance(value, Subscription):
        raise TypeError(
            f"{argument} must be a Subscription (TypeSubscription, TypePrefixSubscription), got {type(value).__name__}"
        )
    return value


class SubscriptionTable:
    """A subscription table in memory: what a runtime or a registry keeps.

    Equal subscriptions (see `Subscription`) are one entry: a published message reaches their agent once, and the
    listing shows the entry once (with the id it was first added under). Each id it was added under holds it:
    `remove(id)` works for every one of them, and the entry goes when the last id holding it is removed, so two
    parts of a program that subscribe the same mapping each remove their own."""

    __slots__ = ("_by_id",)

    def __init__(self, subscriptions: Iterable[Subscription] = ()) -> None:
        self._by_id: dict[str, Subscription] = {}
        for subscription in subscriptions:
            self.add(subscription)

    def add(self, subscription: Subscription) -> Subscription:
        """Add `subscription` (its id then holds the entry of its equals, if there is one); returns the entry as
        listed: the first equal subscription added. Re-adding the same id changes nothing; an id already holding a
        different subscription is a `ValueError`."""
        subscription = check_subscription(subscription)
        held = self._by_id.get(subscription.id)
        if held is not None and held != subscription:
            raise ValueError(f"subscription id {subscription.id!r} is already used by {held!r}")
        listed = next((s for s in self._by_id.values() if s == subscription), subscription)
        self._by_id.setdefault(subscription.id, subscription)
        return listed

    def remove(self, id: str) -> Subscription:
        """Remove the id `id` and return its subscription; `LookupError` naming it when no subscription has it."""
        try:
            return self._by_id.pop(id)
        except (KeyError, TypeError):
            raise LookupError(f"no subscription with id {id!r}") from None

    def __len__(self) -> int:
        return len(self.subscriptions())

    def subscriptions(self) -> list[Subscription]:
        """The entries, in the order they were first added: equal subscriptions once, under the earliest id that
        still holds them."""
        entries: list[Subscription] = []
        for subscription in self._by_id.values():
            if subscription not in entries:
                entries.append(subscription)
        return entries

    def recipients(self, topic_id: TopicId) -> list[AgentId]:
        """Every agent a message published to `topic_id` reaches: one per matching agent type (however many
        subscriptions map to it), sorted by type then key."""
        found = {s.map_to_agent(topic_id) for s in self._by_id.values() if s.is_match(topic_id)}
        return sorted(found, key=lambda a: (a.type, a.key))
