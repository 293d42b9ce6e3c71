"""The shared chat-client conformance suite against the Anthropic-protocol loopback server."""

from __future__ import annotations

from typing import Any

import anthropic

from ext.core import ChatCompletionClient
from ext.models.anthropic import AnthropicChatCompletionClient
from ext.testing.conformance import ChatClientConformance
from ext.testing.servers import LoopbackServer
from ext.testing.servers.anthropic import AnthropicServer

SECRET = "sk-ant-conformance-secret-0000"


class TestAnthropicConformance(ChatClientConformance):
    rate_limit_error = anthropic.RateLimitError
    server_error = anthropic.InternalServerError
    connection_error = anthropic.APIConnectionError
    timeout_error = anthropic.APITimeoutError
    secret = SECRET
    features = frozenset(
        {
            "vision",
            "json_mode",
            "structured_output",
            "parallel_tool_calls",
            "tool_choice_none",
            "tool_choice_required",
            "tool_choice_named",
            "tool_result_is_error",
            "thought",
            "model_id_on_wire",
            "content_filter",
        }
    )
    unsupported_options = [
        ({"temperature": 1.5}, "temperature"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"seed": 7}, "seed"),
    ]

    def make_server(self) -> LoopbackServer:
        return AnthropicServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return AnthropicChatCompletionClient(
            "claude-sonnet-5-5", max_tokens=1024, base_url=server.base_url, api_key=SECRET, **kwargs
        )
