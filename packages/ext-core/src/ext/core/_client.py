"""The `ChatCompletionClient` protocol and `BaseChatCompletionClient`, which holds the logic every
provider shares: argument validation before any network call, options merging, capability checks,
retries, cancellation, JSON/structured output parsing, usage accounting and token budgeting.
A provider implements `_create`, `_stream`, and optionally `count_tokens`, `_check_request`, `_close`.
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, NoReturn, Protocol, Union, runtime_checkable

from pydantic import BaseModel, TypeAdapter, ValidationError

from ._cancellation import CancellationToken, CancelScope
from ._component import ConfigT, validate_config
from ._errors import ClientClosedError, ConfigurationError, ExtError, UnsupportedOptionError
from ._image import Image
from ._lifecycle import ClientLifecycle
from ._mapping import check_tool_name, estimate_tokens, normalize_parameters, parse_json_output
from ._messages import (
    LLM_MESSAGE_TYPES,
    CreateResult,
    LLMMessage,
    RequestUsage,
    StreamChunk,
    UsageTally,
    UserMessage,
)
from ._model_info import KNOWN_MODELS, ModelInfo, ModelTable, resolve_model_info
from ._options import ChatOptions
from ._prompt_tools import ToolCalling
from ._retry import RetryPolicy
from ._tool_pairing import check_tool_pairing
from ._tools import Tool, ToolSchema, check_text_calls

logger = logging.getLogger(__name__)

ToolChoice = Union[Literal["auto", "none", "required"], str, Tool]
"""`auto`, `none`, `required`, or one tool (by name or the tool itself) the model must call."""

JsonOutput = Union[bool, type[BaseModel], None]
"""`True` for JSON mode, a pydantic model class for structured output, None/False for text."""


@runtime_checkable
class ChatCompletionClient(Protocol):
    """One async interface over every model provider."""

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
    ) -> CreateResult: ...

    def create_stream(
        self,
        messages: Sequence[LLMMessage],
        cancellation_token: CancellationToken | None = None,
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: ToolChoice = "auto",
        json_output: JsonOutput = None,
        options: ChatOptions | Mapping[str, Any] | None = None,
        extra_create_args: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamChunk | CreateResult]: ...

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int: ...

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int: ...

    @property
    def capabilities(self) -> ModelInfo: ...

    def actual_usage(self) -> RequestUsage: ...

    def total_usage(self) -> RequestUsage: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class ChatRequest:
    """A validated call, as a provider maps it. `tool_choice` is `auto`, `none`, `required` or a tool name."""

    messages: list[LLMMessage]
    model: str
    tools: list[ToolSchema] = field(default_factory=list)
    tool_choice: str = "auto"
    json_output: bool | type[BaseModel] = False
    options: ChatOptions = field(default_factory=ChatOptions)
    extra: dict[str, Any] = field(default_factory=dict)
    cancellation_token: CancellationToken | None = None

    @property
    def structured_model(self) -> type[BaseModel] | None:
        """The pydantic model asked for, if structured output."""
        return self.json_output if isinstance(self.json_output, type) else None


def _same_chunk(chunk: StreamChunk) -> StreamChunk:
    return chunk


@dataclass
class EventStream:
    """A provider's open response stream, read by the base's own stream loop (see `_open_events`).

    - `events`: the SDK's async iterator of events; the loop awaits its `__anext__` directly.
    - `handle(event)`: a `StreamChunk` to yield, or None (an event that only updates state).
    - `result()`: the `CreateResult` after the last event (raise a `ConnectionError` if the stream ended early).
    - `close()`: release the response (awaited once, at the end or when the consumer stops).
    - `translate_error(exc)`: an exception to raise instead of `exc` from reading `events` (None keeps `exc`).
    """

    events: AsyncIterator[Any]
    handle: Callable[[Any], StreamChunk | None]
    result: Callable[[], CreateResult]
    close: Callable[[], Awaitable[None]]
    translate_error: Callable[[Exception], BaseException | None] | None = None

    @classmethod
    def of_result(cls, result: CreateResult) -> EventStream:
        """A stream of a reply already read whole (tool calls at the prompt level: whether the answer is a call is
        known only at its end): its text, if it is text, as one chunk, then `result`."""
        text = result.content if isinstance(result.content, str) else ""

        async def events() -> AsyncIterator[StreamChunk]:
            if text:
                yield StreamChunk.of(text)

        async def close() -> None:
            return None

        return cls(events(), _same_chunk, lambda: result, close)

    async def first_item(self) -> StreamChunk | CreateResult:
        """Read to the first chunk (or to the end: the result). Errors come translated."""
        next_event = self.events.__anext__
        handle = self.handle
        while True:
            try:
                event = await next_event()
            except StopAsyncIteration:
                return self.result()
            except Exception as exc:
                self.reraise(exc)
            item = handle(event)
            if item is not None:
                return item

    def reraise(self, exc: Exception) -> NoReturn:
        """Raise what reading `events` raised, translated when `translate_error` gives something else."""
        translated = self.translate_error(exc) if self.translate_error is not None else None
        if translated is None or translated is exc:
            raise exc
        raise translated from exc


_message_adapter: TypeAdapter[LLMMessage] | None = None


def _validate_message(data: Mapping[str, Any]) -> LLMMessage:
    global _message_adapter
    if _message_adapter is None:  # built on first use, not at import
        _message_adapter = TypeAdapter(LLMMessage)
    return _message_adapter.validate_python(data)


def coerce_messages(messages: Sequence[Any]) -> list[LLMMessage]:
    if type(messages) is not list and (isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence)):
        raise ConfigurationError(f"messages must be a list of messages, got {type(messages).__name__}")
    if not messages:
        raise ConfigurationError("messages must not be empty")
    out: list[LLMMessage] = []
    for i, message in enumerate(messages):
        if type(message) in _MESSAGE_CLASSES:
            out.append(message)
            continue
        if isinstance(message, BaseModel) and getattr(message, "type", None) in _MESSAGE_TYPES:
            out.append(message)  # type: ignore[arg-type]
            continue
        if isinstance(message, Mapping):
            try:
                out.append(_validate_message(message))
                continue
            except ValidationError as exc:
                first = exc.errors(include_input=False, include_url=False)[0]
                loc = ".".join(str(p) for p in first["loc"])
                raise ConfigurationError(f"messages[{i}] is invalid: {loc}: {first['msg']}") from None
        raise ConfigurationError(
            f"messages[{i}] must be a SystemMessage, UserMessage, AssistantMessage or "
            f"FunctionExecutionResultMessage, got {type(message).__name__}"
        )
    return out


_MESSAGE_TYPES = frozenset({"SystemMessage", "UserMessage", "AssistantMessage", "FunctionExecutionResultMessage"})
# The message classes themselves: an exact type check is the common case's whole test.
_MESSAGE_CLASSES = frozenset(LLM_MESSAGE_TYPES)


def tool_schema_of(tool: Tool | ToolSchema | Mapping[str, Any]) -> ToolSchema:
    """A tool's schema with provider-ready parameters."""
    # Mapping first: isinstance against a runtime-checkable Protocol is slow.
    if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
        schema = tool
    elif isinstance(tool, Tool):
        schema = tool.schema
    else:
        raise ConfigurationError(
            f"tools entries must be Tools or tool schemas with a 'name', got {type(tool).__name__}"
        )
    out: ToolSchema = {
        "name": check_tool_name(schema["name"]),
        "description": schema.get("description", "") or "",
        "parameters": normalize_parameters(schema.get("parameters")),
    }
    if schema.get("strict"):
        out["strict"] = True
    if "text_calls" in schema and not check_text_calls(schema["text_calls"]):
        out["text_calls"] = False
    return out


