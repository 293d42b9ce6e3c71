"""Model providers by short name (`openai`, `ollama`, `llama-cpp`, ...), found through entry points.

Each model distribution registers its clients under the `ext.providers` entry-point group
(`openai = "ext.models.openai:OpenAIChatCompletionClient"`), so the command never imports a provider it is
not asked for and a newly installed distribution appears without touching the command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from ext.core import ChatCompletionClient

from ._errors import CliError

PROVIDER_GROUP = "ext.providers"


@dataclass(frozen=True)
class KnownProvider:
    """A provider ext ships, for install hints when its distribution is missing."""

    distribution: str
    example: str
    auth: str


KNOWN_PROVIDERS: Mapping[str, KnownProvider] = {
    "openai": KnownProvider("ext-models-openai", "openai:gpt-4o-mini", "OPENAI_API_KEY"),
    "azure-openai": KnownProvider(
        "ext-models-openai",
        "azure-openai:DEPLOYMENT",
        "AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY, OPENAI_API_VERSION",
    ),
    "anthropic": KnownProvider("ext-models-anthropic", "anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    "bedrock": KnownProvider("ext-models-bedrock", "bedrock:MODEL_ID", "AWS credentials (environment or ~/.aws)"),
    "ollama": KnownProvider("ext-models-ollama", "ollama:llama3.2", "none (OLLAMA_HOST for a remote server)"),
    "azure-ai": KnownProvider("ext-models-azure-ai", "azure-ai:MODEL", "AZURE_AI_ENDPOINT, AZURE_AI_API_KEY"),
    "llama-cpp": KnownProvider("ext-models-llama-cpp", "llama-cpp:PATH.gguf", "none (runs in process)"),
}

# The config field that the MODEL part of `-m PROVIDER:MODEL` fills, in order of preference.
_MODEL_FIELDS = ("model", "model_path", "azure_deployment")
# Required settings some providers have and a command line rarely gives: a sensible value, overridable with -o.
_REQUIRED_DEFAULTS: Mapping[str, Any] = {"max_tokens": 1024}


@lru_cache(maxsize=1)
def installed_providers() -> Mapping[str, str]:
    """Short name -> `module:Class` for every installed provider."""
    return {ep.name: ep.value for ep in entry_points(group=PROVIDER_GROUP)}


def provider_class(name: str) -> type[Any]:
    """The client class of an installed provider, or a `CliError` saying what to install."""
    target = installed_providers().get(name)
    if target is None:
        known = KNOWN_PROVIDERS.get(name)
        installed = ", ".join(sorted(installed_providers())) or "none"
        if known is not None:
            raise CliError(
                f"provider {name!r} is not installed",
                hint=f"install {known.distribution} (installed providers: {installed})",
            )
        raise CliError(
            f"unknown provider {name!r}",
            hint=f"known providers: {', '.join(KNOWN_PROVIDERS)}; installed: {installed}",
        )
    module_name, _, attr = target.partition(":")
    try:
        return getattr(import_module(module_name), attr)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise CliError(f"provider {name!r} is registered but cannot be imported: {exc}") from exc


def parse_model_spec(spec: str) -> tuple[str, str]:
    """`PROVIDER:MODEL` split in two; the model part may itself hold colons (`ollama:llama3.2:1b`)."""
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise CliError(f"-m expects PROVIDER:MODEL, got {spec!r}", hint="for example -m openai:gpt-4o-mini")
    return provider, model


def model_field(cls: type[Any]) -> str:
    """Which config field of `cls` names the model."""
    fields = cls.component_config_schema.model_fields
    for name in _MODEL_FIELDS:
        if name in fields:
            return name
    raise CliError(f"{cls.__name__} has no model setting the command knows how to fill")


def build_client(spec: str, settings: Mapping[str, Any] | None = None) -> ChatCompletionClient:
    """A client for `PROVIDER:MODEL`, with `settings` (constructor keywords) laid over the defaults."""
    provider, model = parse_model_spec(spec)
    cls = provider_class(provider)
    schema = cls.component_config_schema
    kwargs: dict[str, Any] = {model_field(cls): model}
    for name, value in _REQUIRED_DEFAULTS.items():
        field = schema.model_fields.get(name)
        if field is not None and field.is_required():
            kwargs[name] = value
    kwargs.update(settings or {})
    client: ChatCompletionClient = cls(**kwargs)
    return client


def describe(cls: type[Any]) -> list[tuple[str, str, str]]:
    """(option, default, description) for each setting of a provider's config."""
    rows: list[tuple[str, str, str]] = []
    for name, field in cls.component_config_schema.model_fields.items():
        if name.endswith("_env"):
            continue
        default = "(required)" if field.is_required() else repr(field.get_default(call_default_factory=True))
        rows.append((name, default, (field.description or "").split("\n")[0]))
    return rows
