"""What the conformance suite expects of every client of the OpenAI Chat Completions body, whatever carries it
(OpenAI and Azure OpenAI in ext-models-openai, Azure AI Inference in ext-models-azure-ai, and pipelines around
them): one mapping, one set of features."""

from __future__ import annotations

from typing import ClassVar

from ext.testing.conformance._chat import ChatClientConformance

__all__ = ["ChatCompletionsConformance"]


class ChatCompletionsConformance(ChatClientConformance):
    """`ChatClientConformance` with the features of the Chat Completions mapping (ext-core's `chat_*`). A subclass
    adds the transport's errors, `secret`, the options its provider refuses, `make_server` and `make_client`."""

    features: ClassVar[frozenset[str]] = frozenset(
        {
            "vision",
            "json_mode",
            "structured_output",
            "parallel_tool_calls",
            "tool_choice_none",
            "tool_choice_required",
            "tool_choice_named",
            "thought",
            "model_id_on_wire",
            "content_filter",
        }
    )
