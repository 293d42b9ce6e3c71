"""Building clients and whole pipelines from configuration (SPEC section 5).

`build_client(provider, options, **args)` makes a ready client of any installed provider from `AIClientOptions`
and a provider name, through the `ext.components` entry points (core never imports a provider until a config
names it). `load_pipeline(path_or_mapping)` builds a client and its middleware from one YAML or JSON document.
Keys come from the environment (`api_key_env`, `password_env`, ...), never from the file in clear.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from ._component import ComponentModel, _import, load_component, registered_components
from ._errors import ComponentError, ConfigurationError
from ._options import AIClientOptions
from ._pipeline import ChatMiddleware, ChatPipeline

PROVIDERS: Mapping[str, tuple[str, str]] = {
    "openai": ("ext-models-openai", "ext.models.openai.OpenAIChatCompletionClient"),
    "azure_openai": ("ext-models-openai", "ext.models.openai.AzureOpenAIChatCompletionClient"),
    "anthropic": ("ext-models-anthropic", "ext.models.anthropic.AnthropicChatCompletionClient"),
    "bedrock": ("ext-models-bedrock", "ext.models.bedrock.AnthropicBedrockChatCompletionClient"),
    "ollama": ("ext-models-ollama", "ext.models.ollama.OllamaChatCompletionClient"),
    "llama_cpp": ("ext-models-llama-cpp", "ext.models.llama_cpp.LlamaCppChatCompletionClient"),
    "azure_ai": ("ext-models-azure-ai", "ext.models.azure_ai.AzureAIChatCompletionClient"),
}
"""Short provider names: the distribution to install and the client class it registers."""

# Where each AIClientOptions field goes, by the first constructor parameter of these names that exists.
_ENDPOINT_PARAMS = ("base_url", "endpoint", "azure_endpoint", "endpoint_url", "host")
_MODEL_PARAMS = ("model",)


def provider_class(provider: str, *, providers: Mapping[str, tuple[str, str]] = PROVIDERS) -> type[Any]:
    """The client class for a short provider name (`openai`, `anthropic`, ... see `PROVIDERS`; `providers`
    replaces that table) or a registered component path. A provider whose distribution is not installed is a
    `ConfigurationError` naming the `pip install` to run."""
    if not isinstance(provider, str) or not provider.strip():
        raise ConfigurationError("provider must be a non-empty string such as 'openai'")
    name = provider.strip()
    key = name.lower().replace("-", "_")
    registry = registered_components()
    if key in providers:
        distribution, path = providers[key]
        target = registry.get(path)
        if target is None:
            raise ConfigurationError(
                f"provider {name!r} needs the {distribution} distribution, which is not installed: "
                f"pip install {distribution}"
            )
    else:
        target = registry.get(name) or registry.get(name.replace(":", "."))
        if target is None:
            known = ", ".join(sorted(providers))
            raise ConfigurationError(
                f"unknown provider {name!r}: use one of {known}, or the path of a client an installed "
                "distribution registers under the 'ext.components' entry points"
            )
    try:
        cls = _import(target)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"provider {name!r} is registered but cannot be imported: {exc}") from exc
    if not isinstance(cls, type):
        raise ConfigurationError(f"provider {name!r} does not name a class")
    return cls


def build_client(
    provider: str,
    options: AIClientOptions | Mapping[str, Any] | None = None,
    /,
    **args: Any,
) -> Any:
    """A ready client of `provider` (a short name or a registered client path) from `options`.

    A client class may define `from_client_options(options, **args)`; otherwise the fields go to the
    constructor parameters of the same meaning: `default_model` to `model`; `endpoint` to the first of
    `base_url`, `endpoint`, `azure_endpoint`, `endpoint_url`, `host`; `api_key`, `timeout` and `max_retries` to
    their namesakes. A field the client has no parameter for is an error naming it. `args` are further
    constructor arguments (`max_tokens=...` for Anthropic, for example).
    """
    cls = provider_class(provider)
    if options is None:
        opts: AIClientOptions | None = None
    elif isinstance(options, AIClientOptions):
        opts = options
    elif isinstance(options, Mapping):
        try:
            opts = AIClientOptions.model_validate(dict(options))
        except ValidationError as exc:
            first = exc.errors(include_input=False, include_url=False)[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise ConfigurationError(f"options.{loc}: {first['msg']}") from None
    else:
        raise ConfigurationError(f"options must be AIClientOptions or a mapping, got {type(options).__name__}")
    factory = getattr(cls, "from_client_options", None)
    if opts is not None and callable(factory):
        return factory(opts, **args)
    kwargs = dict(args)
    if opts is not None:
        kwargs.update(_constructor_arguments(cls, opts, provider, set(args)))
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigurationError(f"provider {provider!r}: {exc}") from None


def _constructor_arguments(cls: type[Any], options: AIClientOptions, provider: str, given: set[str]) -> dict[str, Any]:
    params = inspect.signature(cls).parameters
    out: dict[str, Any] = {}

    def place(field: str, value: Any, candidates: Sequence[str]) -> None:
        if value is None:
            return
        for name in candidates:
            if name in params:
                if name not in given:
                    out[name] = value
                return
        raise ConfigurationError(
            f"options.{field}: provider {provider!r} ({cls.__name__}) takes no {field} (it has none of "
            f"the parameters {', '.join(candidates)})"
        )

    place("default_model", options.default_model, _MODEL_PARAMS)
    place("endpoint", options.endpoint, _ENDPOINT_PARAMS)
    place("api_key", options.api_key, ("api_key",))
    place("timeout", options.timeout, ("timeout",))
    place("max_retries", options.max_retries, ("max_retries",))
    return out


# --- pipelines from a document ---------------------------------------------------------------------------

_SECRET_NAMES = ("api_key", "password", "secret", "token", "aws_access_key", "aws_secret_key", "azure_ad_token")


def _is_secret_name(key: str) -> bool:
    lowered = key.lower()
    if lowered.endswith("_env"):
        return False
    return lowered in _SECRET_NAMES or lowered.endswith(("_api_key", "_secret", "_token", "_password", "_secret_key"))


def _refuse_secrets(value: Any, where: str) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if isinstance(key, str) and _is_secret_name(key) and item not in (None, ""):
                raise ConfigurationError(
                    f"{path}: secrets are not read from config files; name the environment variable that holds "
                    f"it instead ({key}_env: VARIABLE)"
                )
            _refuse_secrets(item, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_secrets(item, f"{where}[{index}]")


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML (`.yaml`, `.yml`; needs PyYAML) or JSON (anything else) file as a dict."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read config file {str(file)!r}: {exc.strerror}") from None
    if file.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigurationError(
                f"{file.name} is YAML, and reading YAML needs PyYAML, which is not installed: pip install pyyaml "
                "(or write the config as JSON)"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"{file.name} is not valid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{file.name} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{file.name} must hold a mapping at the top level, got {type(data).__name__}")
    return data


def _env_secret(section: Mapping[str, Any], field: str, where: str, environ: Mapping[str, str]) -> SecretStr | None:
    name = section.get(f"{field}_env")
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{where}.{field}_env must name an environment variable")
    value = environ.get(name)
    if not value:
        raise ConfigurationError(f"{where}.{field}_env: the environment variable {name} is not set")
    return SecretStr(value)


def _build_client_section(section: Any, environ: Mapping[str, str]) -> Any:
    if not isinstance(section, Mapping):
        raise ConfigurationError("client must be a mapping with a 'provider'")
    unknown = set(section) - {"provider", "options", "args", "config", "label", "version", "component_type"}
    if unknown:
        raise ConfigurationError(f"client: unknown keys {sorted(unknown)}; expected provider, options, args or config")
    provider = section.get("provider")
    if not isinstance(provider, str):
        raise ConfigurationError("client.provider must be a provider name such as 'openai'")
    if "config" in section:
        if "options" in section or "args" in section:
            raise ConfigurationError("client: give either config (a component config) or options/args, not both")
        cls = provider_class(provider)
        dump = ComponentModel(provider=f"{cls.__module__}.{cls.__qualname__}", config=dict(section["config"]))
        return load_component(dump, allow=[cls])
    options = dict(section.get("options") or {})
    api_key = _env_secret(options, "api_key", "client.options", environ)
    api_key_env = options.pop("api_key_env", None)
    if api_key is not None:
        options["api_key"] = api_key
    args = section.get("args") or {}
    if not isinstance(args, Mapping):
        raise ConfigurationError("client.args must be a mapping of constructor arguments")
    args = dict(args)
    if api_key_env is not None and "api_key_env" not in args:
        params = inspect.signature(provider_class(provider)).parameters
        if "api_key_env" in params:
            args["api_key_env"] = api_key_env  # so the client's own dump names the variable again
    return build_client(provider, options or None, **args)


def _build_middleware(entry: Any, index: int, environ: Mapping[str, str]) -> ChatMiddleware:
    where = f"middleware[{index}]"
    if isinstance(entry, str):
        entry = {entry: {}}
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"{where} must be a mapping such as {{logging: {{}}}}")
    if "provider" in entry:
        try:
            return load_component(dict(entry), ChatMiddleware)
        except ComponentError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
    if len(entry) != 1:
        raise ConfigurationError(f"{where} must have one key (logging, retry, cache or tool_loop), got {sorted(entry)}")
    ((kind, settings),) = entry.items()
    settings = dict(settings or {})
    from ._cache import CacheMiddleware, InMemoryCacheStore
    from ._middleware import LoggingMiddleware, RetryMiddleware
    from ._retry import RetryPolicy
    from ._tool_loop import ToolLoop

    try:
        if kind == "logging":
            return LoggingMiddleware(**settings)
        if kind == "retry":
            return RetryMiddleware(RetryPolicy(**settings))
        if kind == "cache":
            store = settings.pop("store", None)
            if store is None or store == "memory":
                memory = {"max_entries": settings.pop("max_entries")} if "max_entries" in settings else {}
                if "store_ttl" in settings:  # absent: the store's default; null: until evicted
                    memory["ttl"] = settings.pop("store_ttl")
                built: Any = InMemoryCacheStore(**memory)
            elif isinstance(store, Mapping) and "provider" in store:
                built = load_component(dict(store))
            elif isinstance(store, Mapping):
                built = InMemoryCacheStore(**store)
            else:
                raise ConfigurationError(f"{where}.cache.store must be 'memory', store settings or a component")
            return CacheMiddleware(built, close_store=True, **settings)
        if kind == "tool_loop":
            tools: list[Any] = [load_component(t) for t in settings.pop("tools", [])]
            return ToolLoop(tools, **settings)
    except (TypeError, ValueError, ComponentError) as exc:  # ConfigurationError is a ValueError
        raise ConfigurationError(f"{where}.{kind}: {exc}") from None
    raise ConfigurationError(f"{where}: unknown middleware {kind!r}; expected logging, retry, cache or tool_loop")


def pipeline_from_config(config: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> ChatPipeline:
    """A `ChatPipeline` from a config document (see `load_pipeline` for its shape)."""
    if not isinstance(config, Mapping):
        raise ConfigurationError(f"a pipeline config must be a mapping, got {type(config).__name__}")
    unknown = set(config) - {"client", "middleware"}
    if unknown:
        raise ConfigurationError(f"unknown keys {sorted(unknown)} in the pipeline config; expected client, middleware")
    _refuse_secrets(config, "")
    env = os.environ if environ is None else environ
    if "client" not in config:
        raise ConfigurationError("the pipeline config has no client")
    middleware_entries = config.get("middleware") or []
    if not isinstance(middleware_entries, list):
        raise ConfigurationError("middleware must be a list, outermost first")
    middleware = [_build_middleware(entry, i, env) for i, entry in enumerate(middleware_entries)]
    client = _build_client_section(config["client"], env)
    return ChatPipeline(client, middleware)


def load_pipeline(
    source: str | os.PathLike[str] | Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> ChatPipeline:
    """A client and its middleware from a YAML or JSON file (or an already parsed mapping), in one call::

        client:
          provider: openai              # openai, azure_openai, anthropic, bedrock, ollama, llama_cpp, azure_ai,
                                        # or a registered client path
          options:                      # AIClientOptions
            endpoint: https://api.openai.com/v1
            default_model: gpt-4o-mini
            api_key_env: OPENAI_API_KEY # the key is read from this variable
            timeout: 30
            max_retries: 0
          args: {temperature: 0.2}      # further constructor arguments
          # or, instead of options/args, config: {...}: the client's component config (dump_component())
        middleware:                     # outermost first
          - logging: {include_content: false}
          - cache: {store: memory, max_entries: 1000, store_ttl: 600}
          - retry: {max_retries: 3}
          - tool_loop: {tools: [...component dumps...], max_iterations: 8}
          - {provider: my.Middleware, config: {}}   # any registered middleware component

    A cache's `store` is `memory` (the default; `max_entries` and `store_ttl` beside it, 1024 entries of one
    hour when not given, `store_ttl: null` for no expiry), a mapping of
    `InMemoryCacheStore` settings, or a store's component dump, such as
    `{provider: ext.cache.redis.RedisCacheStore, config: {url: "redis://127.0.0.1:6379/0", password_env: P}}`.

    A secret written in the file (`api_key`, `password`, `*_token`, ...) is refused: name its variable with
    `<field>_env`. YAML needs PyYAML (`pip install pyyaml`); JSON needs nothing.
    """
    if isinstance(source, Mapping):
        return pipeline_from_config(source, environ=environ)
    return pipeline_from_config(read_config_file(source), environ=environ)
