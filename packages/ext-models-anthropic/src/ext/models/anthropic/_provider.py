"""This distribution's provider declaration (the `ext.providers` entry point)."""

from __future__ import annotations

from ext.core import ProviderInfo

ANTHROPIC = ProviderInfo(
    name="anthropic",
    client="ext.models.anthropic:AnthropicChatCompletionClient",
    distribution="ext-models-anthropic",
    model_parameter="model",
    example_model="claude-sonnet-4-5",
    auth="ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL for another endpoint)",
    endpoint_parameter="base_url",
    endpoint_env="ANTHROPIC_BASE_URL",
    key_env="ANTHROPIC_API_KEY",
    # The Messages API requires max_tokens; a command line rarely gives it.
    required_arguments={"max_tokens": 1024},
    server_url_attribute="base_url",
)
