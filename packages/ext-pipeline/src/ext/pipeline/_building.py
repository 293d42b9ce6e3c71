"""Building clients from configuration (SPEC section 5).

`build_client(provider, options, **args)` makes a ready client of any installed provider from `AIClientOptions`
and a provider name. Providers declare themselves (`ProviderInfo`, `ext.providers` entry points): core reads
their declarations for where the model and the endpoint go, and never imports a provider until a config names
it. `plan_client` checks the client section of a pipeline file without building anything (`_pipeline_config`).
Keys come from the environment (`api_key_env`, ...), never from the file in clear.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import SecretStr, ValidationError

from ext.core import (
    AIClientOptions,
    ComponentModel,
    ConfigurationError,
    ProviderInfo,
    import_object,
    normalize_provider_name,
    provider_infos,
    provider_of_class,
    registered_components,
    unknown_provider_message,
    validate_config,
)

from ._config_secrets import refuse_literal_secrets

# For a client given by its path rather than a declared provider: where AIClientOptions fields go.
_GENERIC_ENDPOINT_PARAMS = ("base_url", "endpoint")
_GENERIC_MODEL_PARAMS = ("model",)


def provider_class(provider: str, *, providers: Mapping[str, ProviderInfo] | None = None) -> type[Any]:
    """The client class of a provider: a short name its distribution declares under the `ext.providers` entry
    points (either spelling, `llama-cpp` or `llama_cpp`; `providers` replaces the installed declarations), or the
    path of a client registered under `ext.components`. Anything else is a `ConfigurationError` listing the
    installed providers and how to install another."""
    if not isinstance(provider, str) or not provider.strip():
        raise ConfigurationError("provider must be a non-empty provider name (`ext models` lists the installed ones)")
    table = provider_infos() if providers is None else providers
    info = table.get(normalize_provider_name(provider))
    if info is not None:
        return info.load_client_class()
    name = provider.strip()
    registry = registered_components()
    target = registry.get(name) or registry.get(name.replace(":", "."))
    if target is None:
        raise ConfigurationError(unknown_provider_message(name, table))
    try:
        cls = import_object(target)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"provider {name!r} is registered but cannot be imported: {exc}") from exc
    if not isinstance(cls, type):
        raise ConfigurationError(f"provider {name!r} does not name a class")
    return cls


def _declaration(provider: str, cls: type[Any]) -> ProviderInfo | None:
    """The declaration of `provider` given by short name or by its client's path."""
    info = provider_infos().get(normalize_provider_name(provider))
    return info if info is not None else provider_of_class(cls)


def build_client(
    provider: str,
    options: AIClientOptions | Mapping[str, Any] | None = None,
    /,
    **args: Any,
) -> Any:
    """A ready client of `provider` (a short name or a registered client path) from `options`.

    A client class may define `from_client_options(options, **args)`; otherwise the fields go to the
    constructor parameters its provider declares: `default_model` to the model parameter, `endpoint` to the
    endpoint parameter (for a client given by path: `model`, and `base_url` or `endpoint`); `api_key`, `timeout`
    and `max_retries` to their namesakes. With no endpoint given, the provider's endpoint environment variable
    (`endpoint_env` of its declaration) is used when set. A field the client has no parameter for is an error naming it.
    `args` are further constructor arguments (`max_tokens=...` for Anthropic, for example).
    """
    return _build(provider, _client_options(options, "options"), dict(args), os.environ)


def _client_options(options: AIClientOptions | Mapping[str, Any] | None, where: str) -> AIClientOptions | None:
    if options is None or isinstance(options, AIClientOptions):
        return options
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"{where} must be AIClientOptions or a mapping, got {type(options).__name__}")
    try:
        return AIClientOptions.model_validate(dict(options))
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigurationError(f"{where}.{loc}: {first['msg']}") from None


def _build(provider: str, opts: AIClientOptions | None, args: dict[str, Any], environ: Mapping[str, str]) -> Any:
    cls = provider_class(provider)
    factory = getattr(cls, "from_client_options", None)
    if opts is not None and callable(factory):
        return factory(opts, **args)
    kwargs = _arguments(provider, cls, opts, args, environ)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigurationError(f"provider {provider!r}: {exc}") from None


def _arguments(
    provider: str, cls: type[Any], opts: AIClientOptions | None, args: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, Any]:
    """The constructor arguments: `args`, the options placed by the provider's declaration, and the endpoint
    from its environment variable when none is given."""
    info = _declaration(provider, cls)
    model_params = (info.model_parameter,) if info is not None else _GENERIC_MODEL_PARAMS
    endpoint_params: tuple[str, ...] = _GENERIC_ENDPOINT_PARAMS
    if info is not None:
        endpoint_params = (info.endpoint_parameter,) if info.endpoint_parameter else ()
    kwargs = dict(args)
    if opts is not None:
        kwargs.update(_constructor_arguments(cls, opts, provider, set(args), model_params, endpoint_params))
    if (
        info is not None
        and info.endpoint_parameter
        and info.endpoint_env
        and kwargs.get(info.endpoint_parameter) is None
    ):
        from_env = environ.get(info.endpoint_env)
        if from_env:
            kwargs[info.endpoint_parameter] = from_env
    return kwargs


