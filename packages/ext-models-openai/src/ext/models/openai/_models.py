"""What OpenAI models (and unknown models behind an OpenAI-compatible endpoint) can do, and the wire
rules that follow from a model's family."""

from __future__ import annotations

from typing import Literal

from ext.core import KNOWN_MODELS, ModelInfo, ModelRule, ModelTable

SystemRole = Literal["auto", "system", "developer", "user"]

# Families whose Chat Completions endpoint rejects sampling parameters and `max_tokens`, and takes
# instructions as `developer` messages. Matched on `ModelInfo.family`, so `model_info={"reasoning": False}`
# or another family turns the rules off for a model the table gets wrong.
OPENAI_REASONING_FAMILIES = frozenset({"o1", "o1-mini", "o3", "o4", "gpt-5"})

# o1-mini and o1-preview accept neither system nor developer messages.
_USER_ROLE_FAMILIES = frozenset({"o1-mini"})


_OPENAI_RULES = (
    # An unknown name behind an OpenAI-compatible server: text, tools, JSON mode and json_schema
    # structured output (vLLM, SGLang, llama.cpp server, Ollama and LM Studio all take it), no vision.
    ModelRule.of("", structured_output=True),
    ModelRule.of("gpt-5-chat", vision=True, structured_output=True, family="gpt-5-chat", context_window=128_000),
    ModelRule.of("gpt-4.5", vision=True, structured_output=True, family="gpt-4.5", context_window=128_000),
    ModelRule.of("chatgpt-4o", vision=True, family="gpt-4o", context_window=128_000),
    ModelRule.of("gpt-4o-mini", vision=True, structured_output=True, family="gpt-4o", context_window=128_000),
    ModelRule.of("gpt-35-turbo", family="gpt-35", context_window=16_385),
    ModelRule.of("o1-mini", family="o1-mini", context_window=128_000, reasoning=True, json_output=False),
    ModelRule.of("o1-preview", family="o1-mini", context_window=128_000, reasoning=True, json_output=False),
    ModelRule.of("o3-mini", structured_output=True, family="o3", context_window=200_000, reasoning=True),
    ModelRule.of("o4", vision=True, structured_output=True, family="o4", context_window=200_000, reasoning=True),
    ModelRule.of("gpt-oss", structured_output=True, family="gpt-oss", context_window=131_072, reasoning=True),
    # SmolLM2 behind a compatible server (llama.cpp's, vLLM): its chat template has no tool syntax and the small
    # sizes rarely write a call a server can parse, so tools go at the prompt level (`tool_calling`).
    ModelRule.of("smollm", structured_output=True, family="smollm", context_window=8_192, function_calling=False),
)

OPENAI_MODELS: ModelTable = KNOWN_MODELS.extend(_OPENAI_RULES)
"""ext-core's table plus OpenAI-specific entries and an OpenAI-compatible default for unknown names."""


def is_openai_reasoning(info: ModelInfo) -> bool:
    """Whether the model follows the o-series/gpt-5 wire rules (see `OPENAI_REASONING_FAMILIES`)."""
    return info.reasoning and info.family in OPENAI_REASONING_FAMILIES


def system_role_for(info: ModelInfo, setting: SystemRole) -> str:
    """The wire role of `SystemMessage`s: `developer` for OpenAI reasoning models, `system` otherwise."""
    if setting != "auto":
        return setting
    if info.family in _USER_ROLE_FAMILIES:
        return "user"
    return "developer" if is_openai_reasoning(info) else "system"
