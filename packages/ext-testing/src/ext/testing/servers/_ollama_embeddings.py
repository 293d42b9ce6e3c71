"""Ollama's embeddings route, as strict as the server: ``POST /api/embed`` on `OllamaServer` (rules from Ollama's
EmbedHandler, server/routes.go, and docs/api.md "Generate Embeddings"); ``server.embeddings`` (an `EmbeddingScript`)
answers the valid requests."""

from __future__ import annotations

from functools import partial
from typing import Protocol

from ext.testing.servers._embedding_script import EmbeddingScript, FaultTarget, embedding_tokens
from ext.testing.servers._messages import RecordedRequest, Response, Route, json_response

__all__ = ["OLLAMA_EMBEDDING_SIZES", "OllamaEmbeddingsServer", "ollama_embedding_routes"]

OLLAMA_EMBEDDING_SIZES = {"nomic-embed-text": 768, "all-minilm": 384, "mxbai-embed-large": 1024}
"""Native vector sizes of Ollama's library embedding models (ollama.com/library)."""


class OllamaEmbeddingsServer(FaultTarget, Protocol):
    """What this route reads from its server (an `OllamaServer`)."""

    embeddings: EmbeddingScript
    context_length: int

    def is_pulled(self, model: str) -> bool: ...

    def _unauthorized(self, request: RecordedRequest) -> Response | None: ...


def ollama_embedding_routes(server: OllamaEmbeddingsServer) -> tuple[Route, ...]:
    """Ollama's ``POST /api/embed``, answered by ``server.embeddings``."""
    return (Route("POST", "/api/embed", "embed", partial(_ollama_embed, server)),)


async def _ollama_embed(server: OllamaEmbeddingsServer, request: RecordedRequest) -> Response:
    # Rules from Ollama's EmbedHandler (server/routes.go) and docs/api.md "Generate Embeddings".
    script = server.embeddings
    script.requests.append(request)
    denied = server._unauthorized(request)
    if denied is not None:
        return denied
    body = request.json
    if not isinstance(body, dict):
        return json_response({"error": "invalid character in request body"}, 400)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return json_response({"error": "model is required"}, 400)
    if not server.is_pulled(model):
        return json_response({"error": f'model "{model}" not found, try pulling it first'}, 404)
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        texts = [raw_input] if raw_input else []  # an empty string embeds nothing
    elif isinstance(raw_input, list) and all(isinstance(item, str) for item in raw_input):
        texts = list(raw_input)
    elif raw_input is None:
        texts = []
    else:
        return json_response({"error": "invalid input type"}, 400)
    if not texts:  # Ollama answers an empty input with no embeddings (it only loads the model)
        return json_response({"model": model, "embeddings": []})
    truncate = body.get("truncate", True)
    if not isinstance(truncate, bool):
        return json_response({"error": "json: cannot unmarshal into Go struct field EmbedRequest.truncate"}, 400)
    counts = [embedding_tokens(text) for text in texts]
    if not truncate and max(counts) > server.context_length:
        return json_response({"error": "the input length exceeds the context length"}, 400)
    base = model.split(":", 1)[0]
    native = script.size_of(base) or 768
    dimensions = body.get("dimensions")
    if dimensions is not None:
        if not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 0:
            return json_response({"error": "dimensions must be a positive integer"}, 400)
        if dimensions > native:
            return json_response({"error": f"dimensions must not exceed {native}"}, 400)
    size = dimensions or native
    prompt_tokens = sum(min(c, server.context_length) for c in counts)

    def render(vectors: list[list[float]]) -> Response:
        return json_response(
            {
                "model": model,
                "embeddings": vectors,
                "total_duration": 14_143_917,
                "load_duration": 1_019_500,
                "prompt_eval_count": prompt_tokens,
            }
        )

    return await script.answer(server, request, texts, size, render)
