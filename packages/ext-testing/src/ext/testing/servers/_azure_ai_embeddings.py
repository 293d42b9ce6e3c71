"""Azure AI Model Inference's embeddings routes, as strict as the API: ``POST /embeddings`` and
``/models/embeddings`` on `AzureAIServer` (rules from the REST reference, "Embeddings - Create", 2024-05-01-preview);
``server.embeddings`` (an `EmbeddingScript`) answers the valid requests."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any, Protocol

from ext.testing.servers._embedding_script import EmbeddingScript, FaultTarget, embedding_tokens, float32_base64
from ext.testing.servers._messages import RecordedRequest, Response, Route, json_response

__all__ = ["AZURE_AI_EMBEDDING_PARAMETERS", "AzureAIEmbeddingsServer", "azure_ai_embedding_routes"]

AZURE_AI_EMBEDDING_PARAMETERS = frozenset({"input", "dimensions", "encoding_format", "input_type", "model"})
"""The body fields of the embeddings API (Azure AI Model Inference REST, 2024-05-01-preview)."""


class AzureAIEmbeddingsServer(FaultTarget, Protocol):
    """What these routes read from their server (an `AzureAIServer`)."""

    embeddings: EmbeddingScript
    model_name: str
    max_embedding_inputs: int

    def _version_failure(self, request: RecordedRequest) -> Response | None: ...

    def _auth_failure(self, request: RecordedRequest) -> Response | None: ...

    def _request_id_headers(self) -> dict[str, str]: ...


def azure_ai_embedding_routes(server: AzureAIEmbeddingsServer) -> tuple[Route, ...]:
    """Azure AI Model Inference's embeddings routes (serverless and ``/models`` endpoints)."""
    handler = partial(_azure_ai_embeddings, server)
    return (
        Route("POST", "/embeddings", "embeddings", handler),
        Route("POST", "/models/embeddings", "embeddings", handler),
    )


def _azure_ai_error(code: str, message: str, status: int, details: Sequence[Any] | None = None) -> Response:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return json_response({"error": error}, status)


async def _azure_ai_embeddings(server: AzureAIEmbeddingsServer, request: RecordedRequest) -> Response:
    # Rules from the Azure AI Model Inference REST reference, "Embeddings - Create" (2024-05-01-preview).
    script = server.embeddings
    script.requests.append(request)
    failure = server._version_failure(request) or server._auth_failure(request)
    if failure is not None:
        return failure
    body = request.json
    if not isinstance(body, dict):
        return _azure_ai_error("BadRequest", "Invalid JSON body: the request body must be a JSON object.", 400)
    extra = [key for key in body if key not in AZURE_AI_EMBEDDING_PARAMETERS]
    mode = request.headers.get("extra-parameters", "error").lower()
    if extra and mode not in ("pass-through", "drop"):
        details = [
            {"loc": ["body", k], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"} for k in extra
        ]
        message = f"Extra parameters {extra} are not allowed when extra-parameters is not set or set to be 'error'."
        return _azure_ai_error("Invalid input", message, 422, details)
    raw_input = body.get("input")
    if not isinstance(raw_input, list) or not raw_input or not all(isinstance(t, str) for t in raw_input):
        details = [
            {"loc": ["body", "input"], "msg": "Input should be a non-empty list of strings", "type": "list_type"}
        ]
        return _azure_ai_error("Invalid input", "Input validation error", 422, details)
    texts: list[str] = raw_input
    if len(texts) > server.max_embedding_inputs:
        message = f"Too many inputs: {len(texts)}; the model accepts at most {server.max_embedding_inputs} per request."
        return _azure_ai_error("BadRequest", message, 400)
    if any(not text for text in texts):  # the deployed models refuse an empty input (OpenAI answers 400)
        return _azure_ai_error("BadRequest", "'$.input' is invalid: inputs must not be empty strings.", 400)
    model = body.get("model")
    name = model if isinstance(model, str) and model else server.model_name
    native = script.size_of(name) or 1024
    dimensions = body.get("dimensions")
    if dimensions is not None and (
        not isinstance(dimensions, int) or isinstance(dimensions, bool) or not 1 <= dimensions <= native
    ):
        return _azure_ai_error("BadRequest", f"dimensions must be an integer from 1 to {native}.", 400)
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        # The API lists binary/int8/ubinary/uint8 too; no model served here produces them.
        return _azure_ai_error("BadRequest", f"encoding_format '{encoding}' is not supported by the model.", 400)
    input_type = body.get("input_type")
    if input_type is not None and input_type not in ("text", "query", "document"):
        return _azure_ai_error("BadRequest", "input_type must be one of 'text', 'query', 'document'.", 400)
    size = dimensions or native
    total = sum(embedding_tokens(text) for text in texts)

    def render(vectors: list[list[float]]) -> Response:
        data = [
            {"object": "embedding", "index": i, "embedding": float32_base64(v) if encoding == "base64" else v}
            for i, v in enumerate(vectors)
        ]
        obj = {
            "id": f"emb-{time.monotonic_ns():x}",
            "object": "list",
            "data": data,
            "model": name,
            "usage": {"prompt_tokens": total, "total_tokens": total},
        }
        return json_response(obj, headers=server._request_id_headers())

    return await script.answer(server, request, texts, size, render)
