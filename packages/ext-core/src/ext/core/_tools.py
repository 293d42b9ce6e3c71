"""Tools: the `Tool` protocol, `SchemaTool` (what every tool class shares), `BaseTool`, and `FunctionTool`
(schema from type hints)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Protocol, TypedDict, get_args, get_origin, get_type_hints, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from ._cancellation import CancellationToken, run_cancellable
from ._component import Component, ConfigT
from ._errors import ComponentError, ConfigurationError, ToolArgumentsError
from ._mapping import check_tool_name, normalize_parameters


class _ToolSchemaRequired(TypedDict):
    name: str


class ToolSchema(_ToolSchemaRequired, total=False):
    """A tool as a model sees it: name, description and the JSON Schema of its arguments.

    `text_calls` (default True): False keeps the tool out of tolerant reading. Where ext does the tool calling
    (`tool_calling="prompt"` or ``"constrained"``), a call of it is then accepted only from a reply held to the
    call schema, never read from free text (a tool that acts, such as one that deletes, should not be run because
    a model wrote its name in an answer). It is never sent to a provider."""

    description: str
    parameters: dict[str, Any]
    strict: bool
    output_schema: dict[str, Any]
    text_calls: bool


@runtime_checkable
class Tool(Protocol):
    """Anything a model can call."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def schema(self) -> ToolSchema: ...

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> Any: ...

    def return_value_as_string(self, value: Any) -> str: ...


def check_text_calls(value: object) -> bool:
    """`value` when it is a bool (a tool's `text_calls`), else `ConfigurationError` naming the field."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"text_calls must be True or False, got {value!r}")
    return value


def value_as_string(value: Any) -> str:
    """A tool's return value as the text a model reads."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _validation_message(tool: str, exc: ValidationError) -> str:
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors(include_input=False, include_url=False)
    ]
    return f"invalid arguments for tool {tool!r}: " + "; ".join(parts)


