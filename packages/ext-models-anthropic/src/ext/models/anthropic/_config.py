"""The client's configuration model (what `dump_component` writes and `load_component` reads).

The key is a `SecretStr`: never shown in repr or errors, and dropped from dumps; `api_key_env` names the
environment variable a loaded client reads it from.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ext.core import ChatOptions, check_http_url, check_stop_sequences, merge_default_options

from ._mapping import check_sampling, check_thinking

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3

AnthropicSystemPolicy = Literal["leading_then_user", "hoist"]
"""How system messages after the first non-system message are sent (see `ext.core.SystemPolicy`)."""


class AnthropicMessagesConfig(BaseModel):
    """The settings of the Anthropic Messages body, shared by every client that sends it (the Anthropic API,
    Bedrock); each client's config adds its transport's fields."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    model: str = Field(min_length=1, description="Model name, e.g. claude-sonnet-4-5 (on Bedrock: the model id).")
    max_tokens: int = Field(gt=0, description="Most tokens to generate (the API requires it on every request).")
    max_retries: int = Field(DEFAULT_MAX_RETRIES, ge=0, description="Retries of rate limits and transient errors.")
    temperature: Optional[float] = Field(
        None, ge=0.0, le=1.0, description="0.0 to 1.0. None sends nothing: the API default (1.0) applies."
    )
    top_p: Optional[float] = Field(None, ge=0.0, le=1.0, description="Nucleus sampling, 0.0 to 1.0.")
    top_k: Optional[int] = Field(None, gt=0, description="Sample from the k most likely tokens.")
    stop_sequences: Optional[list[str]] = Field(None, description="Stop when any of these is generated.")
    thinking: Optional[dict[str, Any]] = Field(
        None,
        description="Extended thinking: {'type': 'enabled', 'budget_tokens': n} (1024 <= n < max_tokens), "
        "{'type': 'adaptive'}, {'type': 'between_tools'} or {'type': 'disabled'}.",
    )
    system_policy: AnthropicSystemPolicy = Field(
        "leading_then_user", description="Where system messages after the conversation started go."
    )
    extra_body: Optional[dict[str, Any]] = Field(None, description="Extra JSON fields sent with every request.")
    model_info: Optional[dict[str, Any]] = Field(None, description="Capability overrides (ModelInfo fields).")
    token_limit: Optional[int] = Field(None, gt=0, description="Context window override.")
    default_options: Optional[dict[str, Any]] = Field(None, description="Default ChatOptions for every call.")

    @field_validator("stop_sequences")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        return check_stop_sequences(value)

    @model_validator(mode="after")
    def _thinking(self) -> AnthropicMessagesConfig:
        thinking = check_thinking(self.thinking, self.max_tokens)
        check_sampling(self.temperature, self.top_p, self.top_k, thinking)
        return self

    def default_chat_options(self) -> ChatOptions | None:
        """`default_options` with the client's own sampling fields laid over them."""
        return merge_default_options(
            self.default_options,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            stop_sequences=self.stop_sequences,
        )


class AnthropicClientConfig(AnthropicMessagesConfig):
    """`AnthropicChatCompletionClient` configuration."""

    api_key: Optional[SecretStr] = Field(None, description="API key; default from the api_key_env variable.")
    api_key_env: Optional[str] = Field("ANTHROPIC_API_KEY", description="Environment variable holding the key.")
    base_url: Optional[str] = Field(None, description="API base URL (default: ANTHROPIC_BASE_URL, then the API's).")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Seconds before one HTTP attempt fails.")
    default_headers: Optional[dict[str, SecretStr]] = Field(
        None,
        description="Headers sent with every request. Values are secrets: a client with them cannot be dumped "
        "(use default_headers_env).",
    )
    default_headers_env: Optional[dict[str, str]] = Field(
        None, description="Headers sent with every request, read from environment variables: header -> variable."
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value, "base_url")
