"""Names shared by both directions: ext's `ChatOptions` fields and tool choices as the kernel's execution settings
call them (the OpenAI-style names its own OpenAI connector uses), declared once."""

from __future__ import annotations

from typing import Literal

from semantic_kernel.connectors.ai.function_choice_type import FunctionChoiceType

__all__ = ["CHOICE_OF_TYPE", "OPTION_OF_SETTING", "SETTING_OF_OPTION", "TYPE_OF_CHOICE"]

SETTING_OF_OPTION: dict[str, str] = {
    "temperature": "temperature",
    "max_tokens": "max_tokens",
    "top_p": "top_p",
    "top_k": "top_k",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "stop_sequences": "stop",
    "seed": "seed",
    "model_id": "ai_model_id",
}
"""`ChatOptions` field -> execution setting."""

OPTION_OF_SETTING: dict[str, str] = {setting: option for option, setting in SETTING_OF_OPTION.items()}
"""Execution setting -> `ChatOptions` field."""

TYPE_OF_CHOICE: dict[str, FunctionChoiceType] = {
    "auto": FunctionChoiceType.AUTO,
    "required": FunctionChoiceType.REQUIRED,
    "none": FunctionChoiceType.NONE,
}
"""ext's `tool_choice` -> the kernel's function choice type."""

CHOICE_OF_TYPE: dict[FunctionChoiceType, Literal["auto", "required", "none"]] = {
    FunctionChoiceType.AUTO: "auto",
    FunctionChoiceType.REQUIRED: "required",
    FunctionChoiceType.NONE: "none",
}
"""The kernel's function choice type -> ext's `tool_choice`."""
