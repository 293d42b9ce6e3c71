"""Publish and subscribe between AutoGen 0.7 workers and ext workers (real processes) on one ext gateway: AutoGen's
CloudEvents (its attributes for the sender, the payload's type and content type) reach ext's subscribers, ext's
publishes reach AutoGen's, each subscriber once, JSON and protobuf payloads alike. AutoGen to AutoGen also runs on
AutoGen's own host (`hub="autogen"`), the reference."""

from __future__ import annotations

from typing import Any

from autogen_support import Peer, PeerFactory

from ext.runtime.grpc import Gateway


async def publish(peer: Peer, topic: tuple[str, str], text: str, **extra: Any) -> None:
    reply = await peer.reply(peer.command(op="publish", topic=list(topic), text=text, **extra))
    assert reply["ok"] is True, reply


async def notes(peer: Peer, count: int) -> list[tuple[str, str, list[str] | None, str | None, str]]:
    """The next `count` notes `peer`'s agents print: (agent, text, topic, sender, kind)."""
    found = []
    for _ in range(count):
        n = await peer.wait_event("note")
        found.append((n["agent"], n["text"], n["topic"], n["sender"], n["kind"]))
    return found


async def test_autogen_publish_reaches_autogen_subscribers(hub: str, peers: dict[str, PeerFactory]) -> None:
    subscriber = await peers["autogen"](hub, "--host-type", "ag_sub", "--subscribe", "news")
    publisher = await peers["autogen"](hub, "--host-type", "ag_pub")
    await publish(publisher, ("news", "s1"), "first", sender=["ag_pub", "p"])
    await publish(publisher, ("news", "s2"), "second")
    assert await notes(subscriber, 2) == [
        ("ag_sub/s1", "first", ["news", "s1"], "ag_pub/p", "note"),
        # Published from outside any agent: AutoGen's worker names the sender unknown/unknown, and so does its
        # host's route; through ext's gateway too (ext keeps it as the event's attributes).
        ("ag_sub/s2", "second", ["news", "s2"], "unknown/unknown", "note"),
    ]


async def test_autogen_publish_reaches_ext_subscribers(gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    ext_subscriber = await peers["ext"](gateway.address, "--host-type", "ext_sub", "--subscribe", "news")
    publisher = await peers["autogen"](f"127.0.0.1:{gateway.autogen_port}", "--host-type", "ag_pub")
    await publish(publisher, ("news", "s1"), "from autogen", sender=["ag_pub", "p"])
    await publish(publisher, ("news", "s2"), "no sender")
    assert await notes(ext_subscriber, 2) == [
        ("ext_sub/s1", "from autogen", ["news", "s1"], "ag_pub/p", "note"),
        # AutoGen's unknown/unknown (no sending agent) is no sender to ext.
        ("ext_sub/s2", "no sender", ["news", "s2"], None, "note"),
    ]


async def test_ext_publish_reaches_autogen_and_ext_subscribers_once(
    gateway: Gateway, peers: dict[str, PeerFactory]
) -> None:
    # One AutoGen worker hosting two subscribed types: the gateway resolves two recipients on it, and the worker
    # must get the event once (it finds its recipients itself), so each of its agents handles it once.
    autogen_subscriber = await peers["autogen"](
        f"127.0.0.1:{gateway.autogen_port}", "--host-type", "ag_a", "--host-type", "ag_b", "--subscribe", "news"
    )
    ext_subscriber = await peers["ext"](gateway.address, "--host-type", "ext_sub", "--subscribe", "news")
    publisher = await peers["ext"](gateway.address, "--host-type", "ext_pub")
    await publish(publisher, ("news", "s1"), "one", sender=["ext_pub", "p"])
    await publish(publisher, ("news", "s1"), "two")
    got = await notes(autogen_subscriber, 4)
    assert sorted(got) == [
        ("ag_a/s1", "one", ["news", "s1"], "ext_pub/p", "note"),
        ("ag_a/s1", "two", ["news", "s1"], None, "note"),
        ("ag_b/s1", "one", ["news", "s1"], "ext_pub/p", "note"),
        ("ag_b/s1", "two", ["news", "s1"], None, "note"),
    ]
    assert await notes(ext_subscriber, 2) == [
        ("ext_sub/s1", "one", ["news", "s1"], "ext_pub/p", "note"),
        ("ext_sub/s1", "two", ["news", "s1"], None, "note"),
    ]
    # Nothing twice: the next note each prints is a new publish's.
    await publish(publisher, ("news", "s1"), "marker")
    assert {n[1] for n in await notes(autogen_subscriber, 2)} == {"marker"}
    assert [n[1] for n in await notes(ext_subscriber, 1)] == ["marker"]


async def test_protobuf_payloads_pass_both_ways(gateway: Gateway, peers: dict[str, PeerFactory]) -> None:
    autogen_address = f"127.0.0.1:{gateway.autogen_port}"
    autogen_subscriber = await peers["autogen"](autogen_address, "--host-type", "ag_sub", "--subscribe", "wire")
    ext_subscriber = await peers["ext"](gateway.address, "--host-type", "ext_sub", "--subscribe", "wire")
    # AutoGen's protobuf payload format: the CloudEvent's proto_data holds a google.protobuf.Any.
    autogen_publisher = await peers["autogen"](autogen_address, "--host-type", "ag_pub", "--protobuf")
    await publish(autogen_publisher, ("wire", "s"), "from autogen", proto=True, sender=["ag_pub", "p"])
    assert await notes(ext_subscriber, 1) == [("ext_sub/s", "from autogen", ["wire", "s"], "ag_pub/p", "proto")]
    assert await notes(autogen_subscriber, 1) == [("ag_sub/s", "from autogen", ["wire", "s"], "ag_pub/p", "proto")]
    ext_publisher = await peers["ext"](gateway.address, "--host-type", "ext_pub")
    await publish(ext_publisher, ("wire", "t"), "from ext", proto=True)
    assert await notes(autogen_subscriber, 1) == [("ag_sub/t", "from ext", ["wire", "t"], None, "proto")]
    assert await notes(ext_subscriber, 1) == [("ext_sub/t", "from ext", ["wire", "t"], None, "proto")]
