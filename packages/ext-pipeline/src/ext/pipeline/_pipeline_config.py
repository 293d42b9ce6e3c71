"""Pipelines from a YAML or JSON document: read, check without building (`check_pipeline`), or build
(`load_pipeline`). Every error names the field (and the file, when there is one); keys come from the
environment (`api_key_env`, `password_env`, ...), never from the file in clear."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ext.core import ComponentError, ConfigurationError, load_component

from ._building import check_secrets, plan_client
from ._middleware_kinds import middleware_kinds
from ._pipeline import ChatMiddleware, ChatPipeline


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML (`.yaml`, `.yml`; needs PyYAML) or JSON (anything else) file as a dict; errors name the file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read config file {str(file)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"{file}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start : exc.start + 1]!r}); save the "
            "config file as UTF-8"
        ) from None
    if file.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigurationError(
                f"{file}: YAML, and reading YAML needs PyYAML, which is not installed: pip install pyyaml "
                "(or write the config as JSON)"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{file}: not valid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{file}: not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{file}: must hold a mapping at the top level, got {type(data).__name__}")
    return data


def _middleware_entry(entry: Any, index: int) -> tuple[str, dict[str, Any]] | dict[str, Any]:
    """(kind, settings) of a named middleware entry, or the mapping of a component dump."""
    where = f"middleware[{index}]"
    kinds = middleware_kinds()
    expected = ", ".join(kinds)
    if isinstance(entry, str):
        entry = {entry: {}}
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"{where} must be a mapping such as {{logging: {{}}}}, got {type(entry).__name__}")
    if "provider" in entry:
        return dict(entry)
    if len(entry) != 1:
        raise ConfigurationError(f"{where} must have one key (one of {expected}), got {sorted(map(str, entry))}")
    ((kind, settings),) = entry.items()
    if kind not in kinds:
        hint = " (it comes with ext-memory: pip install ext-memory)" if kind == "memory" else ""
        raise ConfigurationError(f"{where}: unknown middleware {kind!r}{hint}; expected one of {expected}")
    if settings is None:
        settings = {}
    if not isinstance(settings, Mapping):
        raise ConfigurationError(
            f"{where}.{kind} must be a mapping of its settings (or empty), got {type(settings).__name__}"
        )
    kinds[kind].check(dict(settings), f"{where}.{kind}")
    return str(kind), dict(settings)


def _build_middleware(entry: Any, index: int) -> ChatMiddleware:
    where = f"middleware[{index}]"
    parsed = _middleware_entry(entry, index)
    if isinstance(parsed, dict):
        try:
            return load_component(parsed, ChatMiddleware)
        except ComponentError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
    kind, settings = parsed
    try:
        return middleware_kinds()[kind].build(settings, f"{where}.{kind}")
    except (TypeError, ValueError, ComponentError) as exc:  # ConfigurationError is a ValueError
        if isinstance(exc, ConfigurationError) and str(exc).startswith(f"{where}."):
            raise
        raise ConfigurationError(f"{where}.{kind}: {exc}") from None


def _checked_document(config: Any) -> list[Any]:
    """The document's top-level shape and secrets checked; its middleware entries."""
    if not isinstance(config, Mapping):
        raise ConfigurationError(f"a pipeline config must be a mapping, got {type(config).__name__}")
    unknown = set(config) - {"client", "middleware"}
    if unknown:
        raise ConfigurationError(
            f"unknown keys {sorted(map(str, unknown))} in the pipeline config; expected client, middleware"
        )
    check_secrets(config, "")
    if "client" not in config:
        raise ConfigurationError("the pipeline config has no client")
    entries = config.get("middleware") or []
    if not isinstance(entries, list):
        raise ConfigurationError(f"middleware must be a list, outermost first, got {type(entries).__name__}")
    return entries