def _constructor_arguments(
    cls: type[Any],
    options: AIClientOptions,
    provider: str,
    given: set[str],
    model_params: Sequence[str],
    endpoint_params: Sequence[str],
) -> dict[str, Any]:
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
        takes = f"it has none of the parameters {', '.join(candidates)}" if candidates else "it declares none"
        raise ConfigurationError(f"options.{field}: provider {provider!r} ({cls.__name__}) takes no {field} ({takes})")

    place("default_model", options.default_model, model_params)
    place("endpoint", options.endpoint, endpoint_params)
    place("api_key", options.api_key, ("api_key",))
    place("timeout", options.timeout, ("timeout",))
    place("max_retries", options.max_retries, ("max_retries",))
    return out


# --- the client section of a pipeline file ---------------------------------------------------------------

_CLIENT_KEYS = {"provider", "options", "args", "config", "label", "version", "component_type"}


class ClientPlan:
    """A client section read and checked, not built: what `ext config check` reports and `load_pipeline` builds."""

    def __init__(
        self,
        provider: str,
        cls: type[Any],
        *,
        config: Any = None,
        options: AIClientOptions | None = None,
        args: Mapping[str, Any] | None = None,
        model: str | None = None,
    ) -> None:
        self.provider = provider
        self.cls = cls
        self.config = config
        self.options = options
        self.args = dict(args or {})
        self.model = model

    def build(self, environ: Mapping[str, str]) -> Any:
        if self.config is not None:
            return self.cls._from_config(self.config)
        return _build(self.provider, self.options, dict(self.args), environ)


def _mapping(value: Any, where: str, expected: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{where} must be a mapping of {expected}, got {type(value).__name__}")
    return dict(value)


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


def _component_schema(provider: str) -> Any:
    """The config model of a registered component, for checking secrets in nested dumps (None if unknown)."""
    registry = registered_components()
    target = registry.get(provider) or registry.get(provider.replace(":", "."))
    if target is None:
        return None
    try:
        cls = import_object(target)
    except (ImportError, AttributeError):
        return None
    return getattr(cls, "component_config_schema", None)


def check_secrets(value: Any, where: str, schema: Any = None, secret_fields: Sequence[str] = ()) -> None:
    """Refuse a secret written literally in `value` (see `_config_secrets`), nested component dumps included."""
    refuse_literal_secrets(value, where, schema, secret_fields=secret_fields, component_schema=_component_schema)


def plan_client(section: Any, environ: Mapping[str, str]) -> ClientPlan:
    """The client section checked (names, shapes, secrets, environment variables) without building anything."""
    if not isinstance(section, Mapping):
        raise ConfigurationError(f"client must be a mapping with a 'provider', got {type(section).__name__}")
    unknown = set(section) - _CLIENT_KEYS
    if unknown:
        raise ConfigurationError(f"client: unknown keys {sorted(unknown)}; expected provider, options, args or config")
    provider = section.get("provider")
    if not isinstance(provider, str) or not provider.strip():
        raise ConfigurationError("client.provider must be a provider name (`ext models` lists the installed ones)")
    if "config" in section:
        if "options" in section or "args" in section:
            raise ConfigurationError("client: give either config (a component config) or options/args, not both")
        config = _mapping(section["config"], "client.config", "the client's config fields")
        cls, info, schema, secret_fields = _client_class(provider)
        check_secrets(config, "client.config", schema, secret_fields)
        dump = ComponentModel(provider=f"{cls.__module__}.{cls.__qualname__}", config=config)
        loaded = _validated_config(cls, dump)
        model_param = info.model_parameter if info is not None else "model"
        return ClientPlan(_shown(provider, info), cls, config=loaded, model=getattr(loaded, model_param, None))
    options = _mapping(section.get("options"), "client.options", "AIClientOptions fields")
    args = _mapping(section.get("args"), "client.args", "constructor arguments")
    api_key = _env_secret(options, "api_key", "client.options", environ)
    api_key_env = options.pop("api_key_env", None)
    if api_key is not None:
        options["api_key"] = api_key
    cls, info, schema, secret_fields = _client_class(provider)
    check_secrets(args, "client.args", schema, secret_fields)
    params = inspect.signature(cls).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for name in args:
        if name not in params and not takes_any:
            raise ConfigurationError(
                f"client.args.{name}: {cls.__name__} takes no argument {name!r} (it takes {', '.join(params)})"
            )
    if api_key_env is not None and "api_key_env" not in args and "api_key_env" in params:
        args["api_key_env"] = api_key_env  # so the client's own dump names the variable again
    opts = _client_options(options or None, "client.options")
    placed = _arguments(provider, cls, opts, args, environ)
    model_param = info.model_parameter if info is not None else "model"
    model = placed.get(model_param)
    return ClientPlan(
        _shown(provider, info), cls, options=opts, args=args, model=model if isinstance(model, str) else None
    )


def _shown(provider: str, info: ProviderInfo | None) -> str:
    """The provider's canonical short name when it is declared (`my_provider` -> `my-provider`), else as written."""
    return info.name if info is not None else provider.strip()


def _client_class(provider: str) -> tuple[type[Any], ProviderInfo | None, Any, tuple[str, ...]]:
    """The client class, its declaration, its config schema and the arguments it declares secret."""
    cls = provider_class(provider)
    info = _declaration(provider, cls)
    return cls, info, getattr(cls, "component_config_schema", None), info.secret_arguments if info else ()


def _validated_config(cls: type[Any], dump: ComponentModel) -> Any:
    """The component config of `dump` validated against `cls`'s schema, as `load_component` does, unbuilt."""
    if not hasattr(cls, "component_config_schema"):
        raise ConfigurationError(f"client.config: {cls.__name__} is not a component with a config")
    return validate_config(cls.component_config_schema, dump.config, "client.config")


__all__ = ["ClientPlan", "build_client", "check_secrets", "plan_client", "provider_class"]
