"""This distribution's provider declarations (the `ext.providers` entry points): OpenAI and Azure OpenAI."""

from __future__ import annotations

from typing import Any

from ext.core import ProviderInfo, ServerAddress, address_from_url


def _azure_address(client: Any) -> ServerAddress | None:
    # The SDK's base URL: the resource endpoint the client resolved (argument or AZURE_OPENAI_ENDPOINT).
    return address_from_url(str(client._sdk.base_url))


OPENAI = ProviderInfo(
    name="openai",
    client="ext.models.openai:OpenAIChatCompletionClient",
    distribution="ext-models-openai",
    model_parameter="model",
    example_model="gpt-4o-mini",
    auth="OPENAI_API_KEY (OPENAI_BASE_URL for another OpenAI-compatible endpoint)",
    endpoint_parameter="base_url",
    endpoint_env="OPENAI_BASE_URL",
    key_env="OPENAI_API_KEY",
    server_url_attribute="base_url",
)

AZURE_OPENAI = ProviderInfo(
    name="azure-openai",
    client="ext.models.openai:AzureOpenAIChatCompletionClient",
    distribution="ext-models-openai",
    model_parameter="azure_deployment",
    example_model="DEPLOYMENT",
    auth="AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY (or an Entra ID token), OPENAI_API_VERSION",
    endpoint_parameter="azure_endpoint",
    endpoint_env="AZURE_OPENAI_ENDPOINT",
    key_env="AZURE_OPENAI_API_KEY",
    server_address=_azure_address,
)