def pipeline_from_config(config: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> ChatPipeline:
    """A `ChatPipeline` from a config document (see `load_pipeline` for its shape)."""
    entries = _checked_document(config)
    env = os.environ if environ is None else environ
    middleware = [_build_middleware(entry, i) for i, entry in enumerate(entries)]
    plan = plan_client(config["client"], env)
    return ChatPipeline(plan.build(env), middleware)


@dataclass
class PipelineCheck:
    """What `check_pipeline` found valid: the client class, its provider and model, the middleware in order."""

    provider: str
    client: str
    model: str | None
    middleware: list[str] = field(default_factory=list)


def check_pipeline(
    source: str | os.PathLike[str] | Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> PipelineCheck:
    """Check a pipeline document as `load_pipeline` reads it, without building the client (no model file is
    opened, no connection made, no request sent): names, shapes, secrets, environment variables, the client's
    arguments or config against its class, and the middleware settings. Errors name the file and the field."""
    name, config = _source(source)
    try:
        entries = _checked_document(config)
        env = os.environ if environ is None else environ
        kinds = []
        for index, entry in enumerate(entries):
            parsed = _middleware_entry(entry, index)
            kinds.append(str(parsed.get("provider")) if isinstance(parsed, dict) else parsed[0])
        plan = plan_client(config["client"], env)
    except ConfigurationError as exc:
        raise _in_file(exc, name) from None
    return PipelineCheck(plan.provider, plan.cls.__name__, plan.model, kinds)


def _source(source: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[str | None, Any]:
    if isinstance(source, Mapping):
        return None, source
    return str(source), read_config_file(source)


def _in_file(exc: ConfigurationError, name: str | None) -> ConfigurationError:
    return ConfigurationError(f"{name}: {exc}") if name is not None else exc


def load_pipeline(
    source: str | os.PathLike[str] | Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> ChatPipeline:
    """A client and its middleware from a YAML or JSON file (or an already parsed mapping), in one call::

        client:
          provider: my-provider         # a provider's short name (`ext models` lists the installed ones; both
                                        # spellings: my-provider or my_provider), or a registered client path
          options:                      # AIClientOptions
            endpoint: https://llm.example.com/v1
            default_model: my-model
            api_key_env: MY_PROVIDER_KEY   # the key is read from this variable
            timeout: 30
            max_retries: 0
          args: {temperature: 0.2}      # further constructor arguments
          # or, instead of options/args, config: {...}: the client's component config (dump_component())
        middleware:                     # outermost first
          - logging: {include_content: false}
          - cache: {store: memory, max_entries: 1000, store_ttl: 600}
          - retry: {max_retries: 3}
          - tool_loop: {tools: [...component dumps...], max_iterations: 8}
          - memory:                     # a MemoryMiddleware over a VectorMemory
              embedder: {provider: my.EmbeddingClient, config: {...}}   # component dumps
              store: {provider: my.VectorStore, config: {...}}
              top_k: 5                  # also min_score, token_budget, filter, chunk_size, chunk_overlap
          - {provider: my.Middleware, config: {}}   # any registered middleware component

    A cache's `store` is `memory` (the default; `max_entries` and `store_ttl` beside it, 1024 entries of one
    hour when not given, `store_ttl: null` for no expiry), a mapping of
    `InMemoryCacheStore` settings, or a store's component dump, such as
    `{provider: ext.redis.RedisCacheStore, config: {url: "redis://127.0.0.1:6379/0", password_env: P}}`.

    A secret written in the file is refused, at any depth: a field the component types as `SecretStr` (keys,
    header maps), an argument its provider declares secret (`credential`), an `Authorization`-like header, or a
    field named like one (`api_key`, `*_token`, ...). Name its environment variable with `<field>_env` instead.
    YAML needs PyYAML (`pip install pyyaml`); JSON needs nothing. Errors name the file and the field.
    """
    name, config = _source(source)
    try:
        return pipeline_from_config(config, environ=environ)
    except ConfigurationError as exc:
        raise _in_file(exc, name) from None


__all__ = ["PipelineCheck", "check_pipeline", "load_pipeline", "pipeline_from_config", "read_config_file"]
