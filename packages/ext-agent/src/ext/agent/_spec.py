"""Agent spec files: one YAML (or JSON) file declares a `ChatAgent`, checked without building anything
(`check_agent_spec`) or built (`ChatAgent.from_spec`, `load_agent`). Every error names the file and the field.

    name: weather                      # required: 1 to 64 letters, digits, '_' or '-'
    description: Answers weather questions.
    instructions: You answer questions about the weather in {city}.
    variables: {city: Oslo}            # defaults for the instructions' {placeholders}; a run can override them
    model:                             # a pipeline document (client + middleware, as pipeline files are), or
      client: {provider: openai, options: {default_model: gpt-4o-mini, api_key_env: OPENAI_API_KEY}}
      middleware: [{retry: {max_retries: 3}}]
    # model: pipeline.yaml             # ... the path of a pipeline file, relative to this file
    tools:
      - mcp: {command: python, args: [server.py]}                  # an MCP server over stdio
      - mcp: {url: "http://127.0.0.1:8000/mcp", headers_env: {Authorization: MCP_AUTH}}   # or streamable HTTP
      - http: {name: get_weather, host: 127.0.0.1, port: 8080, path: "/weather/{city}", method: GET,
               json_schema: {type: object, properties: {city: {type: string}}, required: [city]}}
      - python: my_package.tools:get_time      # a Tool, a Workbench, a function (made a FunctionTool), or a list
      - {provider: my.Tool, config: {}}        # any tool's component dump
    memory: {embedder: {...}, store: {...}, top_k: 5}   # the settings of a pipeline file's `memory:` entry
    output:                             # the typed answer, as JSON Schema (an object)
      type: object
      properties: {city: {type: string}, celsius: {type: number}}
      required: [city, celsius]
    require_approval: [delete_file]     # tools whose calls wait for a person's approval
    tool_choice: required               # each turn's first model call (auto, required, none or a tool's name)
    limits: {max_iterations: 10, output_retries: 1, context_window: 8192, reserve_tokens: 1024}
    options: {temperature: 0}           # ChatOptions for every model call
    store: {provider: ext.redis.RedisStateStore, config: {url: "redis://127.0.0.1:6379/0"}}   # sessions

Secrets come from the environment only, as in pipeline files (`api_key_env`, `headers_env`, `inherit_env`): a
secret written in the file is refused at any depth. Checking imports the classes the file names (to validate
their settings) but builds nothing: no client, no server process, no connection, no model file opened; a
`python:` entry is checked for its form and that its module exists, without running the module."""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ext.core import (
    ChatOptions,
    ComponentError,
    ConfigurationError,
    FunctionTool,
    StateStore,
    Tool,
    Workbench,
    import_object,
    load_component,
)
from ext.pipeline import (
    PipelineCheck,
    check_pipeline,
    check_secrets,
    load_pipeline,
    middleware_kinds,
    pipeline_from_config,
    read_config_file,
)

from ._schema_model import model_from_schema

T = TypeVar("T")

__all__ = ["AgentSpecCheck", "agent_from_spec", "check_agent_spec"]

_KEYS = (
    "name", "description", "instructions", "variables", "model", "tools", "memory", "output", "require_approval",
    "limits", "options", "store", "tool_choice",
)  # fmt: skip
_LIMITS = ("max_iterations", "output_retries", "context_window", "reserve_tokens")
_TOOL_KINDS = ("mcp", "http", "python")
_INSTALL = {"ext.tools.mcp": "ext-tools-mcp", "ext.tools.http": "ext-tools-http"}


@dataclass
class AgentSpecCheck:
    """What `check_agent_spec` found valid."""

    name: str
    model: PipelineCheck
    tools: list[str] = field(default_factory=list)
    memory: bool = False
    output: list[str] | None = None
    require_approval: list[str] = field(default_factory=list)


