"""What the conformance suite expects of every client of the Anthropic Messages body, whatever carries it
(the Anthropic API in ext-models-anthropic, AWS Bedrock in ext-models-bedrock): one mapping, one set of
features and rejected options."""

from __future__ import annotations

from typing import Any, ClassVar

from ext.testing.conformance._chat import ChatClientConformance

__all__ = ["AnthropicMessagesConformance"]


class AnthropicMessagesConformance(ChatClientConformance):
    """`ChatClientConformance` with the features and unsupported options of the Anthropic Messages mapping.
    A subclass adds the transport's errors, `secret`, `make_server` and `make_client`."""

    features: ClassVar[frozenset[str]] = frozenset(
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
    unsupported_options: ClassVar[list[tuple[dict[str, Any], str]]] = [
        ({"temperature": 1.5}, "temperature"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"seed": 7}, "seed"),
    ]
