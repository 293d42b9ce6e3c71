"""A REST-ish loopback server on ext-testing's LoopbackServer: echo routes record what arrived."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence

import pytest

from ext.testing.servers import (
    LoopbackServer,
    RecordedRequest,
    Reply,
    Response,
    Route,
    StreamResponse,
    json_response,
)

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
ECHO_PATTERNS = ("/", "/echo", "/items/{id}", "/items/{id}/detail", "/users/{user}/posts/{post}", "/files/{name}.json")


def echo(request: RecordedRequest) -> Response:
    """What the server received, as JSON."""
    return json_response(
        {
            "method": request.method,
            "path": request.path,
            "params": request.params,
            "query": request.query,
            "json": request.json,
            "content_type": request.headers.get("content-type"),
        }
    )


def status(request: RecordedRequest) -> Response:
    code = int(request.params["code"])
    body = request.query_value("body") or f"status {code} body"
    return Response(status=code, body=body.encode(), content_type="text/plain")


def html(request: RecordedRequest) -> Response:
    return Response(body=b"<html><body>not json</body></html>", content_type="text/html")


def empty(request: RecordedRequest) -> Response:
    return Response(status=204, body=b"", content_type=None)


def unicode_text(request: RecordedRequest) -> Response:
    return Response(body="héllo wörld ✓".encode(), content_type="text/plain; charset=utf-8")


class RestServer(LoopbackServer):
    """Echo routes for every method, fixed replies, and `/slow` answered from the script (hang, delays)."""

    def routes(self) -> Sequence[Route]:
        routes = [Route(m, p, handler=echo) for m in METHODS for p in ECHO_PATTERNS]
        routes += [Route(m, "/status/{code}", handler=status) for m in METHODS]
        routes += [
            Route("GET", "/html", handler=html),
            Route("DELETE", "/empty", handler=empty),
            Route("GET", "/unicode", handler=unicode_text),
        ]
        routes += [Route(m, "/slow") for m in METHODS]
        return routes

    def render(self, reply: Reply, request: RecordedRequest) -> Response | StreamResponse:
        if reply.chunks is not None:
            return StreamResponse(frames=[c.encode() for c in reply.chunks], content_type="text/plain")
        return Response(body=json.dumps({"text": reply.text}).encode())


@pytest.fixture
async def server() -> AsyncIterator[RestServer]:
    async with RestServer() as srv:
        yield srv
