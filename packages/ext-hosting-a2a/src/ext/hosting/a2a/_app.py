"""`a2a_app`: an ext agent as an A2A server (a Starlette app: the agent card, JSON-RPC and HTTP+JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from ext.core import ConfigurationError, InMemoryStateStore, StateStore

from ._executor import ResponderExecutor
from ._responders import ChatAgentResponder, Responder
from ._task_store import StateStoreEventStream, StateStoreTaskStore

JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
REST_PREFIX = "/rest"


def agent_card(
    *,
    name: str,
    description: str,
    url: str,
    tools: Sequence[Any] = (),
    transports: Sequence[str] = (JSONRPC, HTTP_JSON),
    version: str = "1.0.0",
) -> AgentCard:
    """The card: one skill for the conversation plus one per tool (its name and description)."""
    base = url.rstrip("/")
    where = {JSONRPC: base + "/", HTTP_JSON: base + REST_PREFIX}
    skills = [AgentSkill(id="chat", name=name, description=description or name, tags=["chat"])]
    for tool in tools:
        tool_name = getattr(tool, "name", None)
        if isinstance(tool_name, str):
            skills.append(
                AgentSkill(id=tool_name, name=tool_name, description=getattr(tool, "description", ""), tags=["tool"])
            )
    return AgentCard(
        name=name,
        description=description or name,
        version=version,
        supported_interfaces=[
            AgentInterface(url=where[t], protocol_binding=t, protocol_version="1.0") for t in transports
        ],
        capabilities=AgentCapabilities(streaming=True),
        skills=skills,
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )


def a2a_app(
    agent: Any,
    *,
    url: str,
    name: str | None = None,
    description: str | None = None,
    store: StateStore | None = None,
    transports: Sequence[str] = (JSONRPC, HTTP_JSON),
    poll_interval: float = 0.1,
    v0_3_compat: bool = True,
) -> Starlette:
    """Serve `agent` (a `Responder`, or a `ChatAgent`) at `url` (the address clients reach, written in the card).

    Tasks are kept in `store` (an ext `StateStore`; in memory when None): every process serving the same agent on
    the same store (a file store, Redis) reads, follows and cancels the same tasks, and they survive restarts.
    With `v0_3_compat` (the default) the endpoints also answer A2A 0.3 clients (`message/send`, `tasks/get`...)."""
    for t in transports:
        if t not in (JSONRPC, HTTP_JSON):
            raise ConfigurationError(f"transports: {t!r} is not served here; use {JSONRPC!r} and/or {HTTP_JSON!r}")
    if not transports:
        raise ConfigurationError("transports must name at least one transport")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"url must be an http:// or https:// URL, got {url!r}")
    responder: Responder = agent if isinstance(agent, Responder) else ChatAgentResponder(agent)
    tools: Sequence[Any] = getattr(agent, "tools", ())
    card_name = name or getattr(agent, "name", None)
    if not isinstance(card_name, str) or not card_name:
        raise ConfigurationError("name is required for an agent that has none")
    card = agent_card(
        name=card_name,
        description=description if description is not None else str(getattr(agent, "description", "") or ""),
        url=url,
        tools=tools if isinstance(tools, Sequence) else (),
        transports=transports,
    )
    shared = store if store is not None else InMemoryStateStore()
    tasks = StateStoreTaskStore(shared)
    handler = DefaultRequestHandler(
        agent_executor=ResponderExecutor(responder, cancelled=tasks.is_cancelled, poll_interval=poll_interval),
        task_store=tasks,
        agent_card=card,
        event_stream=StateStoreEventStream(shared, poll_interval=poll_interval),
    )
    routes: list[Any] = [*create_agent_card_routes(card)]
    if JSONRPC in transports:
        routes += create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=v0_3_compat)
    if HTTP_JSON in transports:
        routes += create_rest_routes(handler, path_prefix=REST_PREFIX, enable_v0_3_compat=v0_3_compat)
    return Starlette(routes=routes)
