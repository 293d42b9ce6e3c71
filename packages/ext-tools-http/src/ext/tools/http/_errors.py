"""Errors an `HttpTool` call raises. Bad configuration raises `ext.core.ConfigurationError` and bad
arguments `ext.core.ToolArgumentsError`, both before any request is sent."""

from __future__ import annotations

import httpx

from ext.core import ExtError

EXCERPT_CHARS = 200


class HttpToolError(ExtError):
    """Base class of the errors an `HttpTool` request raises."""


class HttpStatusError(HttpToolError, httpx.HTTPStatusError):
    """The server answered with a status outside 2xx.

    Also an `httpx.HTTPStatusError`, so code written for httpx catches it. `status_code` and
    `body_excerpt` (at most 200 characters of the body) are attributes; `response` is the httpx response.
    """

    def __init__(self, message: str, *, request: httpx.Request, response: httpx.Response, body_excerpt: str) -> None:
        httpx.HTTPStatusError.__init__(self, message, request=request, response=response)
        self.status_code = response.status_code
        self.body_excerpt = body_excerpt


class HttpResponseFormatError(HttpToolError, ValueError):
    """`return_type="json"` but the body is not JSON. `body_excerpt` holds its start."""

    def __init__(self, message: str, *, body_excerpt: str) -> None:
        super().__init__(message)
        self.body_excerpt = body_excerpt


class HttpTimeoutError(HttpToolError, TimeoutError):
    """The request did not complete within the tool's `timeout`. Also a builtin `TimeoutError`."""


class HttpConnectionError(HttpToolError, ConnectionError):
    """The request could not be sent or its response not read (refused, reset, protocol error)."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of `text` on one line, marked when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
