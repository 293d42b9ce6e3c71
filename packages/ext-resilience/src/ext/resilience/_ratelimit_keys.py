"""Which key a call counts under, for rate limits and budgets alike: one for every call (`global`), one per client
(`client`: the provider), one per model (`model`: provider and model), one the caller names around its calls
(`caller`, with `limit_key("tenant-42")`), or a function of the call.

A caller-named key is a context variable, so it follows the call into a tool loop's turns and tasks it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from ext.core import ChatOptions, ConfigurationError, LLMMessage, Tool, ToolSchema, estimate_tokens, tool_schema_of
from ext.pipeline import ChatCall

__all__ = ["KeySpec", "call_key", "estimate_call_tokens", "limit_key"]

KeySpec = Literal["global", "client", "model", "caller"] | Callable[[ChatCall], str]
KEY_KINDS = ("global", "client", "model", "caller")

_caller_key: ContextVar[str | None] = ContextVar("ext_resilience_limit_key", default=None)


@contextmanager
def limit_key(name: str) -> Iterator[None]:
    """Count the calls made inside the block under `name` (for limits and budgets built with `key="caller"`)."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"limit_key needs a non-empty str, got {name!r}")
    token = _caller_key.set(name)
    try:
        yield
    finally:
        _caller_key.reset(token)


def current_caller_key() -> str:
    """The key `limit_key` set around this code, or `default`."""
    return _caller_key.get() or "default"


def check_key_spec(key: object, where: str = "key") -> KeySpec:
    if callable(key):
        return key
    if key not in KEY_KINDS:
        raise ConfigurationError(
            f"{where} must be one of {', '.join(KEY_KINDS)} or a function of the call, got {key!r}"
        )
    return key  # type: ignore[return-value]


def key_function(spec: KeySpec) -> Callable[[ChatCall], str]:
    """The function giving a call's key under `spec`."""
    if spec == "global":
        return lambda call: "global"
    if spec == "client":
        return lambda call: call.provider
    if spec == "model":
        return lambda call: f"{call.provider}/{call.model}"
    if spec == "caller":
        return lambda call: current_caller_key()
    assert callable(spec)
    return spec


def call_key(spec: KeySpec, call: ChatCall) -> str:
    return key_function(spec)(call)


def max_output_tokens(options: ChatOptions | Mapping[str, Any] | None) -> int:
    """The call's `max_tokens` option, or 0 (what the caller allows the answer at most)."""
    if options is None:
        return 0
    value = options.max_tokens if isinstance(options, ChatOptions) else options.get("max_tokens")
    return value if isinstance(value, int) and value > 0 else 0


def estimate_prompt_tokens(client: Any, messages: Sequence[LLMMessage], tools: Sequence[Tool | ToolSchema]) -> int:
    """ext's provider-free upper bound of the prompt's tokens (`estimate_tokens`: about 1.5 times the real count
    for English). Not the client's own `count_tokens`: a tokenizer costs more per call than the whole limit, and the
    charge is corrected to the reported usage after the call anyway. `client` is unused; kept for a later count of
    the client's own."""
    return estimate_tokens(messages, [tool_schema_of(t) for t in tools] if tools else ())


def estimate_call_tokens(call: ChatCall) -> int:
    """Tokens charged before a call: its prompt tokens plus its `max_tokens` (0 when unset)."""
    return estimate_prompt_tokens(call.client, call.messages, call.tools) + max_output_tokens(call.options)
