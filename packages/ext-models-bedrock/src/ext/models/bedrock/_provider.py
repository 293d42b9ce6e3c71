"""This distribution's provider declaration (the `ext.providers` entry point)."""

from __future__ import annotations

import os
from typing import Any

from ext.core import ProviderInfo, ServerAddress, address_from_url


def _address(client: Any) -> ServerAddress | None:
    # botocore's order: the client's endpoint_url, then the service's and the global endpoint variables, then
    # the regional endpoint (https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html).
    url = (
        client._config.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
        or os.environ.get("AWS_ENDPOINT_URL")
        or f"https://bedrock-runtime.{client.region}.amazonaws.com"
    )
    return address_from_url(url)


BEDROCK = ProviderInfo(
    name="bedrock",
    client="ext.models.bedrock:AnthropicBedrockChatCompletionClient",
    distribution="ext-models-bedrock",
    model_parameter="model",
    example_model="anthropic.claude-sonnet-4-5-v1:0",
    auth="AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, or ~/.aws), AWS_REGION",
    endpoint_parameter="endpoint_url",
    endpoint_env="AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    # The Messages API requires max_tokens; a command line rarely gives it.
    required_arguments={"max_tokens": 1024},
    server_address=_address,
)
