"""Helpers shared by the tests: real SDK clients pointed at ext-testing's loopback servers, the embedded model."""

from __future__ import annotations

from ext.models.anthropic import AnthropicChatCompletionClient
from ext.models.llama_cpp import LlamaCppChatCompletionClient
from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.servers import AnthropicServer, OpenAIServer

KEY = "sk-test-fallback-0123456789"


def openai_client(
    server: OpenAIServer, *, model: str = "gpt-4o-mini", timeout: float = 10.0, max_retries: int = 2
) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        model,
        base_url=server.base_url + "/v1",
        api_key=KEY,
        bundled_encodings=False,
        timeout=timeout,
        max_retries=max_retries,
    )


def anthropic_client(
    server: AnthropicServer, *, timeout: float = 10.0, max_retries: int = 2
) -> AnthropicChatCompletionClient:
    return AnthropicChatCompletionClient(
        "claude-sonnet-5-5",
        max_tokens=256,
        base_url=server.base_url,
        api_key=KEY,
        timeout=timeout,
        max_retries=max_retries,
    )


def local_model(path: str, *, n_ctx: int = 2048) -> LlamaCppChatCompletionClient:
    return LlamaCppChatCompletionClient(path, temperature=0.0, seed=0, max_tokens=64, n_ctx=n_ctx)
