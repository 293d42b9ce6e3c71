"""This distribution's provider declaration (the `ext.providers` entry point)."""

from __future__ import annotations

from typing import Any

from ext.core import ProviderInfo, ServerAddress, address_from_url


def _address(client: Any) -> ServerAddress | None:
    return address_from_url(client.host)


OLLAMA = ProviderInfo(
    name="ollama",
    client="ext.models.ollama:OllamaChatCompletionClient",
    distribution="ext-models-ollama",
    model_parameter="model",
    example_model="llama3.2",
    auth="none (OLLAMA_HOST for another server)",
    endpoint_parameter="host",
    endpoint_env="OLLAMA_HOST",
    server_address=_address,
)
