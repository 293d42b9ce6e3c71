"""`AzureAIChatCompletionClient` configuration (what `dump_component` writes and `load_component` reads).

The key is a `SecretStr`: never in repr or errors, and dropped from dumps; `api_key_env` names the environment
variable a loaded client reads it from. A token credential is an object and is never dumped.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ext.core import check_api_version, check_http_url, check_stop_sequences

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_API_KEY_ENV = "AZURE_AI_API_KEY"


class EndpointConfig(BaseModel):
    """The settings both clients' configurations start with (the chat client's and the embedding client's): where
    the Model Inference API is, the model, the key and the API version."""

    # Validators are built on first use, not at import.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    endpoint: str = Field(
        description="https://<resource>.services.ai.azure.com/models, https://<name>.<region>.models.ai.azure.com "
        "(serverless), or an Azure OpenAI deployment URL."
    )
    model: str = Field(min_length=1, description="Model (deployment) name, sent as the body's `model`.")
    api_key: Optional[SecretStr] = Field(None, description="Key; default from the api_key_env variable.")
    api_key_env: Optional[str] = Field(DEFAULT_API_KEY_ENV, description="Environment variable holding the key.")
    api_version: Optional[str] = Field(None, description="API version; None: the SDK's default.")

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "endpoint").rstrip("/")

    @field_validator("api_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        return None if value is None else check_api_version(value, example="2024-05-01-preview")


class AzureAIClientConfig(EndpointConfig):
    """`AzureAIChatCompletionClient` configuration."""

    credential_scopes: Optional[list[str]] = Field(
        None, description="Scopes a token credential is asked for; None: the SDK's (https://ml.azure.com/.default)."
    )
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Seconds to connect, and between reads of a reply.")
    max_retries: int = Field(DEFAULT_MAX_RETRIES, ge=0, description="Retries of rate limits and transient errors.")
    temperature: Optional[float] = Field(
        None, ge=0.0, le=1.0, description="0 to 1, the service's range. None sends nothing (model default)."
    )
    top_p: Optional[float] = Field(None, ge=0.0, le=1.0)
    max_tokens: Optional[int] = Field(None, gt=0, description="Most tokens to generate.")
    frequency_penalty: Optional[float] = Field(None, ge=-2.0, le=2.0)
    presence_penalty: Optional[float] = Field(None, ge=-2.0, le=2.0)
    seed: Optional[int] = None
    stop: Optional[list[str]] = Field(None, description="Stop sequences.")
    model_extras: Optional[dict[str, Any]] = Field(
        None, description="Model-specific body fields for every request (sent with extra-parameters: pass-through)."
    )
    include_usage: bool = Field(True, description="Ask for usage in streams (model_extras stream_options).")
    think_tags: bool = Field(True, description="Split a leading <think>...</think> off the content as the thought.")
    model_info: Optional[dict[str, Any]] = Field(None, description="Capability overrides (ModelInfo fields).")
    token_limit: Optional[int] = Field(None, gt=0, description="Context window override.")
    default_options: Optional[dict[str, Any]] = Field(None, description="Default ChatOptions for every call.")

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("stop")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        return check_stop_sequences(value, "stop")

    @field_validator("model_extras")
    @classmethod
    def _extras(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        reserved = {"messages", "model", "stream"} & set(value or ())
        if reserved:
            raise ValueError(f"model_extras must not set {sorted(reserved)} (ext sets them)")
        return value
