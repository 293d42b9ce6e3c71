"""This distribution's provider declaration (the `ext.providers` entry point)."""

from __future__ import annotations

from typing import Any

from ext.core import ProviderInfo, ServerAddress, address_from_url


def _address(client: Any) -> ServerAddress | None:
    return address_from_url(client.endpoint)


AZURE_AI = ProviderInfo(
    name="azure-ai",
    client="ext.models.azure_ai:AzureAIChatCompletionClient",
    distribution="ext-models-azure-ai",
    model_parameter="model",
    example_model="MODEL",
    auth="AZURE_AI_ENDPOINT, AZURE_AI_API_KEY",
    endpoint_parameter="endpoint",
    endpoint_env="AZURE_AI_ENDPOINT",
    key_env="AZURE_AI_API_KEY",
    # A key or a token credential object: never written in a config file (AZURE_AI_API_KEY holds the key).
    secret_arguments=("credential",),
    server_address=_address,
)