def check_agent_spec(
    source: str | os.PathLike[str] | Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> AgentSpecCheck:
    """Check an agent spec as `ChatAgent.from_spec` reads it, building nothing. Errors name the file and field."""
    name, base, spec = _source(source)
    env = os.environ if environ is None else environ
    try:
        _check_top(spec)
        model = _check_model(spec["model"], base, env)
        tools = [_check_tool(entry, f"tools[{i}]") for i, entry in enumerate(_list(spec, "tools"))]
        if spec.get("memory") is not None:
            _memory_kind().check(dict(_mapping(spec, "memory")), "memory")
        output = model_from_schema(spec["output"]) if spec.get("output") is not None else None
        _limits(spec)
        _options(spec)
        _approval(spec)
        if spec.get("store") is not None:
            _check_component(spec["store"], "store")
    except ConfigurationError as exc:
        raise _in_file(exc, name) from None
    return AgentSpecCheck(
        name=spec["name"],
        model=model,
        tools=tools,
        memory=spec.get("memory") is not None,
        output=list(output.model_fields) if output is not None else None,
        require_approval=_approval(spec),
    )


def agent_from_spec(
    make: Callable[..., T],
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    store: StateStore | None = None,
) -> T:
    """`make(pipeline, **arguments)` with what a spec declares (`ChatAgent.from_spec` passes the class, so this
    module needs no import of it). `store` overrides the spec's `store:`. The file is checked whole first, so a
    mistake in its last field fails before anything is built."""
    check_agent_spec(source, environ=environ)
    name, base, spec = _source(source)
    env = os.environ if environ is None else environ
    try:
        model = spec["model"]
        if isinstance(model, str):
            pipeline = load_pipeline(_relative(model, base), environ=env)
        else:
            pipeline = pipeline_from_config(model, environ=env)
        tools: list[Tool | Workbench] = []
        for index, entry in enumerate(_list(spec, "tools")):
            tools.extend(_build_tool(entry, f"tools[{index}]"))
        memory = _memory_kind().build(dict(spec["memory"]), "memory") if spec.get("memory") is not None else None
        output = model_from_schema(spec["output"], name=_model_name(spec["name"])) if spec.get("output") else None
        if store is None and spec.get("store") is not None:
            store = load_component(spec["store"])
        limits = _limits(spec)
        return make(
            pipeline,
            name=spec["name"],
            description=spec.get("description") or "",
            instructions=spec.get("instructions"),
            variables=spec.get("variables"),
            tools=tools,
            memory=memory,
            output_type=output,
            require_approval=_approval(spec) or None,
            options=_options(spec),
            store=store,
            tool_choice=spec.get("tool_choice") or "auto",
            **limits,
        )
    except (ConfigurationError, ComponentError) as exc:
        raise _in_file(ConfigurationError(str(exc)), name) from None


def _source(source: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[str | None, Path, Mapping[str, Any]]:
    if isinstance(source, Mapping):
        return None, Path.cwd(), source
    return str(source), Path(source).resolve().parent, read_config_file(source)


def _in_file(exc: ConfigurationError, name: str | None) -> ConfigurationError:
    message = str(exc)
    return ConfigurationError(f"{name}: {message}") if name is not None and not message.startswith(name) else exc


def _check_top(spec: Mapping[str, Any]) -> None:
    unknown = sorted(str(k) for k in spec if k not in _KEYS)
    if unknown:
        raise ConfigurationError(f"unknown key {unknown[0]!r}; an agent spec has {', '.join(_KEYS)}")
    for key in ("name", "model"):
        if key not in spec:
            raise ConfigurationError(f"{key}: required")
    for key in ("name", "description", "instructions", "tool_choice"):
        if key in spec and spec[key] is not None and not isinstance(spec[key], str):
            raise ConfigurationError(f"{key}: expected text, got {type(spec[key]).__name__}")
    variables = spec.get("variables")
    if variables is not None and (not isinstance(variables, Mapping) or not all(isinstance(k, str) for k in variables)):
        raise ConfigurationError("variables: expected a mapping of names to values")
    check_secrets({k: v for k, v in spec.items() if k not in ("model", "tools", "memory", "store")}, "")


def _mapping(spec: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = spec[key]
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{key}: expected a mapping, got {type(value).__name__}")
    return value


def _list(spec: Mapping[str, Any], key: str) -> list[Any]:
    value = spec.get(key) or []
    if not isinstance(value, list):
        raise ConfigurationError(f"{key}: expected a list, got {type(value).__name__}")
    return value


def _relative(path: str, base: Path) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else base / candidate


def _check_model(model: Any, base: Path, env: Mapping[str, str]) -> PipelineCheck:
    if isinstance(model, str):
        path = _relative(model, base)
        if not path.is_file():
            raise ConfigurationError(f"model: no pipeline file {str(path)!r}")
        try:
            return check_pipeline(path, environ=env)
        except ConfigurationError as exc:
            raise ConfigurationError(f"model ({exc})") from None
    if not isinstance(model, Mapping):
        raise ConfigurationError(
            f"model: expected a pipeline document or a pipeline file's path, got {type(model).__name__}"
        )
    try:
        return check_pipeline(model, environ=env)
    except ConfigurationError as exc:
        raise ConfigurationError(f"model: {exc}") from None


def _tool_entry(entry: Any, where: str) -> tuple[str, Any]:
    """(kind, value) of a tools entry: `mcp`/`http` with their settings, `python` with its target, or
    `component` with a component dump."""
    if isinstance(entry, Mapping) and "provider" in entry:
        return "component", dict(entry)
    if not isinstance(entry, Mapping) or len(entry) != 1:
        raise ConfigurationError(
            f"{where}: expected one of {{mcp: {{...}}}}, {{http: {{...}}}}, {{python: module:name}} or a component dump"
        )
    ((kind, value),) = entry.items()
    if kind not in _TOOL_KINDS:
        raise ConfigurationError(f"{where}: unknown tool kind {kind!r}; expected one of {', '.join(_TOOL_KINDS)}")
    if kind == "python":
        if not isinstance(value, str) or ":" not in value or not all(value.partition(":")[::2]):
            raise ConfigurationError(f"{where}.python: expected 'module:name', got {value!r}")
        return kind, value
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{where}.{kind}: expected a mapping of settings, got {type(value).__name__}")
    return kind, dict(value)


def _component_dump(kind: str, value: Any, where: str) -> dict[str, Any]:
    if kind == "component":
        return dict(value)
    if kind == "http":
        return {"provider": "ext.tools.http.HttpTool", "config": value}
    settings = dict(value)
    overrides = settings.pop("tool_overrides", None)
    if "command" in settings:
        params = {"type": "StdioServerParams", **settings}
    elif "url" in settings:
        transport = settings.pop("transport", "streamable-http")
        kinds = {"streamable-http": "StreamableHttpServerParams", "sse": "SseServerParams"}
        if transport not in kinds:
            raise ConfigurationError(f"{where}.mcp.transport: expected streamable-http or sse, got {transport!r}")
        params = {"type": kinds[transport], **settings}
    else:
        raise ConfigurationError(f"{where}.mcp: expected `command` (a server over stdio) or `url` (over HTTP)")
    config: dict[str, Any] = {"server_params": params}
    if overrides is not None:
        config["tool_overrides"] = overrides
    return {"provider": "ext.tools.mcp.McpWorkbench", "config": config}


def _check_component(dump: Any, where: str) -> str:
    if not isinstance(dump, Mapping) or not isinstance(dump.get("provider"), str):
        raise ConfigurationError(f"{where}: expected a component dump {{provider: ..., config: {{...}}}}")
    provider = str(dump["provider"])
    check_secrets(dict(dump), where)
    try:
        cls = import_object(provider)
    except (ImportError, AttributeError, ValueError):
        module = provider.rpartition(".")[0]
        hint = f" (pip install {_INSTALL[module]})" if module in _INSTALL else ""
        raise ConfigurationError(f"{where}: cannot import {provider!r}{hint}") from None
    schema = getattr(cls, "component_config_schema", None)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(dump.get("config") or {})
        except ValidationError as exc:
            error = exc.errors(include_url=False, include_input=False)[0]
            path = ".".join(str(p) for p in error["loc"])
            raise ConfigurationError(
                f"{where}.{path}: {error['msg']}" if path else f"{where}: {error['msg']}"
            ) from None
    return provider


def _check_tool(entry: Any, where: str) -> str:
    kind, value = _tool_entry(entry, where)
    if kind == "python":
        module = value.partition(":")[0]
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise ConfigurationError(f"{where}.python: no module {module!r}")
        return str(value)
    where_dump = where if kind == "component" else f"{where}.{kind}"
    provider = _check_component(_component_dump(kind, value, where), where_dump)
    return f"{kind}: {provider}" if kind != "component" else provider


def _build_tool(entry: Any, where: str) -> list[Tool | Workbench]:
    kind, value = _tool_entry(entry, where)
    if kind != "python":
        built: Any = load_component(_component_dump(kind, value, where))
        if not isinstance(built, (Tool, Workbench)):
            raise ConfigurationError(f"{where}: {type(built).__name__} is not a tool or a workbench")
        return [built]
    try:
        target = import_object(value)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"{where}.python: cannot import {value!r}: {exc}") from None
    items = list(target) if isinstance(target, (list, tuple)) else [target]
    tools: list[Tool | Workbench] = []
    for item in items:
        if isinstance(item, (Tool, Workbench)):
            tools.append(item)
        elif inspect.isfunction(item):
            tools.append(FunctionTool(item, description=inspect.getdoc(item) or item.__name__))
        else:
            raise ConfigurationError(
                f"{where}.python: {value!r} is a {type(item).__name__}; expected a Tool, a Workbench, a function "
                "or a list of them"
            )
    return tools


def _memory_kind() -> Any:
    return middleware_kinds()["memory"]


def _limits(spec: Mapping[str, Any]) -> dict[str, int]:
    limits = spec.get("limits") or {}
    if not isinstance(limits, Mapping):
        raise ConfigurationError(f"limits: expected a mapping, got {type(limits).__name__}")
    out: dict[str, int] = {}
    for key, value in limits.items():
        if key not in _LIMITS:
            raise ConfigurationError(f"limits: unknown key {key!r}; expected {', '.join(_LIMITS)}")
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "output_retries" else 1):
            raise ConfigurationError(f"limits.{key}: expected a positive whole number, got {value!r}")
        out[key] = value
    return out


def _options(spec: Mapping[str, Any]) -> ChatOptions | None:
    options = spec.get("options")
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"options: expected a mapping, got {type(options).__name__}")
    try:
        return ChatOptions.model_validate(options)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        path = ".".join(str(p) for p in error["loc"])
        raise ConfigurationError(f"options.{path}: {error['msg']}") from None


def _approval(spec: Mapping[str, Any]) -> list[str]:
    names: Sequence[Any] = spec.get("require_approval") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigurationError("require_approval: expected a list of tool names")
    return list(names)


def _model_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_")) + "Output"