class SchemaTool(Component[ConfigT]):
    """The plumbing every tool class shares (`BaseTool` here, `HttpTool`, `LangChainToolAdapter`): `name`,
    `description` and `schema` read from `_name`, `_description` and `_schema`, which a subclass sets in
    `__init__` (`_name` through `check_tool_name`), the check that arguments are an object, and
    `return_value_as_string`. A subclass implements `run_json`."""

    component_type = "tool"
    _name: str
    _description: str
    _schema: ToolSchema

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def schema(self) -> ToolSchema:
        return self._schema

    def _check_args_object(self, args: object) -> None:
        """`ToolArgumentsError` unless `args` is a mapping (a model may send a list, a string or null)."""
        if not isinstance(args, Mapping):
            raise ToolArgumentsError(f"arguments for tool {self._name!r} must be an object, got {type(args).__name__}")

    def return_value_as_string(self, value: Any) -> str:
        return value_as_string(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"


class BaseTool(ABC, SchemaTool[BaseModel]):
    """A tool with pydantic-validated arguments. Subclasses implement `run`."""

    def __init__(
        self,
        *,
        name: str,
        description: str,
        args_type: type[BaseModel],
        strict: bool = False,
        text_calls: bool = True,
    ) -> None:
        self._name = check_tool_name(name)
        self._description = description
        self._args_type = args_type
        self._strict = strict
        self._text_calls = check_text_calls(text_calls)
        self._schema_made: ToolSchema | None = None

    @property
    def args_type(self) -> type[BaseModel]:
        return self._args_type

    @property
    def schema(self) -> ToolSchema:
        if self._schema_made is None:
            schema: ToolSchema = {
                "name": self._name,
                "description": self._description,
                "parameters": normalize_parameters(self._args_type.model_json_schema()),
            }
            if self._strict:
                schema["strict"] = True
            if not self._text_calls:
                schema["text_calls"] = False
            self._schema_made = schema
        return self._schema_made

    def validate_args(self, args: Mapping[str, Any]) -> BaseModel:
        """The arguments as the args model; `ToolArgumentsError` naming each bad argument otherwise."""
        self._check_args_object(args)
        try:
            return self._args_type.model_validate(dict(args))
        except ValidationError as exc:
            raise ToolArgumentsError(_validation_message(self._name, exc)) from None

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> Any:
        """Validate `args`, then run the tool."""
        return await self.run(self.validate_args(args), cancellation_token)

    @abstractmethod
    async def run(self, args: Any, cancellation_token: CancellationToken | None) -> Any:
        """Run with validated arguments."""


def _description_of(annotation: Any) -> str | None:
    # Annotated[T, "text"] documents an argument without importing pydantic's Field; pydantic
    # itself ignores the string metadata.
    if get_origin(annotation) is Annotated:
        texts = [m for m in get_args(annotation)[1:] if isinstance(m, str)]
        if texts:
            return texts[0]
    return None


class FunctionTool(BaseTool):
    """A tool from a Python function. The argument schema comes from its type hints (pydantic models,
    Optional, Literal and enums, nested types, defaults; `Annotated[T, "description"]` documents an
    argument). Sync functions run in a worker thread. A parameter named `cancellation_token` (or
    typed `CancellationToken`) receives the call's token and is not part of the schema.

    A cancelled token cancels an async function's task at once. A sync function's thread cannot be
    killed: the caller gets `CancelledError` at once and the thread's result is discarded.

    `text_calls=False` (also on `BaseTool`): calls of the tool are never read from a model's free text, only from a
    reply held to the call schema (`ToolSchema`'s `text_calls`).
    """

    component_type = "tool"

    def __init__(
        self,
        func: Callable[..., Any],
        description: str | None = None,
        name: str | None = None,
        *,
        strict: bool = False,
        text_calls: bool = True,
    ) -> None:
        if not callable(func):
            raise TypeError(f"FunctionTool.func must be callable, got {type(func).__name__}")
        tool_name = name or getattr(func, "__name__", None)
        if not tool_name or tool_name == "<lambda>":
            raise ValueError("FunctionTool.name is required for a function without a usable __name__")
        desc = description if description is not None else inspect.getdoc(func) or ""
        args_type, self._token_param = _args_model(func, tool_name)
        super().__init__(name=tool_name, description=desc, args_type=args_type, strict=strict, text_calls=text_calls)
        self._func = func
        self._is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None)  # noqa: B004 - callable objects with async __call__
        )

    async def run(self, args: Any, cancellation_token: CancellationToken | None) -> Any:
        kwargs = {name: getattr(args, name) for name in type(args).model_fields}
        if self._token_param is not None:
            kwargs[self._token_param] = cancellation_token or CancellationToken()
        if self._is_async:
            return await run_cancellable(self._func(**kwargs), cancellation_token)
        call = functools.partial(self._func, **kwargs)
        return await run_cancellable(asyncio.to_thread(call), cancellation_token)

    def _to_config(self) -> BaseModel:
        raise ComponentError("FunctionTool wraps Python code and cannot be dumped; register a BaseTool subclass")


def _args_model(func: Callable[..., Any], tool_name: str) -> tuple[type[BaseModel], str | None]:
    signature = inspect.signature(func)
    try:
        hints = get_type_hints(func, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise TypeError(f"FunctionTool {tool_name!r}: cannot resolve type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    token_param: str | None = None
    for param in signature.parameters.values():
        annotation = hints.get(param.name, Any)
        if param.name == "cancellation_token" or annotation is CancellationToken:
            token_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"FunctionTool {tool_name!r}: positional-only parameter {param.name!r} is not supported")
        doc = _description_of(annotation)
        default: Any = param.default if param.default is not param.empty else ...
        if isinstance(default, FieldInfo):
            fields[param.name] = (annotation, default)
        else:
            fields[param.name] = (annotation, Field(default, description=doc))
    model: type[BaseModel] = create_model(
        f"{tool_name}_args", __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True), **fields
    )
    return model, token_param
