"""Capabilities of models commonly deployed on Azure AI Foundry, over ext-core's table.

Names are matched case-insensitively by prefix (longest wins); a name no rule matches gets ext-core's
defaults (text, tools and JSON mode, no vision, an 8192-token window), overridable per client.
"""

from __future__ import annotations

from ext.core import KNOWN_MODELS, ModelRule

AZURE_AI_MODELS = KNOWN_MODELS.extend(
    [
        ModelRule.of("phi-4-multimodal", vision=True, family="phi-4", context_window=128_000),
        ModelRule.of("phi-4-reasoning", family="phi-4", context_window=32_768, reasoning=True),
        ModelRule.of("phi-4-mini", family="phi-4", context_window=128_000),
        ModelRule.of("phi-3.5-vision", vision=True, family="phi-3", context_window=128_000),
        ModelRule.of("phi-3", family="phi-3", context_window=128_000),
        ModelRule.of("llama-3.2-11b-vision", vision=True, family="llama-3", context_window=128_000),
        ModelRule.of("llama-3.2-90b-vision", vision=True, family="llama-3", context_window=128_000),
        ModelRule.of("llama-4", vision=True, family="llama-4", context_window=128_000),
        ModelRule.of("mistral-large", family="mistral", context_window=128_000),
        ModelRule.of("mistral-small", vision=True, family="mistral", context_window=128_000),
        ModelRule.of("mistral-medium", vision=True, family="mistral", context_window=128_000),
        ModelRule.of("ministral", family="mistral", context_window=128_000),
        ModelRule.of("codestral", family="mistral", context_window=256_000),
        ModelRule.of("cohere-command", family="cohere-command", context_window=128_000),
        ModelRule.of("deepseek-v3", family="deepseek-v3", context_window=128_000),
        ModelRule.of("mai-ds-r1", family="deepseek-r1", context_window=128_000, reasoning=True),
        ModelRule.of("grok-3", family="grok-3", context_window=131_072),
        ModelRule.of("jamba", family="jamba", context_window=256_000),
    ]
)
"""ext-core's `KNOWN_MODELS` plus the Azure AI Foundry catalogue's common families."""
