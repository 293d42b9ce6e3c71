"""`A2AAgentTool`: a remote A2A agent as an ext tool, over the `a2a-sdk` client."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx
from google.protobuf import json_format
from pydantic import BaseModel, ConfigDict, Field

from a2a.client import A2AClientError, A2AClientTimeoutError, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import A2AError
from ext.core import (
    CancellationToken,
    CancelScope,
    ClientClosedError,
    ConfigurationError,
    SchemaTool,
    ToolArgumentsError,
    ToolSchema,
    check_tool_name,
)

from ._card import check_card, fetch_card
from ._errors import (
    A2ARefusedError,
    A2AResponseError,
    A2ATaskFailedError,
    A2ATimeoutError,
    A2AToolError,
    A2AUnreachableError,
)
from ._events import A2AReply, Follow, state_name

logger = logging.getLogger(__name__)

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


class A2AAgentToolConfig(BaseModel):
    """The configuration of an `A2AAgentTool` (what `dump_component()` writes)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="Base URL of the agent; its card is read from `<url>/.well-known/agent-card.json`.")
    name: str = Field(description="The tool's name as the model sees it: 1 to 64 letters, digits, '_' or '-'.")
    description: str = Field(description="What the agent does, for the model.")
    expected_name: str | None = Field(default=None, description="Refuse an agent whose card has another name.")
    required_skills: list[str] = Field(
        default_factory=list, description="Skill ids (or names) the agent's card must list."
    )
    streaming: bool = Field(default=True, description="Stream the answer (the card must say it streams).")
    timeout: float = Field(default=60.0, gt=0, description="Seconds a whole call may take, > 0.")
    idle_timeout: float = Field(
        default=30.0, gt=0, description="Seconds the agent may stay silent (a connect, a read, a streamed event)."
    )
    cancel_timeout: float = Field(
        default=5.0, gt=0, description="Seconds spent asking the agent to cancel its task after a cancel or timeout."
    )
    poll_interval: float = Field(
        default=0.5, gt=0, description="Seconds between reads of a task that is not finished and not streamed."
    )


def tool_name_from(card_name: str) -> str:
    """A tool name made from a card's free-form name: runs of other characters become '_'."""
    name = _NAME_CHARS.sub("_", card_name).strip("_")[:64]
    return name or "a2a_agent"


