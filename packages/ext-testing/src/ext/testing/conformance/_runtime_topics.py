"""Topic scenarios of the runtime conformance suite: `publish` reaches the recipient of every matching subscription
(exact or prefix), each agent once, never the sender, creating agents on demand; subscriptions are added, listed
and removed cluster-wide (through one member, seen by the other). `RuntimeConformance` inherits these, so every
runtime runs them.

Each scenario reads an agent's notes through the runtime that published: one runtime's messages are handled in
the order it sent them, so the published note is there (or, when it should not be, will never come)."""

from __future__ import annotations

from typing import Any

import pytest

from ext.core import (
    AgentId,
    AgentRuntime,
    TopicId,
    TypePrefixSubscription,
    TypeSubscription,
)
from ext.testing.conformance._waits import within
from ext.testing.runtime_agents import EchoAgent, GetNotes, Journal, Note, Ping


class RuntimeTopicScenarios:
    """See the module docstring; the fixtures (`runtime`, `peer`, `journal`) are `RuntimeConformance`'s."""

    async def _echo(self, runtime: AgentRuntime, journal: Journal, agent_type: str = "echo") -> None:
        await within(runtime.register_agent_factory(agent_type, lambda aid, rt: EchoAgent(aid, rt, journal)))

    async def _notes(self, runtime: AgentRuntime, agent: AgentId) -> list[str]:
        notes = await within(runtime.send_and_await_response(GetNotes(), agent))
        return list(notes.notes)

    async def test_publish_reaches_exact_subscribers_and_creates_them(
        self, runtime: AgentRuntime, journal: Journal
    ) -> None:
        await self._echo(runtime, journal)
        await within(runtime.add_subscription(TypeSubscription("news", "echo")))
        await within(runtime.publish(Note(text="hello"), TopicId("news", "k1")))
        await within(runtime.publish(Note(text="elsewhere"), TopicId("newsroom", "k1")))
        # echo/k1 was not active: the publish created it (a broadcast would not have).
        assert await self._notes(runtime, AgentId("echo", "k1")) == ["hello!"]
        assert journal.created == [AgentId("echo", "k1")]

    async def test_prefix_subscription(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self._echo(runtime, journal)
        await within(runtime.add_subscription(TypePrefixSubscription("news.", "echo")))
        for topic_type in ("news.sport", "news.weather", "news", "sport.news."):
            await within(runtime.publish(Note(text=topic_type), TopicId(topic_type, "p")))
        assert await self._notes(runtime, AgentId("echo", "p")) == ["news.sport!", "news.weather!"]

    async def test_an_agent_matched_by_several_subscriptions_gets_the_message_once(
        self, runtime: AgentRuntime, journal: Journal
    ) -> None:
        await self._echo(runtime, journal)
        await self._echo(runtime, journal, "other")
        for subscription in (
            TypeSubscription("news.sport", "echo"),
            TypePrefixSubscription("news.", "echo"),
            TypePrefixSubscription("news", "echo"),
            TypeSubscription("news.sport", "other"),
        ):
            await within(runtime.add_subscription(subscription))
        await within(runtime.publish(Note(text="goal"), TopicId("news.sport", "d")))
        assert await self._notes(runtime, AgentId("echo", "d")) == ["goal!"]
        assert await self._notes(runtime, AgentId("other", "d")) == ["goal!"]

    async def test_the_sender_does_not_receive_its_own_publish(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self._echo(runtime, journal)
        await self._echo(runtime, journal, "other")
        await within(runtime.add_subscription(TypeSubscription("chat", "echo")))
        await within(runtime.add_subscription(TypeSubscription("chat", "other")))
        me = AgentId("echo", "room")
        await within(runtime.publish(Note(text="hi all"), TopicId("chat", "room"), sender=me))
        assert await self._notes(runtime, AgentId("other", "room")) == ["hi all!"]
        assert journal.created == [AgentId("other", "room")]  # the sender was not even created
        assert await self._notes(runtime, me) == []

    async def test_topic_id_and_message_id_reach_the_handler(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self._echo(runtime, journal)
        await self._echo(runtime, journal, "other")
        await within(runtime.add_subscription(TypePrefixSubscription("ev", "echo")))
        await within(runtime.add_subscription(TypePrefixSubscription("ev", "other")))
        topic = TopicId("ev.created", "item-9")
        await within(runtime.publish(Note(text="new"), topic, message_id="msg-42"))
        await within(runtime.send_message(Note(text="direct"), AgentId("echo", "item-9")))
        assert await self._notes(runtime, AgentId("echo", "item-9")) == ["new!", "direct"]
        await self._notes(runtime, AgentId("other", "item-9"))
        published = sorted((n for n in journal.noted if n[1] is not None), key=lambda n: str(n[0]))
        assert [(str(a), t, m, b) for a, t, m, b in published] == [
            ("echo/item-9", topic, "msg-42", True),
            ("other/item-9", topic, "msg-42", True),
        ]
        direct = [n for n in journal.noted if n[1] is None]
        assert [(str(a), b) for a, _, _, b in direct] == [("echo/item-9", False)]

    async def test_publish_with_no_subscriber_is_a_no_op(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self._echo(runtime, journal)
        await within(runtime.publish(Note(text="void"), TopicId("nobody.listens", "k")))
        assert await within(runtime.list_agents()) == []
        assert journal.created == []

    async def test_add_list_and_remove_subscriptions(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self._echo(runtime, journal)
        exact = TypeSubscription("t", "echo")
        prefix = TypePrefixSubscription("t.", "echo")
        twin = TypeSubscription("t", "echo")  # equal to `exact` under another id: one entry, held by both ids
        assert await within(runtime.list_subscriptions()) == []
        await within(runtime.add_subscription(exact))
        await within(runtime.add_subscription(prefix))
        await within(runtime.add_subscription(twin))
        await within(runtime.add_subscription(exact))  # the same id again: nothing changes
        listed = await within(runtime.list_subscriptions())
        assert len(listed) == 2 and set(listed) == {exact, prefix}
        assert {s.id for s in listed} - {prefix.id} <= {exact.id, twin.id}
        # Each id holds the entry: removing one leaves it to the other, and the twin's id is known.
        await within(runtime.remove_subscription(exact.id))
        assert set(await within(runtime.list_subscriptions())) == {twin, prefix}
        await within(runtime.publish(Note(text="held"), TopicId("t", "r")))
        await within(runtime.remove_subscription(twin.id))
        assert await within(runtime.list_subscriptions()) == [prefix]
        with pytest.raises(LookupError, match=twin.id):
            await within(runtime.remove_subscription(twin.id))
        await within(runtime.publish(Note(text="gone"), TopicId("t", "r")))
        await within(runtime.publish(Note(text="kept"), TopicId("t.x", "r")))
        assert await self._notes(runtime, AgentId("echo", "r")) == ["held!", "kept!"]

    async def test_a_topic_source_that_cannot_be_an_agent_key_is_refused_naming_it(self) -> None:
        for source in ("", "line\nbreak", "\x00"):
            with pytest.raises(ValueError, match=r"TopicId\.source"):
                TopicId("news", source)

    async def test_removing_an_unknown_subscription_names_it(self, runtime: AgentRuntime) -> None:
        with pytest.raises(LookupError, match="no-such-subscription"):
            await within(runtime.remove_subscription("no-such-subscription"))

    async def test_a_subscription_added_through_one_member_serves_a_publish_through_another(
        self, runtime: AgentRuntime, peer: AgentRuntime, journal: Journal
    ) -> None:
        await self._echo(runtime, journal)
        subscription = TypeSubscription("orders", "echo")
        await within(runtime.add_subscription(subscription))
        assert subscription in await within(peer.list_subscriptions())
        await within(peer.publish(Note(text="o1"), TopicId("orders", "shop")))
        assert await self._notes(peer, AgentId("echo", "shop")) == ["o1!"]
        await within(peer.remove_subscription(subscription.id))
        assert await within(runtime.list_subscriptions()) == []

    async def test_broadcast_still_reaches_active_agents_only_without_a_topic(
        self, runtime: AgentRuntime, journal: Journal
    ) -> None:
        await self._echo(runtime, journal)
        await within(runtime.add_subscription(TypeSubscription("echo", "echo")))
        await within(runtime.send_and_await_response(Ping(text="wake"), AgentId("echo", "awake")))
        await within(runtime.broadcast(Note(text="all"), "echo"))
        assert await self._notes(runtime, AgentId("echo", "awake")) == ["all!"]
        assert await self._notes(runtime, AgentId("echo", "asleep")) == []
        assert [(str(a), t, b) for a, t, _, b in journal.noted] == [("echo/awake", None, True)]

    async def test_bad_topic_arguments_fail_before_sending(self, runtime: AgentRuntime, journal: Journal) -> None:
        await self._echo(runtime, journal)
        bad_topic: Any = "news/k"
        with pytest.raises(TypeError, match="topic_id"):
            await runtime.publish(Note(text="x"), bad_topic)
        bad_subscription: Any = ("news", "echo")
        with pytest.raises(TypeError, match="subscription"):
            await runtime.add_subscription(bad_subscription)
        with pytest.raises(TypeError, match="sender"):
            await runtime.publish(Note(text="x"), TopicId("news", "k"), sender="echo/k")  # type: ignore[arg-type]
        assert journal.created == []
