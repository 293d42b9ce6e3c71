"""The shared chat-client conformance suite against the Ollama-protocol loopback server."""

from __future__ import annotations

from typing import Any

import pytest

from ext.core import ChatCompletionClient
from ext.models.ollama import (
    OllamaChatCompletionClient,
    OllamaConnectionError,
    OllamaResponseError,
    OllamaTimeoutError,
)
from ext.testing.conformance import ChatClientConformance
from ext.testing.servers import LoopbackServer
from ext.testing.servers.ollama import OllamaServer

SECRET = "ollama-proxy-conformance-secret-0000"
AUTH_ENV = "EXT_TEST_OLLAMA_AUTH"


@pytest.fixture(autouse=True)
def _proxy_token(monkeypatch: pytest.MonkeyPatch) -> None:
    # A remote Ollama behind an authenticating proxy: the token reaches the wire through headers_env.
    monkeypatch.setenv(AUTH_ENV, f"Bearer {SECRET}")


class TestOllamaConformance(ChatClientConformance):
    rate_limit_error = OllamaResponseError
    server_error = OllamaResponseError
    connection_error = OllamaConnectionError
    timeout_error = OllamaTimeoutError
    secret = SECRET
    # Ollama's wire has no call ids: results are paired with calls by tool name, then position.
    wire_call_ids = False
    features = frozenset(
        {
            "vision",
            "json_mode",
            "structured_output",
            "parallel_tool_calls",
            "tool_choice_none",
            "thought",
            "model_id_on_wire",
        }
    )

    def make_server(self) -> LoopbackServer:
        return OllamaServer(require_headers={"authorization": f"Bearer {SECRET}"})

    def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
        return OllamaChatCompletionClient(
            "llama3.2", host=server.base_url, headers_env={"Authorization": AUTH_ENV}, **kwargs
        )
