"""ext-testing's RealServerConformance: OpenAIChatCompletionClient (base_url) against a real OpenAI-compatible
server, llama-cpp-python's own (`python -m llama_cpp.server`, chatml-function-calling) running SmolLM2-135M-Instruct
on 127.0.0.1, started once for the session.

AzureOpenAIChatCompletionClient is not run here: it posts to `/openai/deployments/{deployment}/chat/completions`,
a route llama-cpp-python's server does not have (it answers 404).
"""

from __future__ import annotations

from typing import Any

import openai

from ext.core import ChatCompletionClient
from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.conformance import RealServerConformance
from ext.testing.llama_server import CHAT_COMPLETIONS_FEATURES, CHAT_COMPLETIONS_NOT_APPLICABLE, LlamaServer


class TestOpenAIOnLlamaCppServer(RealServerConformance):
    timeout_error = openai.APITimeoutError
    bad_request_error = openai.BadRequestError  # 400 context_length_exceeded, as OpenAI answers it
    features = CHAT_COMPLETIONS_FEATURES
    not_applicable = CHAT_COMPLETIONS_NOT_APPLICABLE

    def make_client(self, server: LlamaServer, **kwargs: Any) -> ChatCompletionClient:
        # The server's own tool calling (chatml-function-calling) is what this suite checks; the default for SmolLM2
        # on a compatible server, tool calls at the prompt level, is tested in test_tool_calling_llama_server.py.
        return OpenAIChatCompletionClient(
            server.model_alias,
            base_url=server.base_url,
            api_key="sk-llama-server-needs-no-key",
            tool_calling="native",
            **kwargs,
        )
