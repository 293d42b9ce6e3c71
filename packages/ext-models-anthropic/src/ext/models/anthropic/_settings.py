"""The Anthropic Messages request settings and their checks: the model table, `AnthropicWireSettings`, and
the validation of thinking, sampling, per-call options and extra arguments (before any request)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ext.core import (
    KNOWN_MODELS,
    ChatRequest,
    ConfigurationError,
    ModelRule,
    ModelTable,
    SystemPolicy,
    UnsupportedOptionError,
)

__all__ = [
    "ANTHROPIC_MODELS",
    "MIN_THINKING_BUDGET",
    "PROVIDER",
    "THINKING_TYPES",
    "AnthropicWireSettings",
    "check_extra_args",
    "check_options",
    "check_sampling",
    "check_thinking",
    "thinking_enabled",
]

PROVIDER = "anthropic"
"""`ReasoningBlock.provider` of thinking blocks this package produces (and sends back)."""

THINKING_TYPES = frozenset({"enabled", "adaptive", "between_tools", "disabled"})
_THINKING_ON = frozenset({"enabled", "adaptive", "between_tools"})
MIN_THINKING_BUDGET = 1024

_RESERVED_EXTRA = frozenset({"model", "messages", "stream", "system"})


_ANTHROPIC_RULES = (
    # An unknown name behind the Anthropic API (or a proxy speaking it) is most likely a current Claude model:
    # images and tools, but no structured output until told (model_info={"structured_output": True}).
    ModelRule.of("", vision=True, family="claude", context_window=200_000),
    ModelRule.of("claude-2", family="claude-2", context_window=100_000),
    ModelRule.of("claude-instant", family="claude-2", context_window=100_000),
    ModelRule.of("claude-3", vision=True, family="claude-3", context_window=200_000),
    ModelRule.of("claude-3-5-haiku", family="claude-3-5", context_window=200_000),
)

ANTHROPIC_MODELS: ModelTable = KNOWN_MODELS.extend(_ANTHROPIC_RULES)
"""ext-core's table plus Claude families it leaves out and a Claude-like default for unknown names."""


# --- settings and validation --------------------------------------------------------------------------


@dataclass(frozen=True)
class AnthropicWireSettings:
    """Per-client request settings the mapping needs (the SDK client's own options live elsewhere)."""

    max_tokens: int
    thinking: Mapping[str, Any] | None = None
    system_policy: SystemPolicy = "leading_then_user"
    extra_body: Mapping[str, Any] | None = None


def thinking_enabled(thinking: Mapping[str, Any] | None) -> bool:
    """Whether a `thinking` config lets the model think (so earlier thinking blocks are sent back)."""
    return thinking is not None and thinking.get("type") in _THINKING_ON


def check_thinking(thinking: Any, max_tokens: int, *, where: str = "thinking") -> dict[str, Any] | None:
    """A validated copy of a `thinking` config, or ConfigurationError naming what is wrong.

    Accepts `{"type": "enabled", "budget_tokens": n}` (1024 <= n < max_tokens), `{"type": "adaptive"}`,
    `{"type": "between_tools"}` and `{"type": "disabled"}`, with an optional `display` for enabled/adaptive.
    """
    if thinking is None:
        return None
    if not isinstance(thinking, Mapping):
        raise ConfigurationError(f"{where} must be a mapping like {{'type': 'enabled', 'budget_tokens': 2048}}")
    kind = thinking.get("type")
    if kind not in THINKING_TYPES:
        raise ConfigurationError(f"{where}.type must be one of {sorted(THINKING_TYPES)}, got {kind!r}")
    out = dict(thinking)
    allowed = {"type"}
    if kind == "enabled":
        allowed |= {"budget_tokens", "display"}
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise ConfigurationError(f"{where}.budget_tokens is required for type 'enabled' (an int >= 1024)")
        if budget < MIN_THINKING_BUDGET:
            raise ConfigurationError(f"{where}.budget_tokens must be >= {MIN_THINKING_BUDGET}, got {budget}")
        if budget >= max_tokens:
            raise ConfigurationError(
                f"{where}.budget_tokens ({budget}) must be less than max_tokens ({max_tokens}): the budget is part "
                "of max_tokens"
            )
    elif kind == "adaptive":
        allowed |= {"display"}
    extra = set(thinking) - allowed
    if extra:
        raise ConfigurationError(f"{where}: unexpected keys {sorted(extra)} for type {kind!r}")
    display = thinking.get("display")
    if display is not None and display not in ("summarized", "omitted"):
        raise ConfigurationError(f"{where}.display must be 'summarized' or 'omitted', got {display!r}")
    return out


def check_sampling(
    temperature: float | None,
    top_p: float | None,
    top_k: int | None,
    thinking: Mapping[str, Any] | None,
    *,
    error: type[ConfigurationError] = ConfigurationError,
) -> None:
    """The API's rules for sampling with thinking on: temperature 1 (or unset), no top_k, top_p >= 0.95."""
    if temperature is not None and temperature > 1:
        raise error(f"temperature must be between 0 and 1 for Anthropic models, got {temperature}")
    if not thinking_enabled(thinking):
        return
    if temperature is not None and temperature != 1:
        raise error(f"temperature must be 1 (or unset) when thinking is on, got {temperature}")
    if top_k is not None:
        raise error("top_k must be unset when thinking is on")
    if top_p is not None and top_p < 0.95:
        raise error(f"top_p must be >= 0.95 (or unset) when thinking is on, got {top_p}")


def check_options(request: ChatRequest, settings: AnthropicWireSettings) -> None:
    """Raise `UnsupportedOptionError` for per-call options the Messages API cannot honour, before any request."""
    options = request.options
    for name in ("frequency_penalty", "presence_penalty", "seed"):
        if getattr(options, name) is not None:
            raise UnsupportedOptionError(f"{name} is not supported by the Anthropic Messages API; leave it unset")
    max_tokens = options.max_tokens or settings.max_tokens
    if request.extra:
        check_extra_args(request.extra, max_tokens)
    thinking = _thinking_of(request, settings)
    check_sampling(options.temperature, options.top_p, options.top_k, thinking, error=UnsupportedOptionError)
    if thinking is not None and thinking.get("type") == "enabled" and thinking["budget_tokens"] >= max_tokens:
        raise UnsupportedOptionError(
            f"max_tokens ({max_tokens}) must be greater than thinking.budget_tokens ({thinking['budget_tokens']})"
        )
    if thinking_enabled(thinking) and request.tools and request.tool_choice not in ("auto", "none"):
        raise UnsupportedOptionError(
            f"tool_choice={request.tool_choice!r} forces a tool call, which the API rejects while thinking is on; "
            "use 'auto' or turn thinking off"
        )


def check_extra_args(extra: Mapping[str, Any], max_tokens: int) -> None:
    """`extra_create_args` go into the request body; keys this package sets from other arguments are refused."""
    reserved = sorted(_RESERVED_EXTRA & set(extra))
    if reserved:
        raise ConfigurationError(
            f"extra_create_args must not set {reserved}: pass messages, the model (ChatOptions.model_id) and the "
            "system prompt (SystemMessage) as arguments"
        )
    if "thinking" in extra:
        check_thinking(extra["thinking"], max_tokens, where="extra_create_args['thinking']")


def _thinking_of(request: ChatRequest, settings: AnthropicWireSettings) -> Mapping[str, Any] | None:
    if "thinking" in request.extra:
        thinking: Mapping[str, Any] | None = request.extra["thinking"]
        return thinking
    return settings.thinking
