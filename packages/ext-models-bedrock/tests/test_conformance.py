"""The shared chat-client conformance suite against the Bedrock-protocol loopback server (SigV4 verified)."""

from __future__ import annotations

from typing import Any

import botocore.exceptions

from ext.core import ChatCompletionClient
from ext.models.bedrock import AnthropicBedrockChatCompletionClient
from ext.testing.conformance import AnthropicMessagesConformance
from ext.testing.servers import LoopbackServer
from ext.testing.servers.bedrock import BedrockServer

ACCESS_KEY = "AKIDCONFORMANCE0001"
SECRET = "conformance-secret-key-0000"
REGION = "eu-central-1"
MODEL = "eu.anthropic.claude-sonnet-5-5-v1:0"


class TestBedrockConformance(AnthropicMessagesConformance):
    rate_limit_error = botocore.exceptions.ClientError
    server_error = botocore.exceptions.ClientError
    connection_error = (botocore.exceptions.ConnectionClosedError, botocore.exceptions.EndpointConnectionError)
    timeout_error = botocore.exceptions.ReadTimeoutError
    secret = SECRET

    def make_server(self) -> LoopbackServer:
        return BedrockServer(access_key=ACCESS_KEY, secret_key=SECRET, region=REGION)

    def dump_environment(self, client: ChatCompletionClient) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET}

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return AnthropicBedrockChatCompletionClient(
            MODEL,
            max_tokens=1024,
            aws_region=REGION,
            aws_access_key=ACCESS_KEY,
            aws_secret_key=SECRET,
            endpoint_url=server.base_url,
            **kwargs,
        )
