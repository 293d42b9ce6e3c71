"""ext-testing's ChatClientConformance against the llama.cpp client, scripted in process.

The client runs a real `Llama` on a tiny random-weight GGUF; ext-testing's scripted chat handler makes the model
generate each scripted reply under a grammar, so every case goes through the client's real path: mapping,
worker thread, llama.cpp's sampler and tokenizer, stream reading, cancellation and output parsing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from ext.core import ChatCompletionClient
from ext.models.llama_cpp import LlamaCppChatCompletionClient
from ext.testing.conformance import ChatClientConformance
from ext.testing.inprocess import ScriptedModel, llama_cpp_chat_handler
from ext.testing.script import NeutralRequest, Reply


class TestLlamaCppConformance(ChatClientConformance):
    timeout_error = TimeoutError
    features = frozenset(
        {
            "json_mode",
            "structured_output",
            "parallel_tool_calls",
            "tool_choice_none",
            "tool_choice_required",
            "tool_choice_named",
            "tool_result_is_error",
        }
    )
    unsupported_options = [({"model_id": "another-model"}, "model_id")]
    create_streams_internally = True
    model_path: Path
    decode: Callable[[Mapping[str, Any]], NeutralRequest]
    render: Callable[[Reply], str]

    @pytest.fixture(autouse=True)
    def _model_and_wire(
        self, tiny_gguf: Path, llama_wire: tuple[Callable[[Mapping[str, Any]], NeutralRequest], Callable[[Reply], str]]
    ) -> None:
        self.model_path = tiny_gguf
        self.decode, self.render = llama_wire

    def make_server(self) -> ScriptedModel:
        return ScriptedModel(self.decode)

    def make_client(self, server: ScriptedModel, **kwargs: Any) -> ChatCompletionClient:
        return LlamaCppChatCompletionClient(
            self.model_path, chat_handler=llama_cpp_chat_handler(server, self.render), seed=1, **kwargs
        )
