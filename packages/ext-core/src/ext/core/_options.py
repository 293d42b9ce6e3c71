"""Provider-neutral option classes, validated on construction."""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator


class ChatOptions(BaseModel):
    """Per-call options any client accepts. Each client maps what its provider supports and raises
    `UnsupportedOptionError` for what it cannot honour (for example a temperature above 1 for Anthropic).
    Unknown fields are an error, so a typo never silently does nothing.
    """

    # protected_namespaces=(): pydantic before 2.10 warns about `model_id` (the "model_" prefix) on every schema
    # build; the field shadows nothing of BaseModel's.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, protected_namespaces=())

    temperature: float | None = Field(default=None, ge=0.0, le=2.0, description="Sampling temperature, 0.0 to 2.0.")
    max_tokens: int | None = Field(default=None, gt=0, description="Most tokens to generate.")
    top_p: float | None = Field(default=None, ge=0.0, le=1.0, description="Nucleus sampling mass, 0.0 to 1.0.")
    top_k: int | None = Field(default=None, gt=0, description="Sample from the k most likely tokens.")
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0, description="-2.0 to 2.0.")
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0, description="-2.0 to 2.0.")
    stop_sequences: list[str] | None = Field(default=None, description="Stop when any of these is generated.")
    seed: int | None = Field(default=None, description="Seed for reproducible sampling where supported.")
    model_id: str | None = Field(default=None, min_length=1, description="Overrides the client's model.")

    @field_validator("stop_sequences")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        return check_stop_sequences(value)

    def merged_over(self, base: ChatOptions | None) -> ChatOptions:
        """These options with unset fields taken from `base` (the client's defaults)."""
        if base is None:
            return self
        return base.model_copy(update=self.model_dump(exclude_none=True))

    def set_fields(self) -> dict[str, object]:
        """Only the options that were given."""
        return self.model_dump(exclude_none=True)


def merge_default_options(default_options: Mapping[str, object] | None, **fields: object) -> ChatOptions | None:
    """A client's `default_options` with its own option arguments (`temperature=...`, None = not given)
    laid over them; None when neither gives anything. Errors name the field."""
    from ._errors import ConfigurationError

    given = {k: v for k, v in fields.items() if v is not None}
    try:
        base = ChatOptions.model_validate(default_options) if default_options else None
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigurationError(f"default_options.{loc}: {first['msg']}") from None
    if not given:
        return base
    return ChatOptions.model_validate(given).merged_over(base)


class ChatMessage(BaseModel):
    """A plain role + text message, for configs and simple chat front ends."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    role: Literal["system", "user", "assistant", "tool"]
    content: str


def _env(prefix: str, name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(f"{prefix}{name}")
    return value if value else None


class AIClientOptions(BaseModel):
    """Where and how to reach a model service, for building clients from config or the environment."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True, defer_build=True)

    endpoint: str = Field(min_length=1, description="Base URL of the service (http or https).")
    api_key: SecretStr | None = Field(default=None, description="Key for the service; never printed.")
    default_model: str = Field(min_length=1, description="Model used when a call does not name one.")
    timeout: float | None = Field(default=None, gt=0, description="Seconds before a request fails.")
    max_retries: int | None = Field(default=None, ge=0, description="Retries for rate limits and transient errors.")

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("endpoint must be an http:// or https:// URL")
        return value

    @classmethod
    def from_env(cls, prefix: str = "EXT_AI_", environ: Mapping[str, str] | None = None) -> AIClientOptions:
        """Options from `{prefix}ENDPOINT`, `{prefix}API_KEY`, `{prefix}DEFAULT_MODEL`, `{prefix}TIMEOUT`
        and `{prefix}MAX_RETRIES`."""
        env = os.environ if environ is None else environ
        data: dict[str, object] = {}
        for field, name in (
            ("endpoint", "ENDPOINT"),
            ("api_key", "API_KEY"),
            ("default_model", "DEFAULT_MODEL"),
            ("timeout", "TIMEOUT"),
            ("max_retries", "MAX_RETRIES"),
        ):
            value = _env(prefix, name, env)
            if value is not None:
                data[field] = value
        return cls.model_validate(data)


class VectorStoreOptions(BaseModel):
    """Where a vector store lives and the shape of its collection."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True, defer_build=True)

    endpoint: str = Field(min_length=1, description="URL of the vector store.")
    api_key: SecretStr | None = Field(default=None, description="Key for the store; never printed.")
    collection_name: str = Field(min_length=1, description="Collection (index) to use.")
    vector_size: int = Field(gt=0, description="Dimensions of each vector.")


_API_VERSION = re.compile(r"^(\d{4}-\d{2}-\d{2})(-preview)?$")


def check_api_version(value: str, *, example: str = "2024-10-21") -> str:
    """`value` if it is an Azure API version (a real date YYYY-MM-DD, optionally `-preview`), else ValueError
    (naming `api_version`, with `example` as the form to use)."""
    match = _API_VERSION.match(value) if isinstance(value, str) else None
    if match is not None:
        try:
            datetime.date.fromisoformat(match.group(1))
        except ValueError:
            match = None
    if match is None:
        raise ValueError(f"api_version must be a date like {example} (YYYY-MM-DD, optionally -preview), got {value!r}")
    return value


def check_stop_sequences(value: list[str] | None, field: str = "stop_sequences") -> list[str] | None:
    """`value` unless it holds an empty string (ValueError naming `field`): APIs reject an empty stop
    sequence, and where one is accepted it would end every reply before its first token."""
    if value is not None and any(not s for s in value):
        raise ValueError(f"{field} must not contain empty strings")
    return value


_HTTP_URL = re.compile(r"^https?://[^\s/]+")


def check_http_url(value: str, field: str) -> str:
    """`value` if it is an http:// or https:// URL with a host, else ValueError naming `field`; checked
    before any client is built so a typo fails here, not as a connection error on the first call."""
    if not _HTTP_URL.match(value):
        raise ValueError(f"{field} must be an http:// or https:// URL")
    return value
