"""The embeddings routes of the loopback servers, each as strict as the API it stands for.

- OpenAI ``POST /v1/embeddings`` (and ``/embeddings``), Azure OpenAI
  ``POST /openai/deployments/{deployment}/embeddings?api-version=...``: :func:`openai_embedding_routes`.
- Ollama ``POST /api/embed``: :func:`ollama_embedding_routes`.
- Azure AI Model Inference ``POST /embeddings`` and ``/models/embeddings``: :func:`azure_ai_embedding_routes`.

Each server keeps an :class:`~ext.testing.servers._embeddings.EmbeddingScript` as ``server.embeddings``. The source
of each rule is noted beside it.
"""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ext.testing.servers._embeddings import embedding_tokens
from ext.testing.servers._messages import RecordedRequest, Response, Route, json_response

if TYPE_CHECKING:
    from ext.testing.servers.azure_ai import AzureAIServer
    from ext.testing.servers.ollama import OllamaServer
    from ext.testing.servers.openai import OpenAIServer

__all__ = [
    "AZURE_AI_EMBEDDING_PARAMETERS",
    "OLLAMA_EMBEDDING_SIZES",
    "OPENAI_EMBEDDING_SIZES",
    "azure_ai_embedding_routes",
    "ollama_embedding_routes",
    "openai_embedding_routes",
]

OPENAI_EMBEDDING_SIZES = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Native vector sizes (OpenAI embeddings guide, "Embedding models")."""
OLLAMA_EMBEDDING_SIZES = {"nomic-embed-text": 768, "all-minilm": 384, "mxbai-embed-large": 1024}
"""Native vector sizes of Ollama's library embedding models (ollama.com/library)."""

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


def _float32_base64(vector: list[float]) -> str:
    # What the SDK decodes: little-endian float32 (numpy.frombuffer(dtype="float32") / array("f")).
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def openai_embedding_routes(server: OpenAIServer) -> tuple[Route, ...]:
    """OpenAI's and Azure OpenAI's embeddings routes, answered by ``server.embeddings``."""
    handler = partial(_openai_embeddings, server)
    return (
        Route("POST", "/v1/embeddings", "embeddings", handler),
        Route("POST", "/embeddings", "embeddings", handler),
        Route("POST", "/openai/deployments/{deployment}/embeddings", "azure_embeddings", handler),
    )


def _azure_openai_auth(server: OpenAIServer, request: RecordedRequest) -> Response | None:
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


async def _openai_embeddings(server: OpenAIServer, request: RecordedRequest) -> Response:
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
            {"object": "embedding", "index": i, "embedding": _float32_base64(v) if encoding == "base64" else v}
            for i, v in enumerate(vectors)
        ]
        usage = {"prompt_tokens": total, "total_tokens": total}
        return json_response({"object": "list", "data": data, "model": model, "usage": usage}, headers=headers)

    return await script.answer(server, request, texts, size, render)


def ollama_embedding_routes(server: OllamaServer) -> tuple[Route, ...]:
    """Ollama's ``POST /api/embed``, answered by ``server.embeddings``."""
    return (Route("POST", "/api/embed", "embed", partial(_ollama_embed, server)),)


async def _ollama_embed(server: OllamaServer, request: RecordedRequest) -> Response:
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


AZURE_AI_EMBEDDING_PARAMETERS = frozenset({"input", "dimensions", "encoding_format", "input_type", "model"})
"""The body fields of the embeddings API (Azure AI Model Inference REST, 2024-05-01-preview)."""


def azure_ai_embedding_routes(server: AzureAIServer) -> tuple[Route, ...]:
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


async def _azure_ai_embeddings(server: AzureAIServer, request: RecordedRequest) -> Response:
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
            {"object": "embedding", "index": i, "embedding": _float32_base64(v) if encoding == "base64" else v}
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
