"""Model providers by short name (`openai`, `ollama`, `llama-cpp`, ...), as each provider's distribution declares
itself (`ext.core.ProviderInfo`, under the `ext.providers` entry points).

The command keeps no table of its own: which constructor argument the MODEL part of `-m PROVIDER:MODEL`
fills, where `--endpoint` goes and which environment variable it defaults to, what `ext models` shows and
how to install a provider all come from the declaration. A registered client path (`mypkg.MyClient`) works as a
provider too. Both spellings of a name are accepted (`llama-cpp`, `llama_cpp`); the command shows hyphens.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ext.core import ChatCompletionClient, ConfigurationError, ProviderInfo, normalize_provider_name, provider_infos
from ext.pipeline import build_client, provider_class

from ._errors import CliError


def installed_providers() -> Mapping[str, ProviderInfo]:
    """Every installed provider's declaration, by short name."""
    return provider_infos()


def declaration(provider: str) -> ProviderInfo | None:
    return installed_providers().get(normalize_provider_name(provider))


def client_class(provider: str) -> type[Any]:
    """The client class of `provider`, or a `CliError` saying what to install."""
    try:
        return provider_class(provider)
    except ConfigurationError as exc:
        installed = ", ".join(installed_providers()) or "none"
        raise CliError(str(exc), hint=f"installed providers: {installed} (ext models lists them)") from None


def parse_model_spec(spec: str) -> tuple[str, str]:
    """`PROVIDER:MODEL` split in two; the model part may itself hold colons (`ollama:llama3.2:1b`)."""
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise CliError(f"-m expects PROVIDER:MODEL, got {spec!r}", hint="for example -m openai:gpt-4o-mini")
    return provider, model


def model_parameter(provider: str, cls: type[Any]) -> str:
    """Which constructor argument names the model: the provider's declaration says (a GGUF file for llama.cpp, a
    deployment for Azure OpenAI); a client given by path takes `model`."""
    info = declaration(provider)
    name = info.model_parameter if info is not None else "model"
    if name not in inspect.signature(cls).parameters:
        raise CliError(f"{cls.__name__} takes no {name!r} argument for the MODEL part of -m")
    return name


def make_client(
    spec: str, settings: Mapping[str, Any] | None = None, *, endpoint: str | None = None
) -> ChatCompletionClient:
    """A client for `PROVIDER:MODEL` through ext-core's `build_client` (which takes the endpoint from the
    provider's environment variable when `endpoint` is None), with `settings` as further arguments."""
    provider, model = parse_model_spec(spec)
    cls = client_class(provider)
    info = declaration(provider)
    params = inspect.signature(cls).parameters
    args: dict[str, Any] = {model_parameter(provider, cls): model}
    if info is not None:
        for name, value in info.required_arguments.items():
            if name in params:
                args[name] = value
    if endpoint is not None:
        if info is None or info.endpoint_parameter is None:
            raise CliError(f"--endpoint: provider {provider!r} takes no endpoint", hint="leave --endpoint out")
        args[info.endpoint_parameter] = endpoint
    args.update(settings or {})
    try:
        client: ChatCompletionClient = build_client(provider, None, **args)
    except ConfigurationError as exc:
        raise CliError(str(exc), hint=_auth_hint(info)) from None
    return client


def _auth_hint(info: ProviderInfo | None) -> str | None:
    if info is None:
        return None
    endpoint = f"; --endpoint or {info.endpoint_env} for the endpoint" if info.endpoint_env else ""
    return f"{info.name} reads {info.auth}{endpoint}"


def describe(cls: type[Any]) -> list[tuple[str, str, str]]:
    """(option, default, description) for each setting of a provider's component config."""
    rows: list[tuple[str, str, str]] = []
    for name, field in cls.component_config_schema.model_fields.items():
        if name.endswith("_env"):
            continue
        default = "(required)" if field.is_required() else repr(field.get_default(call_default_factory=True))
        rows.append((name, default, (field.description or "").split("\n")[0]))
    return rows
