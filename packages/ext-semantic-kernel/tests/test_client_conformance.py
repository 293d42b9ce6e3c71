"""ext-testing's ChatClientConformance against a kernel service as an ext client: the kernel's own OpenAI connector
(`OpenAIChatCompletion` on a real `AsyncOpenAI`) talking to the loopback OpenAI server."""

from __future__ import annotations

from typing import Any, ClassVar

import openai
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion

from ext.core import ChatCompletionClient
from ext.semantic_kernel import KernelChatCompletionClient
from ext.testing.conformance import ChatCompletionsConformance
from ext.testing.servers import LoopbackServer, OpenAIServer

SECRET = "sk-conformance-secret-0000"


class TestKernelOpenAIConnectorConformance(ChatCompletionsConformance):
    rate_limit_error = openai.RateLimitError
    server_error = openai.InternalServerError
    connection_error = openai.APIConnectionError
    timeout_error = openai.APITimeoutError
    secret = SECRET
    # The kernel's OpenAI settings have no top_k (OpenAIChatPromptExecutionSettings), as the API has none.
    unsupported_options: ClassVar[list[tuple[dict[str, Any], str]]] = [({"top_k": 5}, "top_k")]
    # Not applicable through the kernel's OpenAI connector (semantic-kernel 1.45):
    # - tool_choice_named: its settings take tool_choice as a string only (auto/none/required); a named tool is sent
    #   as "required" with only that tool offered (tested in test_client.py).
    # - thought: the connector reads no reasoning_content from a reply.
    features = ChatCompletionsConformance.features - {"tool_choice_named", "thought"}

    def make_server(self) -> LoopbackServer:
        return OpenAIServer(api_key=SECRET)

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        timeout = kwargs.pop("timeout", 60.0)
        # The SDK's own retries off: ext's retry policy is the one owner of retries (max_retries reaches it).
        sdk = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key=SECRET, max_retries=0, timeout=timeout)
        service = OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=sdk)
        return KernelChatCompletionClient(service, **kwargs)
