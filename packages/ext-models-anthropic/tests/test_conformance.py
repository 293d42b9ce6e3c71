"""The shared chat-client conformance suite against the Anthropic-protocol loopback server."""

from __future__ import annotations

from typing import Any

import anthropic

from ext.core import ChatCompletionClient
from ext.models.anthropic import AnthropicChatCompletionClient
from ext.testing.conformance import AnthropicMessagesConformance
from ext.testing.servers import LoopbackServer
from ext.testing.servers.anthropic import AnthropicServer

SECRET = "sk-ant-conformance-secret-0000"


class TestAnthropicConformance(AnthropicMessagesConformance):
    rate_limit_error = anthropic.RateLimitError
    server_error = anthropic.InternalServerError
    connection_error = anthropic.APIConnectionError
    timeout_error = anthropic.APITimeoutError
    secret = SECRET

    def make_server(self) -> LoopbackServer:
        return AnthropicServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return AnthropicChatCompletionClient(
            "claude-sonnet-5-5", max_tokens=1024, base_url=server.base_url, api_key=SECRET, **kwargs
        )