def model_info_dict(model_info: ModelInfo | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`model_info` as the plain dict a component config holds."""
    if model_info is None:
        return None
    if isinstance(model_info, ModelInfo):
        return model_info.model_dump()
    if not isinstance(model_info, Mapping):
        raise ConfigurationError(f"model_info must be a ModelInfo or a mapping, got {type(model_info).__name__}")
    return dict(model_info)


def options_dict(options: ChatOptions | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`default_options` as the plain dict a component config holds (only the fields that were set)."""
    if options is None:
        return None
    if isinstance(options, ChatOptions):
        return options.set_fields()
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"default_options must be ChatOptions or a mapping, got {type(options).__name__}")
    return dict(options)


def config_from_arguments(config_cls: type[ConfigT], arguments: Mapping[str, Any], owner: str) -> ConfigT:
    """A constructor's arguments (pass `locals()`) validated as its component config, via `validate_config`.

    Only `config_cls`'s fields are taken. Values become what a config holds: `model_info` and
    `default_options` their dump form (`model_info_dict`, `options_dict`), other mappings plain dicts,
    lists and tuples lists, paths strings. A string stays a string.
    """
    values: dict[str, Any] = {}
    for name in config_cls.model_fields:
        if name not in arguments:
            continue
        value = arguments[name]
        if name == "model_info":
            value = model_info_dict(value)
        elif name == "default_options":
            value = options_dict(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, (list, tuple)):
            value = list(value)
        elif isinstance(value, os.PathLike):
            value = os.fspath(value)
        values[name] = value
    return validate_config(config_cls, values, owner)


