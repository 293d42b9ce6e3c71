"""This distribution's provider declaration (the `ext.providers` entry point)."""

from __future__ import annotations

from ext.core import ProviderInfo

OLLAMA = ProviderInfo(
    name="ollama",
    client="ext.models.ollama:OllamaChatCompletionClient",
    distribution="ext-models-ollama",
    model_parameter="model",
    example_model="llama3.2",
    auth="none (OLLAMA_HOST for another server)",
    endpoint_parameter="host",
    endpoint_env="OLLAMA_HOST",
    server_url_attribute="host",
)
