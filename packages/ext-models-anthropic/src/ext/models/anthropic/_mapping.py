"""ext types to Anthropic Messages API wire shapes and back, as plain functions.

Requests are built as plain dicts (the JSON body); responses and stream events are read from either the
anthropic SDK's objects or plain dicts (the JSON the Bedrock runtime returns), so `ext-models-bedrock` reuses
this one mapping. Nothing here imports the anthropic SDK at import time, and nothing touches the network.

The mapping lives in three modules, one a concern: `_settings` (model table, wire settings, checks), `_request`
(the request body) and `_response` (responses and stream events); this module gathers their names.
"""

from ._request import (
    IMAGE_TYPES,
    JSON_MODE_INSTRUCTION,
    map_messages,
    map_output,
    map_request,
    map_tool_choice,
    map_tools,
    structured_output_schema,
)
from ._response import IncompleteStreamError, StreamState, map_response, map_usage
from ._settings import (
    ANTHROPIC_MODELS,
    PROVIDER,
    THINKING_TYPES,
    AnthropicWireSettings,
    check_extra_args,
    check_options,
    check_sampling,
    check_thinking,
    thinking_enabled,
)

__all__ = [
    "ANTHROPIC_MODELS",
    "IMAGE_TYPES",
    "JSON_MODE_INSTRUCTION",
    "PROVIDER",
    "THINKING_TYPES",
    "AnthropicWireSettings",
    "IncompleteStreamError",
    "StreamState",
    "check_extra_args",
    "check_options",
    "check_sampling",
    "check_thinking",
    "map_messages",
    "map_output",
    "map_request",
    "map_response",
    "map_tool_choice",
    "map_tools",
    "map_usage",
    "structured_output_schema",
    "thinking_enabled",
]
