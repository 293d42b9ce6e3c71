"""The errors the client raises for Ollama's failures: the ollama SDK's own types (`ollama.ResponseError`, the
builtin `ConnectionError`), subclassed to carry what the SDK leaves out: the host, the model, the reply's headers.
Code written against the raw SDK catches them unchanged."""

from __future__ import annotations

from collections.abc import Mapping

import ollama

__all__ = [
    "OllamaConnectionError",
    "OllamaModelNotFoundError",
    "OllamaResponseError",
    "OllamaTimeoutError",
]


class OllamaResponseError(ollama.ResponseError):
    """An error reply from Ollama (`{"error": "..."}` with an HTTP status), or a reply that is not Ollama's JSON.

    `error` and `status_code` as in `ollama.ResponseError` (-1 for an error line inside a 200 stream);
    `headers` are the reply's headers (the retry policy reads `Retry-After` from them); `host` is the server.
    """

    def __init__(self, error: str, status_code: int = -1, *, host: str = "", headers: Mapping[str, str] | None = None):
        # Not ollama.ResponseError.__init__: it parses `error` as JSON again, which fails for some plain texts.
        Exception.__init__(self, error)
        self.error = error
        self.status_code = status_code
        self.host = host
        self.headers: Mapping[str, str] = dict(headers or {})


class OllamaModelNotFoundError(OllamaResponseError):
    """The model is not pulled on the server (Ollama's 404 `model "x" not found, try pulling it first`)."""

    def __init__(self, model: str, *, host: str, server_error: str, headers: Mapping[str, str] | None = None):
        message = f"model {model!r} is not pulled on the Ollama server at {host}: run `ollama pull {model}` there"
        super().__init__(f"{message} (Ollama said: {server_error})", 404, host=host, headers=headers)
        self.model = model


class OllamaConnectionError(ConnectionError):
    """Ollama could not be reached at `host`, or the connection broke off before the reply ended (the SDK raises
    the builtin `ConnectionError` here too, without the host)."""

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message)
        self.host = host


class OllamaTimeoutError(TimeoutError):
    """Ollama at `host` did not answer within the client's `timeout`."""

    def __init__(self, message: str, *, host: str, timeout: float) -> None:
        super().__init__(message)
        self.host = host
        self.timeout = timeout
