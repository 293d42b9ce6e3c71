"""OpenAI's embeddings routes, as strict as the API: ``POST /v1/embeddings`` (and ``/embeddings``), and Azure
OpenAI's ``POST /openai/deployments/{deployment}/embeddings?api-version=...``, on `OpenAIServer`. The source of each
rule is noted beside it; ``server.embeddings`` (an `EmbeddingScript`) answers the valid requests."""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Protocol

from ext.testing.servers._embedding_script import EmbeddingScript, FaultTarget, embedding_tokens, float32_base64
from ext.testing.servers._messages import RecordedRequest, Response, Route, json_response

__all__ = ["OPENAI_EMBEDDING_SIZES", "OpenAIEmbeddingsServer", "openai_embedding_routes"]

OPENAI_EMBEDDING_SIZES = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Native vector sizes (OpenAI embeddings guide, "Embedding models")."""

# OpenAI API reference, "Create embeddings" (and the openai SDK's EmbeddingCreateParams docstring): an array input
# holds at most 2048 items, no input is an empty string, each input at most 8192 tokens, a request at most 300,000
# tokens summed.
_OPENAI_MAX_INPUTS = 2048
_OPENAI_MAX_INPUT_TOKENS = 8192
_OPENAI_MAX_REQUEST_TOKENS = 300_000
_OPENAI_FIELDS = frozenset({"input", "model", "dimensions", "encoding_format", "user"})
_INVALID = "'{}' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."


def _openai_error(message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def _texts_of(value: Any) -> list[str] | None:
    """OpenAI ``input`` as texts (a token array stands for the text of its ids), or None when malformed."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [" ".join(map(str, value))]
    texts: list[str] = []
    for item in value:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, list) and item and all(isinstance(v, int) and not isinstance(v, bool) for v in item):
            texts.append(" ".join(map(str, item)))
        else:
            return None
    return texts


class OpenAIEmbeddingsServer(FaultTarget, Protocol):
    """What these routes read from their server (an `OpenAIServer`)."""

    embeddings: EmbeddingScript
    api_key: str | None
    azure_ad_token: str | None

    def _auth_failure(self, request: RecordedRequest) -> Response | None: ...


def openai_embedding_routes(server: OpenAIEmbeddingsServer) -> tuple[Route, ...]:
    """OpenAI's and Azure OpenAI's embeddings routes, answered by ``server.embeddings``."""
    handler = partial(_openai_embeddings, server)
    return (
        Route("POST", "/v1/embeddings", "embeddings", handler),
        Route("POST", "/embeddings", "embeddings", handler),
        Route("POST", "/openai/deployments/{deployment}/embeddings", "azure_embeddings", handler),
    )


def _azure_openai_auth(server: OpenAIEmbeddingsServer, request: RecordedRequest) -> Response | None:
    # Azure OpenAI: the key goes in `api-key`, an Entra ID token as a bearer token (Azure OpenAI REST reference).
    if server.api_key is None and server.azure_ad_token is None:
        return None
    authorization = request.headers.get("authorization", "")
    bearer = authorization[7:].strip() if authorization[:7].lower() == "bearer " else None
    if (server.api_key is not None and request.headers.get("api-key") == server.api_key) or (
        server.azure_ad_token is not None and bearer == server.azure_ad_token
    ):
        return None
    message = "Access denied due to invalid subscription key or wrong API endpoint."
    return json_response({"error": {"code": "401", "message": message}}, 401)


async def _openai_embeddings(server: OpenAIEmbeddingsServer, request: RecordedRequest) -> Response:
    script = server.embeddings
    script.requests.append(request)
    headers = {"x-request-id": f"req_{time.monotonic_ns():x}"}

    def bad(message: str, param: str | None = None, status: int = 400) -> Response:
        return json_response(_openai_error(message, param), status, headers)

    azure = request.route == "azure_embeddings"
    if azure:
        if not request.query_value("api-version"):  # Azure answers 404 without an api-version
            return json_response({"error": {"code": "404", "message": "Resource not found"}}, 404)
        denied = _azure_openai_auth(server, request)
    else:
        denied = server._auth_failure(request)
    if denied is not None:
        return denied
    body = request.json
    if not isinstance(body, dict):
        return bad("We could not parse the JSON body of your request.")
    unknown = sorted(set(body) - _OPENAI_FIELDS)
    if unknown:  # the API refuses fields it does not know
        return bad(f"Unrecognized request argument supplied: {unknown[0]}")
    model = request.params["deployment"] if azure else body.get("model")
    if not azure and (not isinstance(model, str) or not model):
        return bad("you must provide a model parameter")
    native = script.size_of(str(model))
    if native is None:
        if azure:
            message = (
                "The API deployment for this resource does not exist. If you created the deployment within the "
                "last 5 minutes, please wait a moment and try again."
            )
            return json_response({"error": {"code": "DeploymentNotFound", "message": message}}, 404, headers)
        message = f"The model `{model}` does not exist or you do not have access to it."
        return json_response(_openai_error(message, None, "model_not_found"), 404, headers)
    if "input" not in body:
        return bad("'input' is a required property", "input")
    raw_input = body["input"]
    if isinstance(raw_input, list) and len(raw_input) > _OPENAI_MAX_INPUTS:
        return bad(f"'$.input' is invalid: at most {_OPENAI_MAX_INPUTS} inputs per request", "input")
    texts = _texts_of(raw_input)
    if texts is None or any(not text for text in texts):  # an empty string or empty array is refused
        return bad(_INVALID.format("$.input"), "input")
    counts = [embedding_tokens(text) for text in texts]
    if max(counts) > _OPENAI_MAX_INPUT_TOKENS:
        return bad(
            f"This model's maximum context length is {_OPENAI_MAX_INPUT_TOKENS} tokens, however you requested "
            f"{max(counts)} tokens ({max(counts)} in your prompt; 0 for the completion). Please reduce your prompt; "
            "or completion length.",
        )
    if sum(counts) > _OPENAI_MAX_REQUEST_TOKENS:
        return bad(f"Requested {sum(counts)} tokens, max {_OPENAI_MAX_REQUEST_TOKENS} tokens per request", "input")
    dimensions = body.get("dimensions")
    if dimensions is not None:
        # Only text-embedding-3 and later take `dimensions` (SDK EmbeddingCreateParams.dimensions).
        if not str(model).startswith("text-embedding-3"):
            return bad("This model does not support specifying dimensions.", "dimensions")
        if not isinstance(dimensions, int) or isinstance(dimensions, bool) or not 1 <= dimensions <= native:
            return bad(_INVALID.format("$.dimensions"), "dimensions")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):  # SDK: Literal["float", "base64"]
        return bad(_INVALID.format("$.encoding_format"), "encoding_format")
    size = dimensions or native
    total = sum(counts)

    def render(vectors: list[list[float]]) -> Response:
        data = [
            {"object": "embedding", "index": i, "embedding": float32_base64(v) if encoding == "base64" else v}
            for i, v in enumerate(vectors)
        ]
        usage = {"prompt_tokens": total, "total_tokens": total}
        return json_response({"object": "list", "data": data, "model": model, "usage": usage}, headers=headers)

    return await script.answer(server, request, texts, size, render)
