"""A real ext worker process (`GrpcAgentRuntime`), driven like `autogen_side/autogen_peer.py` (same commands and
events, one JSON object a line), so a test drives either kind of worker the same way.

Usage: python ext_peer.py HOST:PORT [--host-type TYPE]... [--subscribe TOPIC_TYPE]...

The message types are pydantic models registered under AutoGen's type names ("Ping", "Pong", ...: AutoGen names a
dataclass by its class name), which is how an ext agent reads AutoGen's JSON payloads and AutoGen reads ext's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from google.protobuf.wrappers_pb2 import StringValue
from pydantic import BaseModel

from ext.core import AgentId, MessageContext, RoutedAgent, TopicId, TypeSubscription, message_handler
from ext.runtime.grpc import GrpcAgentRuntime


class Ping(BaseModel):
    text: str


class Pong(BaseModel):
    text: str
    by: str


class Boom(BaseModel):
    text: str


class Slow(BaseModel):
    text: str


class Note(BaseModel):
    text: str


MESSAGES: dict[str, type[BaseModel]] = {"Ping": Ping, "Boom": Boom, "Slow": Slow, "Note": Note}


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Echo(RoutedAgent):
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
        sender = str(ctx.sender) if ctx.sender is not None else None
        topic = [ctx.topic_id.type, ctx.topic_id.source] if ctx.topic_id is not None else None
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
        sender = str(ctx.sender) if ctx.sender is not None else None
        topic = [ctx.topic_id.type, ctx.topic_id.source] if ctx.topic_id is not None else None
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


async def run_op(runtime: GrpcAgentRuntime, op: dict[str, Any]) -> None:
    reply: dict[str, Any] = {"id": op.get("id")}
    try:
        if op["op"] == "call":
            message = MESSAGES[op["message"]](text=op["text"])
            target = AgentId(op["target"][0], op["target"][1])
            result = await runtime.send_and_await_response(message, target, timeout=float(op.get("wait", 10)))
            reply.update(ok=True, result=result.model_dump() if isinstance(result, BaseModel) else repr(result))
        elif op["op"] == "send":
            message = MESSAGES[op["message"]](text=op["text"])
            await runtime.send_message(message, AgentId(op["target"][0], op["target"][1]))
            reply.update(ok=True)
        elif op["op"] == "publish":
            sender = AgentId(op["sender"][0], op["sender"][1]) if op.get("sender") else None
            payload: Any = StringValue(value=op["text"]) if op.get("proto") else Note(text=op["text"])
            await runtime.publish(payload, TopicId(op["topic"][0], op["topic"][1]), sender=sender)
            reply.update(ok=True)
    except Exception as exc:
        reply.update(ok=False, error_type=type(exc).__name__, error=str(exc))
    emit(reply)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--host-type", action="append", default=[])
    parser.add_argument("--subscribe", action="append", default=[])
    args = parser.parse_args()
    runtime = GrpcAgentRuntime(args.address, token_env=None, connect_timeout=10)
    types: dict[str, type[BaseModel]] = {**MESSAGES, "Pong": Pong}
    for name, cls in types.items():
        runtime.register_message_type(cls, type_name=name)
    tasks: set[asyncio.Task[None]] = set()
    async with runtime:
        for agent_type in args.host_type:
            await runtime.register_agent_factory(agent_type, Echo)
            for topic_type in args.subscribe:
                await runtime.add_subscription(TypeSubscription(topic_type, agent_type))
        emit({"event": "ready"})
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            op = json.loads(line)
            if op["op"] == "exit":
                break
            task = asyncio.create_task(run_op(runtime, op))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        for task in tasks:
            task.cancel()


if __name__ == "__main__":
    asyncio.run(main())
