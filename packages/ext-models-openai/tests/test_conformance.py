"""ext-testing's shared ChatClientConformance suite against both clients over loopback."""

from __future__ import annotations

from typing import Any

import openai

from ext.core import ChatCompletionClient
from ext.models.openai import AzureOpenAIChatCompletionClient, OpenAIChatCompletionClient
from ext.testing.conformance import ChatCompletionsConformance
from ext.testing.servers import LoopbackServer, OpenAIServer

SECRET = "sk-conformance-secret-0000"


class _OpenAIErrors(ChatCompletionsConformance):
    rate_limit_error = openai.RateLimitError
    server_error = openai.InternalServerError
    connection_error = openai.APIConnectionError
    timeout_error = openai.APITimeoutError
    secret = SECRET
    unsupported_options = [({"top_k": 5}, "top_k")]


class TestOpenAIConformance(_OpenAIErrors):
    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return OpenAIChatCompletionClient(
            "gpt-4o-mini", base_url=server.base_url + "/v1", api_key=SECRET, bundled_encodings=False, **kwargs
        )


class TestAzureApiKeyConformance(_OpenAIErrors):
    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return AzureOpenAIChatCompletionClient(
            azure_endpoint=server.base_url,
            azure_deployment="chat-deployment",
            api_version="2024-10-21",
            model="gpt-4o-mini",
            api_key=SECRET,
            bundled_encodings=False,
            **kwargs,
        )


class TestAzureTokenProviderConformance(_OpenAIErrors):
    def make_server(self) -> LoopbackServer:
        return OpenAIServer(azure_ad_token=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        async def token() -> str:
            return SECRET

        return AzureOpenAIChatCompletionClient(
            azure_endpoint=server.base_url,
            azure_deployment="chat-deployment",
            api_version="2024-10-21",
            model="gpt-4o-mini",
            azure_ad_token_provider=token,
            bundled_encodings=False,
            **kwargs,
        )
