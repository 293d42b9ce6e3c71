"""`TraceContext`: a message's W3C trace context, as plain strings (no tracing library)."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TraceContext"]

# W3C Trace Context, section 3.2 (https://www.w3.org/TR/trace-context/#traceparent-header): version "00" is
# `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`; a later version may append fields after the flags.
# Version ff is invalid, and so are all-zero ids.
_TRACEPARENT = re.compile(r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}(-.*)?")
# Section 3.3.1: at most 32 list members; propagators must pass on at least 512 characters, so no more is kept.
_MAX_TRACESTATE = 512


@dataclass(frozen=True)
class TraceContext:
    """A message's W3C trace context: the `traceparent` and (possibly empty) `tracestate` strings."""

    traceparent: str
    tracestate: str = ""

    @classmethod
    def parse(cls, traceparent: str, tracestate: str = "") -> TraceContext | None:
        """The context of strings read off the wire, or None when `traceparent` is missing or not W3C: as the
        specification says, a receiver ignores an invalid one (and a `tracestate` longer than 512 characters)."""
        if not traceparent or len(traceparent) > 256 or not _TRACEPARENT.fullmatch(traceparent):
            return None
        if traceparent.startswith("00-") and len(traceparent) != 55:
            return None  # version 00 has exactly four fields
        return cls(traceparent, tracestate if len(tracestate) <= _MAX_TRACESTATE else "")
