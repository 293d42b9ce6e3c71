"""This distribution's provider declaration (the `ext.providers` entry point). The model runs in process: no
endpoint, no key, no server address."""

from __future__ import annotations

from ext.core import ProviderInfo

LLAMA_CPP = ProviderInfo(
    name="llama-cpp",
    client="ext.models.llama_cpp:LlamaCppChatCompletionClient",
    distribution="ext-models-llama-cpp",
    model_parameter="model_path",
    example_model="PATH.gguf",
    auth="none (runs in process)",
)