def _has_images(messages: Sequence[LLMMessage]) -> bool:
    return any(
        isinstance(m, UserMessage) and not isinstance(m.content, str) and any(isinstance(p, Image) for p in m.content)
        for m in messages
    )


class BaseChatCompletionClient(ABC, ClientLifecycle):
    """Shared behaviour of every model client. See the module docstring for the split of work."""

    component_type = "model"
    provider_name: str = "provider"
    model_table: ModelTable = KNOWN_MODELS
    tool_results_required: ClassVar[bool] = True
    """Whether the provider refuses a tool call left without its result (see `check_tool_pairing`); a result
    without its call is refused for every provider."""

    def __init__(
        self,
        *,
        model: str,
        model_info: ModelInfo | Mapping[str, Any] | None = None,
        token_limit: int | None = None,
        default_options: ChatOptions | Mapping[str, Any] | None = None,
        max_retries: int = 3,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError("model must be a non-empty string")
        if token_limit is not None and (not isinstance(token_limit, int) or token_limit <= 0):
            raise ConfigurationError(f"token_limit must be a positive int, got {token_limit!r}")
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")
        self._model = model
        self._model_info_override = model_info
        self._token_limit = token_limit
        try:
            self._model_info = resolve_model_info(
                model, table=self.model_table, override=model_info, token_limit=token_limit
            )
        except ValidationError as exc:
            raise ConfigurationError(f"model_info is invalid: {exc.errors(include_input=False)[0]['msg']}") from None
        self._default_options = (
            default_options
            if isinstance(default_options, ChatOptions) or default_options is None
            else ChatOptions.model_validate(default_options)
        )
        self._max_retries = max_retries
        self._retry = retry_policy or RetryPolicy(max_retries=max_retries)
        self._custom_retry_policy = retry_policy is not None
        # The options of a call without options and without client defaults: one empty object, read only.
        self._no_options = ChatOptions()
        self._usage = UsageTally()
        self._closed = False

    # --- the provider's part ---------------------------------------------------------------------

    @abstractmethod
    async def _create(self, request: ChatRequest) -> CreateResult:
        """One request to the provider. SDK errors propagate unchanged (the base retries them)."""

    def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk | CreateResult]:
        """Chunks, then exactly one `CreateResult` with the full content and usage. A provider implements
        this or `_open_events`."""
        raise NotImplementedError(f"{type(self).__name__} implements neither _stream nor _open_events")

    async def _open_events(self, request: ChatRequest) -> EventStream:
        """Optional, in place of `_stream`: send the request and return the open response as an `EventStream`,
        which the base reads in its own loop. A provider whose SDK hands out an event iterator saves an
        async-generator layer per chunk this way (the base uses it when a subclass overrides it)."""
        raise NotImplementedError

    def _check_request(self, request: ChatRequest) -> None:
        """Raise `UnsupportedOptionError` / `ConfigurationError` for what the provider cannot do."""

    async def _close(self) -> None:
        """Release the provider's connections."""

    # --- public API ------------------------------------------------------------------------------

    @property
    def model(self) -> str:
        return self._model

    def _tool_calling_for(self, model: str, info: ModelInfo) -> ToolCalling:
        """How this client gets tool calls from `model` (see `ToolCalling`); a client that can do tool calling at
        the prompt level (``constrained`` / ``prompt``) overrides this. Not ``native``: the model's own
        `function_calling` does not gate tools, and `capabilities` reports function calling."""
        return "native"

    def _effective_info(self, model: str, info: ModelInfo) -> ModelInfo:
        if info.function_calling or self._tool_calling_for(model, info) == "native":
            return info
        return info.model_copy(update={"function_calling": True})

    @property
    def capabilities(self) -> ModelInfo:
        """What the model can do (vision, function_calling, json_output, and more). `function_calling` is True
        where the client does tool calling at the prompt level for a model without native tool calling."""
        return self._effective_info(self._model, self._model_info)

    @property
    def model_info(self) -> ModelInfo:
        return self.capabilities

    @property
    def retry_policy(self) -> RetryPolicy:
        """The policy this client retries rate limits and transient errors with (`max_retries=0`: it does not)."""
        return self._retry

    def disable_retries(self) -> None:
        """Make every later call one attempt: for a caller that retries around this client (a `ChatPipeline`
        with a `RetryMiddleware` calls it), so retries do not multiply. The client's dump keeps the
        `max_retries` it was configured with."""
        self._retry = replace(self._retry, max_retries=0)

    def info_for(self, model: str) -> ModelInfo:
        """Model info for another model name (a per-call `model_id`), with this client's overrides."""
        if model == self._model:
            return self._model_info
        return resolve_model_info(
            model, table=self.model_table, override=self._model_info_override, token_limit=self._token_limit
        )

    def build_request(
        self,
        messages: Sequence[LLMMessage],
        cancellation_token: CancellationToken | None = None,
        *,
        tools: Sequence[Tool | ToolSchema] = (),
        tool_choice: ToolChoice = "auto",
        json_output: JsonOutput = None,
        options: ChatOptions | Mapping[str, Any] | None = None,
        extra_create_args: Mapping[str, Any] | None = None,
    ) -> ChatRequest:
        """Validate a call and build the request, raising before any network traffic."""
        if self._closed:
            raise ClientClosedError(f"{type(self).__name__} is closed")
        if cancellation_token is not None and not isinstance(cancellation_token, CancellationToken):
            raise ConfigurationError(
                f"cancellation_token must be a CancellationToken, got {type(cancellation_token).__name__}"
            )
        msgs = coerce_messages(messages)
        check_tool_pairing(msgs, results_required=self.tool_results_required)
        if options is None:
            call_options = self._default_options or self._no_options
        elif isinstance(options, ChatOptions):
            call_options = options.merged_over(self._default_options)
        elif isinstance(options, Mapping):
            call_options = ChatOptions.model_validate(options).merged_over(self._default_options)
        else:
            raise ConfigurationError(f"options must be ChatOptions or a mapping, got {type(options).__name__}")
        model = call_options.model_id or self._model
        info = self.info_for(model)

        if not tools and (type(tools) is tuple or type(tools) is list):
            schemas: list[ToolSchema] = []  # no tools (the default): none of the checks below apply
            names: list[str] = []
        else:
            if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
                raise ConfigurationError(f"tools must be a list of tools, got {type(tools).__name__}")
            schemas = [tool_schema_of(t) for t in tools]
            names = [s["name"] for s in schemas]
            if len(set(names)) != len(names):
                raise ConfigurationError(f"tools: duplicate tool names in {names}")
        if schemas and not info.function_calling and self._tool_calling_for(model, info) == "native":
            raise UnsupportedOptionError(
                f"model {model!r} does not support function calling; pass model_info={{'function_calling': True}} "
                "if it does"
            )
        choice = (
            tool_choice if type(tool_choice) is str and tool_choice == "auto" else self._tool_choice(tool_choice, names)
        )

        if json_output is None or json_output is False:
            json_mode: bool | type[BaseModel] = False
        elif json_output is True or (isinstance(json_output, type) and issubclass(json_output, BaseModel)):
            json_mode = json_output
            if not info.json_output:
                raise UnsupportedOptionError(
                    f"model {model!r} does not support JSON output; pass model_info={{'json_output': True}} if it does"
                )
        else:
            raise ConfigurationError(
                f"json_output must be True, False, None or a pydantic model class, got {json_output!r}"
            )

        if not info.vision and _has_images(msgs):
            raise UnsupportedOptionError(
                f"model {model!r} does not accept images; pass model_info={{'vision': True}} if it does"
            )
        if extra_create_args is not None and not isinstance(extra_create_args, Mapping):
            raise ConfigurationError(f"extra_create_args must be a mapping, got {type(extra_create_args).__name__}")
        request = ChatRequest(
            messages=msgs,
            model=model,
            tools=schemas,
            tool_choice=choice,
            json_output=json_mode,
            options=call_options,
            extra=dict(extra_create_args or {}),
            cancellation_token=cancellation_token,
        )
        self._check_request(request)
        return request

    @staticmethod
    def _tool_choice(tool_choice: ToolChoice, names: list[str]) -> str:
        # str first: isinstance against a runtime-checkable Protocol is slow, and this runs every call.
        if not isinstance(tool_choice, str) and isinstance(tool_choice, Tool):
            tool_choice = tool_choice.name
        if not isinstance(tool_choice, str):
            raise ConfigurationError(f"tool_choice must be 'auto', 'none', 'required' or a tool, got {tool_choice!r}")
        if tool_choice in ("auto", "none"):
            return tool_choice
        if not names:
            raise ConfigurationError(f"tool_choice={tool_choice!r} needs tools, but no tools were given")
        if tool_choice != "required" and tool_choice not in names:
            raise ConfigurationError(f"tool_choice names {tool_choice!r}, which is not among the tools {names}")
        return tool_choice

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
        """Send the conversation and return the model's reply. See `ChatCompletionClient`."""
        request = self.build_request(
            messages,
            cancellation_token,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            options=options,
            extra_create_args=extra_create_args,
        )
        if cancellation_token is not None:
            with CancelScope(cancellation_token):
                result = await self._retry.run(lambda: self._create(request))
            return self._finish(request, result)
        # Without a token: the first attempt awaited directly (no scope, no retry frame on the hot path).
        try:
            result = await self._create(request)
        except Exception as exc:
            error = exc
        else:
            return self._finish(request, result)
        result = await self._retry.retry_after(error, lambda: self._create(request))
        return self._finish(request, result)

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
    ) -> AsyncGenerator[StreamChunk | CreateResult, None]:
        """Stream the reply: `StreamChunk`s, then exactly one `CreateResult`. Retries happen only
        before the first chunk; a cancelled token aborts the stream's network read."""
        request = self.build_request(
            messages,
            cancellation_token,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            options=options,
            extra_create_args=extra_create_args,
        )
        token = cancellation_token
        if type(self)._open_events is not BaseChatCompletionClient._open_events:
            # The provider's events read right here: one generator layer between the SDK and the caller.
            async def open_events() -> tuple[EventStream, StreamChunk | CreateResult]:
                opened = await self._open_events(request)
                try:
                    return opened, await opened.first_item()
                except BaseException:
                    await opened.close()
                    raise

            with CancelScope(token):
                source, first = await self._retry.run(open_events)
            try:
                if isinstance(first, CreateResult):
                    yield self._finish(request, first)
                    return
                yield first
                next_event = source.events.__anext__
                handle = source.handle
                while True:
                    try:
                        if token is None:
                            event = await next_event()
                        else:
                            with CancelScope(token):
                                event = await next_event()
                    except StopAsyncIteration:
                        break
                    except Exception as exc:
                        source.reraise(exc)
                    chunk = handle(event)
                    if chunk is not None:
                        yield chunk
                yield self._finish(request, source.result())
            finally:
                await source.close()
            return

        async def open_stream() -> tuple[AsyncIterator[StreamChunk | CreateResult], StreamChunk | CreateResult]:
            stream = self._stream(request)
            try:
                return stream, await stream.__anext__()
            except BaseException:
                await _aclose(stream)
                raise

        try:
            with CancelScope(token):
                stream, item = await self._retry.run(open_stream)
        except StopAsyncIteration:
            raise ExtError(f"{type(self).__name__}: the provider stream ended without a result") from None
        try:
            while True:
                if isinstance(item, CreateResult):
                    yield self._finish(request, item)
                    return
                yield item
                try:
                    if token is None:
                        item = await stream.__anext__()
                    else:
                        with CancelScope(token):
                            item = await stream.__anext__()
                except StopAsyncIteration:
                    raise ExtError(f"{type(self).__name__}: the provider stream ended without a result") from None
        finally:
            await _aclose(stream)

    def _finish(self, request: ChatRequest, result: CreateResult) -> CreateResult:
        if request.json_output and isinstance(result.content, str):
            parsed = parse_json_output(result.content, request.json_output, finish_reason=result.finish_reason)
            result = result.model_copy(update={"parsed": parsed})
        self._usage.add(result.usage)
        return result

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        """Tokens the messages and tools take. The base gives a provider-free estimate (see `estimate_tokens`)."""
        return estimate_tokens(coerce_messages(messages), [tool_schema_of(t) for t in tools])

    async def count_tokens_async(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()
    ) -> int:
        """Tokens the messages and tools take, asking the provider where it has a counting endpoint.
        The base uses `count_tokens`."""
        return self.count_tokens(messages, tools=tools)

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = ()) -> int:
        """Context window left after the messages and tools. Never raises for an unknown model."""
        try:
            used = self.count_tokens(messages, tools=tools)
        except ConfigurationError:
            raise
        except Exception:  # a tokenizer failure must not break budgeting
            logger.debug("count_tokens failed; using the estimate", exc_info=True)
            used = estimate_tokens(coerce_messages(messages), [tool_schema_of(t) for t in tools])
        return self._model_info.context_window - used


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
