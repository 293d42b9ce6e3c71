"""The client's configuration model (what `dump_component` writes and `load_component` reads).

AWS keys are `SecretStr`: never shown in repr or errors, and dropped from dumps. A loaded client finds its
credentials through the standard AWS chain (environment variables, credentials file, `aws_profile`).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ext.models.anthropic import AnthropicSystemPolicy, check_sampling, check_thinking

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3


class BedrockClientConfig(BaseModel):
    """`AnthropicBedrockChatCompletionClient` configuration."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    model: str = Field(min_length=1, description="Bedrock model id or inference profile, e.g. us.anthropic.claude-...")
    max_tokens: int = Field(gt=0, description="Most tokens to generate (required by the Anthropic body).")
    aws_region: Optional[str] = Field(
        None, description="Region; default from AWS_REGION, AWS_DEFAULT_REGION or profile."
    )
    aws_access_key: Optional[SecretStr] = Field(None, description="Access key id (with aws_secret_key).")
    aws_secret_key: Optional[SecretStr] = Field(None, description="Secret access key (with aws_access_key).")
    aws_session_token: Optional[SecretStr] = Field(None, description="Session token of temporary credentials.")
    aws_profile: Optional[str] = Field(None, description="A profile of the AWS config and credentials files.")
    endpoint_url: Optional[str] = Field(None, description="Bedrock runtime endpoint (default: the region's).")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Seconds to connect, and between reads.")
    max_retries: int = Field(DEFAULT_MAX_RETRIES, ge=0, description="Retries of throttling and transient errors.")
    max_pool_connections: int = Field(10, gt=0, description="Connections kept open (botocore's default is 10).")
    temperature: Optional[float] = Field(None, ge=0.0, le=1.0, description="0.0 to 1.0; None: the model default.")
    top_p: Optional[float] = Field(None, ge=0.0, le=1.0, description="Nucleus sampling, 0.0 to 1.0.")
    top_k: Optional[int] = Field(None, gt=0, description="Sample from the k most likely tokens.")
    stop_sequences: Optional[list[str]] = Field(None, description="Stop when any of these is generated.")
    thinking: Optional[dict[str, Any]] = Field(None, description="Extended thinking, as for the Anthropic client.")
    system_policy: AnthropicSystemPolicy = Field(
        "leading_then_user", description="Where system messages after the conversation started go."
    )
    extra_body: Optional[dict[str, Any]] = Field(None, description="Extra JSON fields sent with every request.")
    model_info: Optional[dict[str, Any]] = Field(None, description="Capability overrides (ModelInfo fields).")
    token_limit: Optional[int] = Field(None, gt=0, description="Context window override.")
    default_options: Optional[dict[str, Any]] = Field(None, description="Default ChatOptions for every call.")

    @field_validator("endpoint_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError("endpoint_url must be an http:// or https:// URL")
        return value

    @field_validator("aws_region", "aws_profile")
    @classmethod
    def _non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("stop_sequences")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not s for s in value):
            raise ValueError("stop_sequences must not contain empty strings")
        return value

    @model_validator(mode="after")
    def _checks(self) -> BedrockClientConfig:
        # Never drop what the user gave: a half pair of keys is an error, not a silent fall-back to the chain.
        if self.aws_secret_key is not None and self.aws_access_key is None:
            raise ValueError("aws_secret_key was given without aws_access_key")
        if self.aws_access_key is not None and self.aws_secret_key is None:
            raise ValueError("aws_access_key was given without aws_secret_key")
        if self.aws_session_token is not None and self.aws_access_key is None:
            raise ValueError("aws_session_token needs aws_access_key and aws_secret_key")
        if self.aws_profile is not None and self.aws_access_key is not None:
            raise ValueError("pass either aws_access_key/aws_secret_key or aws_profile, not both")
        thinking = check_thinking(self.thinking, self.max_tokens)
        check_sampling(self.temperature, self.top_p, self.top_k, thinking)
        return self
