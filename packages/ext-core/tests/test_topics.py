from __future__ import annotations

import uuid

import pytest

from ext.core import (
    AgentId,
    AgentType,
    MessageContext,
    Subscription,
    SubscriptionTable,
    TopicId,
    TypePrefixSubscription,
    TypeSubscription,
    check_message_id,
    check_subscription,
    check_topic_id,
)


def test_topic_id_is_frozen_hashable_and_prints_as_type_slash_source() -> None:
    topic = TopicId("news.sport", "room/1")
    assert str(topic) == "news.sport/room/1"
    assert TopicId.from_str("news.sport/room/1") == topic
    assert {topic, TopicId("news.sport", "room/1")} == {topic}
    with pytest.raises(AttributeError):
        topic.type = "other"  # type: ignore[misc]


@pytest.mark.parametrize("good", ["a", "a-b_c.d:e=f", "Ünïcode_9"])
def test_topic_type_follows_autogens_rule(good: str) -> None:
    assert TopicId(good, "s").type == good


@pytest.mark.parametrize("bad", ["", "a b", "a/b", "a\n", "a\u00a0", "x!"])
def test_bad_topic_type_names_the_field(bad: str) -> None:
    with pytest.raises(ValueError, match=r"TopicId\.type must be letters"):
        TopicId(bad, "s")


@pytest.mark.parametrize("bad", ["", None, 3, "two\nlines", "nul\x00", "\u2028"])
def test_bad_topic_source_names_the_field(bad: object) -> None:
    # The source becomes an agent key: what AgentId refuses is refused here, naming the topic's field.
    with pytest.raises(ValueError, match=r"TopicId\.source must be a non-empty printable string"):
        TopicId("t", bad)  # type: ignore[arg-type]


def test_topic_id_from_str_needs_a_slash() -> None:
    with pytest.raises(ValueError, match="type/source"):
        TopicId.from_str("nosource")


def test_type_subscription_matches_exactly_and_maps_the_source_to_the_key() -> None:
    sub = TypeSubscription("news", "reader")
    assert sub.is_match(TopicId("news", "k1"))
    assert not sub.is_match(TopicId("newsroom", "k1"))
    assert sub.map_to_agent(TopicId("news", "k1")) == AgentId("reader", "k1")
    with pytest.raises(ValueError, match="newsroom/k1 does not match"):
        sub.map_to_agent(TopicId("newsroom", "k1"))
    assert isinstance(sub, Subscription)
    assert (sub.topic_type, sub.agent_type) == ("news", "reader")


def test_prefix_subscription_matches_by_prefix() -> None:
    sub = TypePrefixSubscription("news.", AgentType("reader"))
    assert sub.agent_type == "reader"
    assert sub.is_match(TopicId("news.sport", "x"))
    assert not sub.is_match(TopicId("news", "x"))
    assert sub.map_to_agent(TopicId("news.sport", "x")) == AgentId("reader", "x")
    with pytest.raises(ValueError, match="does not match"):
        sub.map_to_agent(TopicId("weather", "x"))


def test_subscription_id_defaults_to_a_uuid4() -> None:
    first, second = TypeSubscription("t", "a"), TypeSubscription("t", "a")
    assert uuid.UUID(first.id).version == 4
    assert first.id != second.id
    assert TypeSubscription("t", "a", id="mine").id == "mine"


def test_equality_ignores_the_id_and_tells_the_kinds_apart() -> None:
    assert TypeSubscription("t", "a", id="1") == TypeSubscription("t", "a", id="2")
    assert hash(TypeSubscription("t", "a", id="1")) == hash(TypeSubscription("t", "a", id="2"))
    assert TypeSubscription("t", "a") != TypePrefixSubscription("t", "a")
    assert TypeSubscription("t", "a") != TypeSubscription("t", "b")
    assert TypeSubscription("t", "a") != TypeSubscription("u", "a")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: TypeSubscription("bad type", "a"), r"TypeSubscription\.topic_type"),
        (lambda: TypeSubscription("t", "bad type"), r"TypeSubscription\.agent_type"),
        (lambda: TypeSubscription("t", "a=b"), r"TypeSubscription\.agent_type"),
        (lambda: TypePrefixSubscription("", "a"), r"TypePrefixSubscription\.topic_type_prefix"),
        (lambda: TypePrefixSubscription("p", "a", id=""), r"TypePrefixSubscription\.id"),
    ],
)
def test_bad_subscription_fields_are_named(build: object, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        build()  # type: ignore[operator]


def test_argument_checks_name_the_argument() -> None:
    with pytest.raises(TypeError, match="topic_id must be a TopicId, got str"):
        check_topic_id("t/s")
    with pytest.raises(TypeError, match="subscription must be a Subscription"):
        check_subscription(("t", "a"))


def test_equal_subscriptions_are_one_entry_held_by_each_id() -> None:
    table = SubscriptionTable()
    first = TypeSubscription("t", "a", id="first")
    assert table.add(first) is first
    assert table.add(first) is first  # the same id again: nothing changes
    # An equal subscription with another id: one entry (listed and delivered once), and its id holds it too.
    second = TypeSubscription("t", "a", id="second")
    assert table.add(second) is first
    assert table.subscriptions() == [first]
    assert len(table) == 1
    assert table.recipients(TopicId("t", "k")) == [AgentId("a", "k")]
    assert table.remove("second") is second
    assert table.subscriptions() == [first]
    assert table.remove("first") is first
    assert len(table) == 0
    assert table.recipients(TopicId("t", "k")) == []
    with pytest.raises(LookupError, match="'first'"):
        table.remove("first")
    # Removed in the other order, the entry is listed under the id that still holds it.
    table.add(first)
    table.add(second)
    table.remove("first")
    assert [s.id for s in table.subscriptions()] == ["second"]


def test_table_refuses_a_reused_id_for_another_mapping() -> None:
    table = SubscriptionTable([TypeSubscription("t", "a", id="x")])
    with pytest.raises(ValueError, match="'x' is already used"):
        table.add(TypeSubscription("u", "a", id="x"))


def test_recipients_are_deduplicated_and_sorted() -> None:
    table = SubscriptionTable(
        [
            TypeSubscription("news.sport", "zeta"),
            TypePrefixSubscription("news.", "zeta"),  # maps to the same agent as the line above
            TypePrefixSubscription("news", "alpha"),
            TypeSubscription("weather", "alpha"),
        ]
    )
    assert table.recipients(TopicId("news.sport", "k")) == [AgentId("alpha", "k"), AgentId("zeta", "k")]
    assert table.recipients(TopicId("weather", "k")) == [AgentId("alpha", "k")]
    assert table.recipients(TopicId("nothing", "k")) == []


def test_message_context_of_a_published_message() -> None:
    topic = TopicId("t", "s")
    ctx = MessageContext(AgentId("a", "s"), None, False, "m1", topic_id=topic)
    assert (ctx.topic_id, ctx.is_broadcast) == (topic, True)
    plain = MessageContext(AgentId("a", "s"), None, False, "m2")
    assert (plain.topic_id, plain.is_broadcast) == (None, False)
    assert "topic_id=t/s" in repr(ctx)


def test_message_id_check() -> None:
    assert check_message_id(None) is None
    assert check_message_id("m1") == "m1"
    for bad in ("", 7):
        with pytest.raises(ValueError, match="message_id must be a non-empty string or None"):
            check_message_id(bad)
