"""ext-testing's RealServerConformance: OpenAIChatCompletionClient (base_url) against a real OpenAI-compatible
server, llama-cpp-python's own (`python -m llama_cpp.server`, chatml-function-calling) running SmolLM2-135M-Instruct
on 127.0.0.1, started once for the session.

AzureOpenAIChatCompletionClient is not run here: it posts to `/openai/deployments/{deployment}/chat/completions`,
a route llama-cpp-python's server does not have (it answers 404).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from ext.core import ChatCompletionClient
from ext.models.llama_cpp import default_model_path
from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.conformance import RealServerConformance
from ext.testing.llama_server import LlamaServer, start_llama_server


@pytest.fixture(scope="session")
def real_server() -> Iterator[LlamaServer]:
    with start_llama_server(default_model_path()) as server:
        yield server


class TestOpenAIOnLlamaCppServer(RealServerConformance):
    timeout_error = openai.APITimeoutError
    bad_request_error = openai.BadRequestError  # 400 context_length_exceeded, as OpenAI answers it
    features = frozenset({"tool_choice_auto", "tool_choice_named", "tool_choice_none", "json_mode"})
    # Each reason was seen on llama-cpp-python 0.3.36's server (llama_cpp/server/app.py, types.py and
    # llama_chat_format.chatml_function_calling).
    not_applicable = {
        "stream_usage": "the server ignores stream_options and sends no usage in a stream",
        "tool_choice_required": "chatml-function-calling handles only auto, none and a named tool: "
        "tool_choice='required' fails an assert and the server answers 500",
        "tool_results_in_prompt": "the chatml-function-calling template renders no 'tool' message, "
        "so the model never sees a tool's result",
        "structured_output": "the server takes response_format type 'text' or 'json_object' only (a json_schema "
        "format answers 500), and SmolLM2-135M does not follow a schema given in the prompt",
    }

    def make_client(self, server: LlamaServer, **kwargs: Any) -> ChatCompletionClient:
        return OpenAIChatCompletionClient(
            server.model_alias, base_url=server.base_url, api_key="sk-llama-server-needs-no-key", **kwargs
        )
