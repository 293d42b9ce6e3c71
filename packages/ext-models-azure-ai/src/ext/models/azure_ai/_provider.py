"""This distribution's provider declaration (the `ext.providers` entry point)."""

from __future__ import annotations

from ext.core import ProviderInfo

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
    server_url_attribute="endpoint",
)
