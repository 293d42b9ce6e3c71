"""The client's configuration model (what `dump_component` writes and `load_component` reads).

AWS keys are `SecretStr`: never shown in repr or errors, and dropped from dumps. A loaded client finds its
credentials through the standard AWS chain (environment variables, credentials file, `aws_profile`).
"""

from __future__ import annotations

from typing import Optional

from pydantic import Field, SecretStr, field_validator, model_validator

from ext.core import check_http_url
from ext.models.anthropic import AnthropicMessagesConfig

DEFAULT_TIMEOUT = 60.0


class BedrockClientConfig(AnthropicMessagesConfig):
    """`AnthropicBedrockChatCompletionClient` configuration: the Anthropic Messages settings (`model` is the
    Bedrock model id or inference profile, e.g. us.anthropic.claude-...) plus AWS's."""

    aws_region: Optional[str] = Field(
        None, description="Region; default from AWS_REGION, AWS_DEFAULT_REGION or profile."
    )
    aws_access_key: Optional[SecretStr] = Field(None, description="Access key id (with aws_secret_key).")
    aws_secret_key: Optional[SecretStr] = Field(None, description="Secret access key (with aws_access_key).")
    aws_session_token: Optional[SecretStr] = Field(None, description="Session token of temporary credentials.")
    aws_profile: Optional[str] = Field(None, description="A profile of the AWS config and credentials files.")
    endpoint_url: Optional[str] = Field(None, description="Bedrock runtime endpoint (default: the region's).")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Seconds to connect, and between reads.")
    max_pool_connections: int = Field(10, gt=0, description="Connections kept open (botocore's default is 10).")

    @field_validator("endpoint_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value, "endpoint_url")

    @field_validator("aws_region", "aws_profile")
    @classmethod
    def _non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
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
        return self
