"""Model providers by short name (`openai`, `ollama`, `llama-cpp`, ...), resolved through ext-core.

ext-core's `provider_class` maps a short name to the client class its distribution registers under the
`ext.components` entry points (and says which distribution to install when it is missing), so the command
never imports a provider it is not asked for. A registered client path (`mypkg.MyClient`) works as a
provider too. This module adds what a command line needs on top: which constructor argument the MODEL part
of `-m PROVIDER:MODEL` fills, and what to show in `ext models`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from ext.core import PROVIDERS, ChatCompletionClient, ConfigurationError, build_client, provider_class

from ._errors import CliError

# For `ext models`: an example -m value and how each provider authenticates.
PROVIDER_NOTES: Mapping[str, tuple[str, str]] = {
    "openai": ("openai:gpt-4o-mini", "OPENAI_API_KEY (OPENAI_BASE_URL for another endpoint)"),
    "azure_openai": ("azure-openai:DEPLOYMENT", "AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY, OPENAI_API_VERSION"),
    "anthropic": ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    "bedrock": ("bedrock:MODEL_ID", "AWS credentials (environment or ~/.aws)"),
    "ollama": ("ollama:llama3.2", "none (OLLAMA_HOST for another server)"),
    "azure_ai": ("azure-ai:MODEL", "AZURE_AI_ENDPOINT, AZURE_AI_API_KEY"),
    "llama_cpp": ("llama-cpp:PATH.gguf", "none (runs in process)"),
}

# The constructor argument the MODEL part fills, in order of preference.
_MODEL_PARAMS = ("model_path", "azure_deployment", "model")
# Settings some providers require and a command line rarely gives: a sensible value, overridable with -o.
_REQUIRED_DEFAULTS: Mapping[str, Any] = {"max_tokens": 1024}


def display_name(key: str) -> str:
    """`azure_openai` -> `azure-openai`: the spelling the command line uses."""
    return key.replace("_", "-")


def client_class(provider: str) -> type[Any]:
    """The client class of `provider`, or a `CliError` saying what to install."""
    try:
        return provider_class(provider)
    except ConfigurationError as exc:
        installed = ", ".join(display_name(k) for k in installed_providers()) or "none"
        raise CliError(str(exc), hint=f"installed providers: {installed}") from None


def installed_providers() -> list[str]:
    """The short names whose distribution is installed."""
    found = []
    for key in PROVIDERS:
        try:
            provider_class(key)
        except ConfigurationError:
            continue
        found.append(key)
    return found


def parse_model_spec(spec: str) -> tuple[str, str]:
    """`PROVIDER:MODEL` split in two; the model part may itself hold colons (`ollama:llama3.2:1b`)."""
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise CliError(f"-m expects PROVIDER:MODEL, got {spec!r}", hint="for example -m openai:gpt-4o-mini")
    return provider, model


def model_parameter(cls: type[Any]) -> str:
    """Which constructor argument of `cls` names the model (a GGUF file for llama.cpp, a deployment for Azure)."""
    params = inspect.signature(cls).parameters
    for name in _MODEL_PARAMS:
        if name in params:
            return name
    raise CliError(f"{cls.__name__} takes no model argument the command knows how to fill")


def make_client(spec: str, settings: Mapping[str, Any] | None = None) -> ChatCompletionClient:
    """A client for `PROVIDER:MODEL` through ext-core's `build_client`, with `settings` as further arguments."""
    provider, model = parse_model_spec(spec)
    cls = client_class(provider)
    params = inspect.signature(cls).parameters
    args: dict[str, Any] = {model_parameter(cls): model}
    for name, value in _REQUIRED_DEFAULTS.items():
        param = params.get(name)
        if param is not None and param.default is inspect.Parameter.empty:
            args[name] = value
    args.update(settings or {})
    client: ChatCompletionClient = build_client(provider, None, **args)
    return client


def describe(cls: type[Any]) -> list[tuple[str, str, str]]:
    """(option, default, description) for each setting of a provider's component config."""
    rows: list[tuple[str, str, str]] = []
    for name, field in cls.component_config_schema.model_fields.items():
        if name.endswith("_env"):
            continue
        default = "(required)" if field.is_required() else repr(field.get_default(call_default_factory=True))
        rows.append((name, default, (field.description or "").split("\n")[0]))
    return rows
