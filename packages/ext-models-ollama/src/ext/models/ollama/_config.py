"""The client's configuration model (what `dump_component` writes and `load_component` reads).

Headers are treated as secrets (a remote Ollama sits behind a proxy that wants a token): values given directly are
`SecretStr` and a config holding them cannot be dumped; `headers_env` names, per header, the environment variable
its value is read from, and that is what a dump keeps.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional, Union

import ollama
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ext.core import ChatOptions, merge_default_options

__all__ = ["DEFAULT_HOST", "DEFAULT_TIMEOUT", "OllamaClientConfig", "ThinkSetting"]

DEFAULT_HOST = "http://localhost:11434"
DEFAULT_TIMEOUT = 300.0

ThinkSetting = Union[bool, Literal["low", "medium", "high"]]
"""Ollama's `think`: on/off, or a level for models that take one (gpt-oss)."""

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Set by the client from the call's ChatOptions and the sampling fields; `options` may not set them twice.
_MAPPED_OPTIONS = frozenset({"temperature", "top_p", "top_k", "seed", "stop", "frequency_penalty", "presence_penalty"})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_option_names(options: dict[str, Any], where: str) -> None:
    """Ollama option names are the SDK's `ollama.Options` fields; anything else is a typo Ollama would ignore."""
    known = ollama.Options.model_fields
    unknown = sorted(name for name in options if name not in known)
    if unknown:
        raise ValueError(f"{where}: unknown Ollama option(s) {unknown}; known: {sorted(known)}")


class OllamaClientConfig(BaseModel):
    """`OllamaChatCompletionClient` configuration."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    model: str = Field(min_length=1, description="Model name as Ollama lists it, e.g. llama3.2 or qwen3:8b.")
    host: Optional[str] = Field(
        None, description="Ollama's URL; None reads OLLAMA_HOST, else http://localhost:11434 (forms as the SDK)."
    )
    temperature: Optional[float] = Field(None, ge=0.0, le=2.0, description="Sampling temperature.")
    top_p: Optional[float] = Field(None, ge=0.0, le=1.0, description="Nucleus sampling mass.")
    top_k: Optional[int] = Field(None, gt=0, description="Sample from the k most likely tokens.")
    num_ctx: Optional[int] = Field(None, gt=0, description="Context window Ollama allocates (also the token limit).")
    num_predict: Optional[int] = Field(
        None, ge=-2, description="Most tokens to generate (-1 no limit, -2 fill the context); max_tokens wins."
    )
    repeat_penalty: Optional[float] = Field(None, ge=0.0, description="Penalty for repeated tokens.")
    seed: Optional[int] = Field(None, description="Seed for reproducible sampling.")
    options: Optional[dict[str, Any]] = Field(
        None, description="Other Ollama options (mirostat, num_gpu, ...), by the names of ollama.Options."
    )
    think: Optional[ThinkSetting] = Field(None, description="Thinking: True/False or a level; None sends nothing.")
    tool_calling: Optional[Literal["native", "constrained", "prompt"]] = Field(
        None,
        description="How tools are called: 'native' (Ollama's tools), 'constrained' (tools described in a system "
        "message, the reply held to the call JSON by `format` as a JSON schema), 'prompt' (the same system message, "
        "no constraint, the answer read tolerantly). None: 'constrained' for a model known to lack native tool "
        "calling (the model table), else 'native'.",
    )
    keep_alive: Optional[Union[float, str]] = Field(
        None, description="How long Ollama keeps the model loaded after a call (e.g. '5m', 0, -1)."
    )
    headers: Optional[dict[str, SecretStr]] = Field(
        None, description="Headers sent with every request, as values (secrets: such a client cannot be dumped)."
    )
    headers_env: Optional[dict[str, str]] = Field(
        None, description="Headers sent with every request, each read from the named environment variable."
    )
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Seconds before one HTTP phase (read, write) fails.")
    max_retries: int = Field(3, ge=0, description="Retries of 429, 5xx, timeouts and connection errors.")
    model_info: Optional[dict[str, Any]] = Field(None, description="Capability overrides (ModelInfo fields).")
    token_limit: Optional[int] = Field(None, gt=0, description="Context window override (default: num_ctx).")
    default_options: Optional[dict[str, Any]] = Field(None, description="Default ChatOptions for every call.")

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c.isspace() for c in value.strip())):
            raise ValueError("host must be a URL or host[:port] without spaces, e.g. http://localhost:11434")
        return value

    @field_validator("options")
    @classmethod
    def _options(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value:
            check_option_names(value, "options")
            twice = sorted(_MAPPED_OPTIONS & value.keys())
            if twice:
                raise ValueError(f"options: set {twice} with the client's own fields or ChatOptions, not here")
        return value

    @field_validator("headers", "headers_env")
    @classmethod
    def _header_names(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for name in value or {}:
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid HTTP header name")
        return value

    @field_validator("headers")
    @classmethod
    def _header_values(cls, value: dict[str, SecretStr] | None) -> dict[str, SecretStr] | None:
        for name, secret in (value or {}).items():
            if any(c in secret.get_secret_value() for c in "\r\n\0"):
                raise ValueError(f"the value of header {name!r} contains a line break or NUL")
        return value

    @field_validator("headers_env")
    @classmethod
    def _env_names(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name, variable in (value or {}).items():
            if not _ENV_NAME.match(variable):
                raise ValueError(f"header {name!r}: {variable!r} is not an environment variable name")
        return value

    @model_validator(mode="after")
    def _disjoint_headers(self) -> OllamaClientConfig:
        given = {name.lower() for name in self.headers or {}}
        twice = sorted(name for name in self.headers_env or {} if name.lower() in given)
        if twice:
            raise ValueError(f"headers {twice} are given both as values and in headers_env")
        return self

    def default_chat_options(self) -> ChatOptions | None:
        """`default_options` with the client's own sampling fields laid over them."""
        return merge_default_options(
            self.default_options, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, seed=self.seed
        )

    def ollama_options(self) -> dict[str, Any]:
        """The Ollama options sent with every call (ChatOptions of a call are laid over them)."""
        options = dict(self.options or {})
        for name in ("num_ctx", "num_predict", "repeat_penalty"):
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        return options