class A2AAgentTool(SchemaTool[A2AAgentToolConfig]):
    """Send a message to a remote A2A agent and return its answer.

    The agent's card is fetched and checked on first use (`expected_name`, `required_skills`, a transport the tool
    speaks, streaming when `streaming=True`); a mismatch raises `A2ACardMismatchError` before any message. A call
    follows the remote task to its end: streamed, or read again every `poll_interval` when the agent does not
    stream. `timeout` bounds the whole call and `idle_timeout` every wait on the agent; on either, or on a
    `CancellationToken`, the remote task is cancelled (within `cancel_timeout`) before the error is raised.

    The model sees one argument, `message` (text). `send()` gives the whole `A2AReply` and continues a
    conversation (`context_id`, `task_id`); `stream()` yields the answer's text as it arrives.
    """

    component_config_schema = A2AAgentToolConfig
    component_provider_override = "ext.tools.a2a.A2AAgentTool"

    def __init__(
        self,
        url: str,
        name: str,
        description: str,
        *,
        expected_name: str | None = None,
        required_skills: Sequence[str] = (),
        streaming: bool = True,
        timeout: float = 60.0,
        idle_timeout: float = 30.0,
        cancel_timeout: float = 5.0,
        poll_interval: float = 0.5,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"url must be an http:// or https:// URL, got {url!r}")
        if not isinstance(description, str):
            raise ConfigurationError(f"description must be a string, got {type(description).__name__}")
        self._name = check_tool_name(name)
        self._description = description
        self._config = A2AAgentToolConfig(
            url=url.rstrip("/"),
            name=name,
            description=description,
            expected_name=expected_name,
            required_skills=list(required_skills),
            streaming=streaming,
            timeout=timeout,
            idle_timeout=idle_timeout,
            cancel_timeout=cancel_timeout,
            poll_interval=poll_interval,
        )
        self._schema: ToolSchema = {
            "name": self._name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string", "description": "The message to send to the agent."}},
                "required": ["message"],
                "additionalProperties": False,
            },
        }
        self._http: httpx.AsyncClient | None = None
        self._card: AgentCard | None = None
        self._client: Client | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def from_url(
        cls,
        url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Any,
    ) -> A2AAgentTool:
        """A tool for the agent at `url`, named and described from its card (checked now, with `options`)."""
        probe = cls(url, "a2a_agent", "", **options)
        try:
            card = await probe.card()
        except BaseException:
            await probe.close()
            raise
        tool = cls(
            url,
            name if name is not None else tool_name_from(card.name),
            description if description is not None else (card.description or f"The A2A agent {card.name}."),
            **options,
        )
        # The probe's connection and checked card carry over: the first call does not fetch the card again.
        tool._http, tool._card, tool._client = probe._http, probe._card, probe._client
        return tool

    @classmethod
    def _from_config(cls, config: A2AAgentToolConfig) -> A2AAgentTool:
        return cls(**config.model_dump())

    def _to_config(self) -> A2AAgentToolConfig:
        return self._config.model_copy()

    @property
    def url(self) -> str:
        return self._config.url

    async def card(self) -> AgentCard:
        """The agent's card, fetched and checked once."""
        await self._ready()
        assert self._card is not None
        return self._card

    async def _ready(self) -> Client:
        if self._closed:
            raise ClientClosedError(f"A2AAgentTool {self._name!r} is closed")
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                cfg = self._config
                if self._http is None:
                    self._http = httpx.AsyncClient(
                        timeout=httpx.Timeout(cfg.idle_timeout), follow_redirects=False, trust_env=False
                    )
                card = await asyncio.wait_for(fetch_card(self._http, cfg.url), cfg.idle_timeout)
                bindings = check_card(
                    card,
                    url=cfg.url,
                    expected_name=cfg.expected_name,
                    required_skills=cfg.required_skills,
                    streaming=cfg.streaming,
                )
                factory = ClientFactory(
                    ClientConfig(streaming=cfg.streaming, httpx_client=self._http, supported_protocol_bindings=bindings)
                )
                self._card, self._client = card, factory.create(card)
            return self._client

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> Any:
        """Send `args["message"]`; returns the agent's answer as text."""
        self._check_args_object(args)
        extra = sorted(set(args) - {"message"})
        if extra:
            raise ToolArgumentsError(f"tool {self._name!r} takes only 'message', got {extra[0]!r}")
        message = args.get("message")
        if not isinstance(message, str):
            raise ToolArgumentsError(f"tool {self._name!r}: 'message' must be a string, got {type(message).__name__}")
        reply = await self.send(message, cancellation_token=cancellation_token)
        return reply.text

    async def send(
        self,
        text: str,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> A2AReply:
        """Send `text` and follow the task to its end (or to `input-required`); the whole reply."""
        follow = Follow()
        async for _ in self._run(text, follow, context_id, task_id, cancellation_token):
            pass
        return follow.reply()

    async def stream(
        self,
        text: str,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncIterator[str]:
        """Send `text`; yield the answer's text as the agent streams it."""
        async for delta in self._run(text, Follow(), context_id, task_id, cancellation_token):
            yield delta

    async def _run(
        self,
        text: str,
        follow: Follow,
        context_id: str | None,
        task_id: str | None,
        token: CancellationToken | None,
    ) -> AsyncIterator[str]:
        if not isinstance(text, str):
            raise ToolArgumentsError(f"the message must be a string, got {type(text).__name__}")
        cfg = self._config
        loop = asyncio.get_running_loop()
        deadline = loop.time() + cfg.timeout
        client: Client | None = None
        try:
            with CancelScope(token):
                client = await self._bounded(self._ready(), deadline)
                request = SendMessageRequest(
                    message=Message(
                        message_id=uuid.uuid4().hex,
                        role=Role.ROLE_USER,
                        parts=[Part(text=text)],
                        context_id=context_id or "",
                        task_id=task_id or "",
                    )
                )
                events = client.send_message(request)
                try:
                    while not follow.done:
                        try:
                            event: StreamResponse = await self._bounded(anext(events), deadline)
                        except StopAsyncIteration:
                            break
                        delta = follow.apply(event)
                        if delta:
                            yield delta
                finally:
                    # Closing the SDK's generator closes the HTTP stream at once, not at garbage collection.
                    aclose = getattr(events, "aclose", None)
                    if aclose is not None:
                        await aclose()
                while not follow.done:
                    if not follow.task_id:
                        raise A2ARefusedError(f"the agent at {cfg.url} ended its answer without a task or message")
                    await self._bounded(asyncio.sleep(cfg.poll_interval), deadline)
                    task = await self._bounded(client.get_task(GetTaskRequest(id=follow.task_id)), deadline)
                    before = follow.artifacts.copy()
                    follow.task(task)
                    for key, value in follow.artifacts.items():
                        old = before.get(key, "")
                        if value.startswith(old) and len(value) > len(old):
                            yield value[len(old) :]
        except (asyncio.CancelledError, A2ATimeoutError):
            if client is not None and follow.task_id and not follow.done:
                await self._cancel_remote(client, follow.task_id)
            raise
        except A2AToolError:
            raise
        except (A2AError, httpx.HTTPError) as exc:
            raise _map_error(exc, cfg.url) from exc
        except json_format.Error as exc:
            raise A2AResponseError(f"the agent at {cfg.url} sent an answer that is not valid A2A: {exc}") from exc
        _raise_for_state(follow, cfg.url)

    async def _bounded(self, awaitable: Any, deadline: float) -> Any:
        remaining = deadline - asyncio.get_running_loop().time()
        wait = min(remaining, self._config.idle_timeout)
        try:
            return await asyncio.wait_for(awaitable, max(wait, 0.0))
        except (asyncio.TimeoutError, A2AClientTimeoutError, httpx.TimeoutException) as exc:
            which = "timeout" if remaining <= self._config.idle_timeout else "idle_timeout"
            raise A2ATimeoutError(
                f"the agent at {self._config.url} did not answer within {which}={getattr(self._config, which)} s"
            ) from exc

    async def _cancel_remote(self, client: Client, task_id: str) -> None:
        """Ask the agent to cancel `task_id`, bounded by `cancel_timeout`; a failure is logged, not raised."""
        try:
            await asyncio.wait_for(
                asyncio.shield(client.cancel_task(CancelTaskRequest(id=task_id))), self._config.cancel_timeout
            )
        except (asyncio.TimeoutError, A2AError, httpx.HTTPError) as exc:
            logger.warning("could not cancel remote task %s at %s: %s", task_id, self._config.url, exc)

    async def close(self) -> None:
        """Release the connection pool. Idempotent."""
        self._closed = True
        client, self._client = self._client, None
        http, self._http = self._http, None
        if client is not None:
            await client.close()
        if http is not None:
            await http.aclose()

    async def __aenter__(self) -> A2AAgentTool:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def _raise_for_state(follow: Follow, url: str) -> None:
    state = follow.state
    if state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED):
        name = state_name(state)
        raise A2ATaskFailedError(
            f"the agent at {url} ended task {follow.task_id} {name}: {follow.status_text[:200] or '(no message)'}",
            state=name,
            task_id=follow.task_id,
            agent_message=follow.status_text,
        )
    if state in (TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_AUTH_REQUIRED):
        raise A2ARefusedError(
            f"the agent at {url} answered {state_name(state)} for task {follow.task_id}: "
            f"{follow.status_text[:200] or '(no message)'}",
            reason=follow.status_text[:200],
        )


def _map_error(exc: BaseException, url: str) -> A2AToolError:
    cause = exc.__cause__
    if isinstance(exc, A2AClientTimeoutError) or isinstance(cause, httpx.TimeoutException):
        return A2ATimeoutError(f"the agent at {url} timed out: {exc}")
    if isinstance(exc, httpx.TransportError) or (
        isinstance(exc, A2AClientError) and isinstance(cause, httpx.TransportError)
    ):
        return A2AUnreachableError(f"could not reach the agent at {url}: {exc}")
    reason = str(exc)[:200]
    return A2ARefusedError(f"the agent at {url} refused the request ({type(exc).__name__}): {reason}", reason=reason)
