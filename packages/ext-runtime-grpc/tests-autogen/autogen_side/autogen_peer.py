"""A real AutoGen 0.7 worker (`GrpcWorkerAgentRuntime`), driven by the tests over stdin/stdout, one JSON object a
line. Runs with the `autogen` hatch environment's python (autogen-ext[grpc] 0.7.5), never with ext installed.

Usage: python autogen_peer.py HOST:PORT [--host-type TYPE]... [--subscribe TOPIC_TYPE]... [--protobuf]

It hosts an `Echo` agent under each `--host-type` (Ping -> Pong, Boom raises, Slow never answers), subscribes that
type to each `--subscribe` topic type, prints {"event": "ready"}, then serves commands (`--protobuf`: publishes use
AutoGen's protobuf payload format, for StringValue messages):
  {"op": "call", "id": N, "target": [TYPE, KEY], "message": "Ping"|"Boom"|"Slow", "text": S, "wait": SECONDS}
      -> {"id": N, "ok": true, "result": {...}} or {"id": N, "ok": false, "error_type": ..., "error": ...};
         "error_type": "TimeoutError" when no answer came within "wait" (AutoGen's RPCs have no deadline).
  {"op": "publish", "id": N, "topic": [TYPE, SOURCE], "text": S, "sender": [TYPE, KEY] (optional),
   "proto": true (optional: a google.protobuf.StringValue instead of a Note)} -> {"id": N, "ok": true}
  {"op": "rpc_burst", "id": N, "target": [TYPE, KEY], "n": COUNT}
      -> {"id": N, "ok": true, "latencies": [seconds, ...]}: COUNT sequential Ping RPCs, each timed (the bench)
  {"op": "expect_notes", "id": N, "n": COUNT} -> {"id": N, "ok": true}: from now on this worker's agents count
      Notes instead of printing each, and print {"event": "notes_done"} at the COUNT-th (the bench)
  {"op": "publish_burst", "id": N, "topic": [TYPE, SOURCE], "n": COUNT} -> {"id": N, "ok": true} once all COUNT
      Notes are handed to the runtime
  {"op": "exit"}
Events: {"event": "slow_started", "agent": ...}, {"event": "note", "agent": ..., "text": ..., "topic": [...],
"sender": ..., "kind": "note"|"proto"} for each published Note (or StringValue) an agent receives.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from autogen_core import (
    JSON_DATA_CONTENT_TYPE,
    PROTOBUF_DATA_CONTENT_TYPE,
    AgentId,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    message_handler,
    try_get_known_serializers_for_type,
)
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime
from google.protobuf.wrappers_pb2 import StringValue


@dataclass
class Ping:
    text: str


@dataclass
class Pong:
    text: str
    by: str


@dataclass
class Boom:
    text: str


@dataclass
class Slow:
    text: str


@dataclass
class Note:
    text: str


MESSAGES: dict[str, type[Any]] = {"Ping": Ping, "Boom": Boom, "Slow": Slow, "Note": Note}


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class NoteCounter:
    """Counts Notes for the bench instead of printing each (shared by the agents of one worker)."""

    def __init__(self) -> None:
        self.expected = 0
        self.seen = 0

    def count(self) -> bool:
        """True when counting (the Note is counted and not printed)."""
        if not self.expected:
            return False
        self.seen += 1
        if self.seen == self.expected:
            self.expected = 0
            emit({"event": "notes_done"})
        return True


class Echo(RoutedAgent):
    def __init__(self, counter: NoteCounter) -> None:
        super().__init__("echoes pings")
        self._counter = counter

    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> Pong:
        return Pong(text=message.text, by=str(self.id))

    @message_handler
    async def on_boom(self, message: Boom, ctx: MessageContext) -> Pong:
        raise ValueError(f"boom: {message.text}")

    @message_handler
    async def on_slow(self, message: Slow, ctx: MessageContext) -> Pong:
        emit({"event": "slow_started", "agent": str(self.id)})
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    @message_handler
    async def on_note(self, message: Note, ctx: MessageContext) -> None:
        if self._counter.count():
            return
        topic = [ctx.topic_id.type, ctx.topic_id.source] if ctx.topic_id is not None else None
        sender = str(ctx.sender) if ctx.sender is not None else None
        emit(
            {
                "event": "note",
                "agent": str(self.id),
                "text": message.text,
                "topic": topic,
                "sender": sender,
                "kind": "note",
            }
        )

    @message_handler
    async def on_string(self, message: StringValue, ctx: MessageContext) -> None:
        topic = [ctx.topic_id.type, ctx.topic_id.source] if ctx.topic_id is not None else None
        sender = str(ctx.sender) if ctx.sender is not None else None
        emit(
            {
                "event": "note",
                "agent": str(self.id),
                "text": message.value,
                "topic": topic,
                "sender": sender,
                "kind": "proto",
            }
        )


async def run_op(runtime: GrpcWorkerAgentRuntime, op: dict[str, Any], counter: NoteCounter) -> None:
    reply: dict[str, Any] = {"id": op.get("id")}
    try:
        if op["op"] == "call":
            message = MESSAGES[op["message"]](text=op["text"])
            target = AgentId(op["target"][0], op["target"][1])
            result = await asyncio.wait_for(runtime.send_message(message, target), op.get("wait", 10))
            is_instance = dataclasses.is_dataclass(result) and not isinstance(result, type)
            reply.update(ok=True, result=dataclasses.asdict(result) if is_instance else repr(result))
        elif op["op"] == "publish":
            sender = AgentId(op["sender"][0], op["sender"][1]) if op.get("sender") else None
            payload: Any = StringValue(value=op["text"]) if op.get("proto") else Note(text=op["text"])
            await runtime.publish_message(payload, TopicId(op["topic"][0], op["topic"][1]), sender=sender)
            reply.update(ok=True)
        elif op["op"] == "rpc_burst":
            target = AgentId(op["target"][0], op["target"][1])
            latencies = []
            for i in range(op["n"]):
                started = time.perf_counter()
                await runtime.send_message(Ping(text=str(i)), target)
                latencies.append(time.perf_counter() - started)
            reply.update(ok=True, latencies=latencies)
        elif op["op"] == "expect_notes":
            counter.expected, counter.seen = op["n"], 0
            reply.update(ok=True)
        elif op["op"] == "publish_burst":
            topic = TopicId(op["topic"][0], op["topic"][1])
            for i in range(op["n"]):
                await runtime.publish_message(Note(text=str(i)), topic)
            reply.update(ok=True)
    except asyncio.TimeoutError:
        reply.update(ok=False, error_type="TimeoutError", error="no answer")
    except Exception as exc:
        reply.update(ok=False, error_type=type(exc).__name__, error=str(exc))
    emit(reply)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--host-type", action="append", default=[])
    parser.add_argument("--subscribe", action="append", default=[])
    parser.add_argument("--protobuf", action="store_true")
    args = parser.parse_args()
    payload_format = PROTOBUF_DATA_CONTENT_TYPE if args.protobuf else JSON_DATA_CONTENT_TYPE
    runtime = GrpcWorkerAgentRuntime(host_address=args.address, payload_serialization_format=payload_format)
    for cls in (Ping, Pong, Boom, Slow, Note, StringValue):
        runtime.add_message_serializer(try_get_known_serializers_for_type(cls))
    await runtime.start()
    counter = NoteCounter()
    for agent_type in args.host_type:
        await Echo.register(runtime, agent_type, lambda: Echo(counter))
        for topic_type in args.subscribe:
            await runtime.add_subscription(TypeSubscription(topic_type=topic_type, agent_type=agent_type))
    emit({"event": "ready"})
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        op = json.loads(line)
        if op["op"] == "exit":
            break
        task = asyncio.create_task(run_op(runtime, op, counter))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in tasks:
        task.cancel()
    await runtime.stop()


if __name__ == "__main__":
    asyncio.run(main())
