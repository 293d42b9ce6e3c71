"""What kind of failure an openai SDK error is (registered under ext-core's `ext.errors` entry points).

The status alone cannot tell a context-window error (a plain 400) from another bad request: OpenAI sends the
code `context_length_exceeded`; llama.cpp's server (OpenAI-compatible) the type `exceed_context_size_error`;
vLLM and others only a message ("maximum context length ..."). Everything else is core's generic rule.
"""

from __future__ import annotations

import sys

from ext.core import ErrorClass, ErrorKind, generic_error_class

_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "string_above_max_length"})


def classify_openai_error_kind(error: BaseException) -> ErrorClass | None:
    """A context-window 400 as `CONTEXT_WINDOW`; the SDK's timeout and connection errors (which carry no status)
    as `TIMEOUT` and `CONNECTION`; None for the rest (core's generic rule reads the status)."""
    openai = sys.modules.get("openai")
    if openai is None:  # no openai error can exist before the SDK was imported
        return None
    if isinstance(error, openai.APIStatusError):
        if error.status_code == 400 and _is_context_window(error):
            return ErrorClass(ErrorKind.CONTEXT_WINDOW, 400)
        return generic_error_class(error)
    if isinstance(error, openai.APITimeoutError):
        return ErrorClass(ErrorKind.TIMEOUT)
    if isinstance(error, openai.APIConnectionError):
        return ErrorClass(ErrorKind.CONNECTION)
    return None


def _is_context_window(error: object) -> bool:
    if getattr(error, "code", None) in _CONTEXT_CODES or getattr(error, "type", None) in _CONTEXT_CODES:
        return True
    message = str(getattr(error, "message", "")).lower()
    return "context length" in message or "context window" in message or "context size" in message
