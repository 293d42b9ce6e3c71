"""ext-testing's RealServerConformance: AzureAIChatCompletionClient against llama-cpp-python's own OpenAI-compatible
server (SmolLM2-135M-Instruct, chatml-function-calling) on 127.0.0.1.

The Azure AI Inference SDK posts to `{endpoint}/chat/completions` with an `api-version` query parameter and
`api-key` / bearer headers; llama-cpp-python's server ignores the query parameter and, started without `--api_key`,
the headers, so the endpoint is the server's `/v1` root. The same features apply as for the OpenAI client
(ext-models-openai's test_conformance_llama_server.py): both send the Chat Completions body.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ServiceResponseTimeoutError

from ext.core import ChatCompletionClient
from ext.models.azure_ai import AzureAIChatCompletionClient
from ext.models.llama_cpp import default_model_path
from ext.testing.conformance import RealServerConformance
from ext.testing.llama_server import (
    CHAT_COMPLETIONS_FEATURES,
    CHAT_COMPLETIONS_NOT_APPLICABLE,
    LlamaServer,
    start_llama_server,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def real_server() -> Iterator[LlamaServer]:
    with start_llama_server(default_model_path()) as server:
        yield server


class TestAzureAIOnLlamaCppServer(RealServerConformance):
    timeout_error = ServiceResponseTimeoutError
    bad_request_error = HttpResponseError  # the server's 400 context_length_exceeded
    features = CHAT_COMPLETIONS_FEATURES
    not_applicable = CHAT_COMPLETIONS_NOT_APPLICABLE

    def make_client(self, server: LlamaServer, **kwargs: Any) -> ChatCompletionClient:
        return AzureAIChatCompletionClient(
            endpoint=server.base_url, model=server.model_alias, credential="llama-server-needs-no-key", **kwargs
        )
