"""The chat pipeline: middleware around any `ChatCompletionClient`, assembled by `ChatClientBuilder`.

A middleware wraps up to five hooks; each gets the call and `next`, the rest of the pipeline:

- `create(call, next)`: one model call (`await next(call)` passes it on);
- `create_stream(call, next)`: one streamed model call (returns an async iterator; `next(call)` passes it on);
- `call_tool(invocation, next)`: one tool call made by a tool loop placed *before* this middleware;
- `run_tool_loop(call, next)` / `run_tool_loop_stream(call, next)`: a whole tool loop placed *before* this
  middleware (every model turn and tool call of one user call happens inside it).

Order: the first middleware added is the outermost. A call goes through the middlewares in the order they were
added, then reaches the client; the result comes back in reverse order. A tool loop splits the pipeline: the
middlewares added before `use_tool_loop` see one call per user call (whose result is the loop's final answer);
the middlewares added after it see every model turn of the loop as its own call (`call.turn` is the turn
number), every tool call through `call_tool`, and the loop as a whole through `run_tool_loop`, which is active
while the turns and tool calls run (so a tracing middleware placed after the loop can make the loop's span the
parent of one span per model call and one per tool call). Context variables set in `run_tool_loop` are seen by
the turns and by the tool calls: the calls of one turn run concurrently in tasks created inside the loop, which
copy the context. Nested `create` hooks of one turn run in the caller's task, one inside the other.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ext.core import (
    BaseChatCompletionClient,
    CancellationToken,
    ChatCompletionClient,
    ChatOptions,
    Component,
    ComponentError,
    ComponentModel,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    JsonOutput,
    LLMMessage,
    ModelInfo,
    StreamChunk,
    Tool,
    ToolChoice,
    ToolSchema,
    UsageLifecycle,
    UsageTally,
    coerce_messages,
    load_component,
)

if TYPE_CHECKING:
    from ext.core import Workbench

logger = logging.getLogger(__name__)

ChatItem = StreamChunk | CreateResult

RETRY_MAX_WAIT = "retry_max_wait"
"""The `ChatCall.context` key of the longest `Retry-After` (seconds) a retrying middleware may wait out for this
call; a longer one is raised at once (a fallback placed before it has somewhere else to go)."""


@dataclass(slots=True)
class ChatCall:
    """One model call as it travels through the pipeline: the caller's arguments plus context.

    `messages` is a list of message objects: the pipeline validates what the caller passed (dicts included) once,
    where the call enters it, so no middleware sees a dict or an invalid message. The other arguments are as given.
    A middleware that changes the call passes on a copy (`call.replace(messages=...)`), never mutates it.

    - `client`: the bare model client at the end of the pipeline (for `provider_name`, `model`, ...).
    - `turn`: the tool-loop turn (1, 2, ...) for a model call a tool loop makes; None otherwise.
    - `context`: a dict shared by every middleware for the length of one user call (the loop's turns included),
      for middlewares that want to pass something along.
    """

    messages: Sequence[LLMMessage]
    cancellation_token: CancellationToken | None = None
    tools: Sequence[Tool | ToolSchema] = ()
    tool_choice: ToolChoice = "auto"
    json_output: JsonOutput = None
    options: ChatOptions | Mapping[str, Any] | None = None
    extra_create_args: Mapping[str, Any] | None = None
    client: Any = None
    turn: int | None = None
    context: dict[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> ChatCall:
        """A copy with `changes` applied (`context` stays the same dict)."""
        return replace(self, **changes)

    def create_on(self, client: ChatCompletionClient) -> Awaitable[CreateResult]:
        """`client.create` with this call's arguments: the end of a pipeline, or a middleware sending the call to
        another client (a fallback)."""
        return client.create(
            self.messages,
            self.cancellation_token,
            tools=self.tools,
            tool_choice=self.tool_choice,
            json_output=self.json_output,
            options=self.options,
            extra_create_args=self.extra_create_args,
        )

    def stream_on(self, client: ChatCompletionClient) -> AsyncIterator[ChatItem]:
        """`client.create_stream` with this call's arguments."""
        return client.create_stream(
            self.messages,
            self.cancellation_token,
            tools=self.tools,
            tool_choice=self.tool_choice,
            json_output=self.json_output,
            options=self.options,
            extra_create_args=self.extra_create_args,
        )

    @property
    def model(self) -> str:
        """The model this call asks for: `options.model_id`, else the client's model."""
        options = self.options
        model_id = options.model_id if isinstance(options, ChatOptions) else (options or {}).get("model_id")
        if model_id:
            return str(model_id)
        return str(getattr(self.client, "model", "") or "")

    @property
    def provider(self) -> str:
        """The client's `provider_name` (its class name if it has none)."""
        return str(getattr(self.client, "provider_name", None) or type(self.client).__name__)


@dataclass(slots=True)
class ToolInvocation:
    """One tool call a tool loop makes: the model's `call`, the turn it came in, and what runs it (`tool` for a
    plain tool, `workbench` for a workbench tool; both None for a name the loop does not know)."""

    call: FunctionCall
    turn: int
    chat_call: ChatCall
    tool: Tool | None = None
    workbench: Workbench | None = None
    cancellation_token: CancellationToken | None = None


CreateNext = Callable[[ChatCall], Awaitable[CreateResult]]
StreamNext = Callable[[ChatCall], AsyncIterator[ChatItem]]
ToolNext = Callable[[ToolInvocation], Awaitable[FunctionExecutionResult]]


class NoConfig(BaseModel):
    """The config of a middleware that takes no arguments."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class ChatMiddleware(Component[BaseModel]):
    """Base class of a middleware: every hook passes through unchanged, so a subclass overrides only what it
    wraps. A hook that is not overridden costs nothing at call time (the pipeline leaves it out).

    A middleware is a component: one built without arguments dumps as an empty config as it is; one with
    arguments sets `component_config_schema` and keeps the config it was built from as `self._config` (see
    `Component`). Loading a dump needs the class registered under the `ext.components` entry points (or passed in
    `allow=`).

    See the module docstring for the order rules.
    """

    component_type = "middleware"
    component_config_schema: ClassVar[type[BaseModel]] = NoConfig
    retries: ClassVar[bool] = False
    """True for a middleware that retries the calls it passes on (`RetryMiddleware`): a pipeline holding one
    turns its client's own retries off, so each call has one retry owner."""

    def _to_config(self) -> BaseModel:
        return NoConfig() if self.component_config_schema is NoConfig else super()._to_config()

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        """Wrap one model call."""
        return await next(call)

    def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        """Wrap one streamed model call: return an async iterator of chunks ending with one `CreateResult`."""
        return next(call)

    async def call_tool(self, invocation: ToolInvocation, next: ToolNext) -> FunctionExecutionResult:
        """Wrap one tool call of a tool loop placed before this middleware."""
        return await next(invocation)

    async def run_tool_loop(self, call: ChatCall, next: CreateNext) -> CreateResult:
        """Wrap a whole tool loop placed before this middleware (`create`)."""
        return await next(call)

    def run_tool_loop_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        """Wrap a whole tool loop placed before this middleware (`create_stream`)."""
        return next(call)

    async def close(self) -> None:
        """Release what the middleware holds (called once by the pipeline's `close`)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def overrides(middleware: ChatMiddleware, hook: str) -> bool:
    """Whether `middleware` overrides `hook` of `ChatMiddleware` (a pass-through hook is left out of the chain)."""
    return getattr(type(middleware), hook) is not getattr(ChatMiddleware, hook)


def _chain_create(middleware: ChatMiddleware, hook: str, next: CreateNext) -> CreateNext:
    method = getattr(middleware, hook)

    def run(call: ChatCall) -> Awaitable[CreateResult]:
        return method(call, next)  # type: ignore[no-any-return]

    return run


def _chain_stream(middleware: ChatMiddleware, hook: str, next: StreamNext) -> StreamNext:
    method = getattr(middleware, hook)

    def run(call: ChatCall) -> AsyncIterator[ChatItem]:
        return method(call, next)  # type: ignore[no-any-return]

    return run


def _chain_tool(middleware: ChatMiddleware, next: ToolNext) -> ToolNext:
    method = middleware.call_tool

    def run(invocation: ToolInvocation) -> Awaitable[FunctionExecutionResult]:
        return method(invocation, next)

    return run


@dataclass(frozen=True, slots=True)
class LoopHooks:
    """What a tool loop needs from the middlewares placed after it: the chains of `create` and
    `create_stream` down to the client, `call_tool` down to the tool, and `run_tool_loop(_stream)` around the
    loop. Built by the pipeline; a tool loop receives it in `bind`."""

    create: CreateNext
    stream: StreamNext
    wrap_loop: Callable[[CreateNext], CreateNext]
    wrap_loop_stream: Callable[[StreamNext], StreamNext]
    wrap_tool: Callable[[ToolNext], ToolNext]


class ToolLoopBase(ChatMiddleware):
    """A middleware that runs a tool loop over the middlewares placed after it. The pipeline calls `bind` once
    at build time; the loop runs through the callables `bind` returns instead of `create`/`create_stream`."""

    def bind(self, hooks: LoopHooks) -> tuple[CreateNext, StreamNext]:
        raise NotImplementedError


class PipelineConfig(BaseModel):
    """Config of a built pipeline: the client and the middlewares, outermost first, as component dumps."""

    model_config = ConfigDict(defer_build=True)

    client: ComponentModel
    middleware: list[ComponentModel] = Field(default_factory=list)


class ChatPipeline(UsageLifecycle[PipelineConfig]):
    """A model client wrapped in middleware: itself a `ChatCompletionClient`. Build one with `ChatClientBuilder`.

    One retry owner: when a middleware retries (`RetryMiddleware`) and the client is a `BaseChatCompletionClient`
    (every ext provider client), the pipeline turns the client's own retries off (`client.disable_retries()`),
    so a call makes at most `policy.max_retries + 1` attempts, not that times the client's. Another client that
    retries by itself goes on doing so inside every attempt of the middleware.

    `count_tokens`, `remaining_tokens` and `capabilities` are the client's. `actual_usage()` is the usage of the
    last result this pipeline returned (a tool loop's sum over its turns) and `total_usage()` the tokens spent
    at the provider through this pipeline (a cache hit adds nothing). `close()` closes every middleware, then
    the client.
    """

    component_type = "model"
    component_config_schema = PipelineConfig
    component_provider_override = "ext.pipeline.ChatPipeline"

    def __init__(self, client: ChatCompletionClient, middleware: Sequence[ChatMiddleware] = ()) -> None:
        if not isinstance(client, ChatCompletionClient):
            raise ConfigurationError(f"client must be a ChatCompletionClient, got {type(client).__name__}")
        middleware = list(middleware)
        for index, item in enumerate(middleware):
            if not isinstance(item, ChatMiddleware):
                raise ConfigurationError(f"middleware[{index}] must be a ChatMiddleware, got {type(item).__name__}")
        if sum(isinstance(m, ToolLoopBase) for m in middleware) > 1:
            raise ConfigurationError("a pipeline takes at most one tool loop")
        if isinstance(client, BaseChatCompletionClient) and any(m.retries for m in middleware):
            client.disable_retries()
        self._client = client
        self._middleware = tuple(middleware)
        self._create, self._stream = _compose(client, self._middleware)
        self._usage = UsageTally()
        self._closed = False

    # --- the ChatCompletionClient protocol -----------------------------------------------------------

    async def create(
        self,
        messages: Sequence[LLMMessage],
        cancellation_token: CancellationToken | None = None,
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: ToolChoice = "auto",
        json_output: JsonOutput = None,
        options: ChatOptions | Mapping[str, Any] | None = None,
        extra_create_args: Mapping[str, Any] | None = None,
    ) -> CreateResult:
        """Send the call through the middleware to the client. See `ChatCompletionClient.create`."""
        messages = coerce_messages(messages)  # validated once, here: every middleware gets message objects
        call = ChatCall(
            messages, cancellation_token, tools, tool_choice, json_output, options, extra_create_args, self._client
        )
        result = await self._create(call)
        self._account(result)
        return result

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        cancellation_token: CancellationToken | None = None,
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: ToolChoice = "auto",
        json_output: JsonOutput = None,
        options: ChatOptions | Mapping[str, Any] | None = None,
        extra_create_args: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatItem]:
        """Stream through the middleware: chunks, then exactly one `CreateResult`."""
        messages = coerce_messages(messages)  # validated once, here: every middleware gets message objects
        call = ChatCall(
            messages, cancellation_token, tools, tool_choice, json_output, options, extra_create_args, self._client
        )
        stream = self._stream(call)
        try:
            async for item in stream:
                if isinstance(item, CreateResult):
                    self._account(item)
                yield item
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _account(self, result: CreateResult) -> None:
        if result.cached:
            self._usage.actual = result.usage  # nothing was spent at the provider
        else:
            self._usage.add(result.usage)

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        return self._client.count_tokens(messages, tools=tools)

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        return self._client.remaining_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> ModelInfo:
        return self._client.capabilities

    @property
    def model_info(self) -> ModelInfo:
        return self._client.capabilities

    @property
    def model(self) -> str:
        return str(getattr(self._client, "model", ""))

    @property
    def provider_name(self) -> str:
        return str(getattr(self._client, "provider_name", None) or type(self._client).__name__)

    @property
    def client(self) -> ChatCompletionClient:
        """The bare client at the end of the pipeline."""
        return self._client

    @property
    def middleware(self) -> tuple[ChatMiddleware, ...]:
        """The middlewares, outermost first."""
        return self._middleware

    async def _close(self) -> None:
        """Close every middleware (outermost first), then the client (`close()` does it once)."""
        try:
            for middleware in self._middleware:
                await middleware.close()
        finally:
            await self._client.close()

    def __repr__(self) -> str:
        names = ", ".join(repr(m) for m in self._middleware)
        return f"ChatPipeline({self._client!r}, [{names}])"

    # --- components --------------------------------------------------------------------------------

    def _to_config(self) -> PipelineConfig:
        dump = getattr(self._client, "dump_component", None)
        if dump is None:
            raise ComponentError(f"the client {type(self._client).__name__} is not a component and cannot be dumped")
        return PipelineConfig(client=dump(), middleware=[m.dump_component() for m in self._middleware])

    @classmethod
    def _from_config(cls, config: PipelineConfig) -> ChatPipeline:
        client: ChatCompletionClient = load_component(config.client)
        middleware: list[ChatMiddleware] = [load_component(m, ChatMiddleware) for m in config.middleware]
        return cls(client, middleware)


def _terminal(client: ChatCompletionClient) -> tuple[CreateNext, StreamNext]:
    def create(call: ChatCall) -> Awaitable[CreateResult]:
        return call.create_on(client)

    def stream(call: ChatCall) -> AsyncIterator[ChatItem]:
        return call.stream_on(client)

    return create, stream


def _compose(client: ChatCompletionClient, middleware: Sequence[ChatMiddleware]) -> tuple[CreateNext, StreamNext]:
    """The `create` and `create_stream` chains, built once: innermost first, pass-through hooks left out."""
    create, stream = _terminal(client)
    for index in range(len(middleware) - 1, -1, -1):
        item = middleware[index]
        if isinstance(item, ToolLoopBase):
            create, stream = item.bind(_loop_hooks(create, stream, middleware[index + 1 :]))
            continue
        if overrides(item, "create"):
            create = _chain_create(item, "create", create)
        if overrides(item, "create_stream"):
            stream = _chain_stream(item, "create_stream", stream)
    return create, stream


def _loop_hooks(create: CreateNext, stream: StreamNext, inner: Sequence[ChatMiddleware]) -> LoopHooks:
    loop_wrappers = [m for m in inner if overrides(m, "run_tool_loop")]
    loop_stream_wrappers = [m for m in inner if overrides(m, "run_tool_loop_stream")]
    tool_wrappers = [m for m in inner if overrides(m, "call_tool")]

    def wrap_loop(run: CreateNext) -> CreateNext:
        for m in reversed(loop_wrappers):
            run = _chain_create(m, "run_tool_loop", run)
        return run

    def wrap_loop_stream(run: StreamNext) -> StreamNext:
        for m in reversed(loop_stream_wrappers):
            run = _chain_stream(m, "run_tool_loop_stream", run)
        return run

    def wrap_tool(run: ToolNext) -> ToolNext:
        for m in reversed(tool_wrappers):
            run = _chain_tool(m, run)
        return run

    return LoopHooks(create, stream, wrap_loop, wrap_loop_stream, wrap_tool)
