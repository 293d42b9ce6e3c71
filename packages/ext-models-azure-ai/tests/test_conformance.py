"""ext-testing's shared ChatClientConformance suite against AzureAIServer, with each kind of credential."""

from __future__ import annotations

from typing import Any

from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import (
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)

from ext.core import ChatCompletionClient
from ext.models.azure_ai import AzureAIChatCompletionClient
from ext.testing.conformance import ChatCompletionsConformance
from ext.testing.credentials import StaticTokenCredential
from ext.testing.servers import AzureAIServer, LoopbackServer

SECRET = "azure-ai-conformance-secret-0000"


class _AzureAIErrors(ChatCompletionsConformance):
    rate_limit_error = HttpResponseError
    server_error = HttpResponseError
    # aiohttp reports a connection closed before the response as ServerDisconnected (a ServiceRequestError)
    connection_error = (ServiceRequestError, ServiceResponseError)
    timeout_error = ServiceResponseTimeoutError
    secret = SECRET
    # gpt-4o: vision and structured output known to the table
    model = "gpt-4o"
    # The service takes temperature 0 to 1 (ChatOptions allows OpenAI's 0 to 2).
    unsupported_options = [({"temperature": 1.5}, "temperature must be between 0 and 1")]


class TestKeyStringConformance(_AzureAIErrors):
    def make_server(self) -> LoopbackServer:
        return AzureAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return AzureAIChatCompletionClient(endpoint=server.base_url, model=self.model, credential=SECRET, **kwargs)


class TestAzureKeyCredentialModelsRouteConformance(_AzureAIErrors):
    def make_server(self) -> LoopbackServer:
        return AzureAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return AzureAIChatCompletionClient(
            endpoint=server.base_url + "/models", model=self.model, credential=AzureKeyCredential(SECRET), **kwargs
        )


class TestTokenCredentialConformance(_AzureAIErrors):
    def make_server(self) -> LoopbackServer:
        return AzureAIServer(bearer_token=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return AzureAIChatCompletionClient(
            endpoint=server.base_url, model=self.model, credential=StaticTokenCredential(SECRET), **kwargs
        )
