"""`WordLlamaEmbeddingClient`: ext's offline embedder, WordLlama's static embeddings loaded from its own wheel.

WordLlama (MIT) is a static embedding model: a table of token vectors distilled from a large language model's input
embeddings and trained for similarity, averaged over a text's tokens. Its wheel ships the `l2_supercat` model at
256 dimensions (16 MB of safetensors) and its tokenizer, and it needs numpy and `tokenizers` only (no torch). It is
trained so that its vectors can be truncated: `dimensions` 64 or 128 keep the leading components of the same table.

Loading never reaches for the network. `WordLlama.load()` looks for the tokenizer in a folder named `tokenizer`,
misses the file its wheel ships in `tokenizers/`, and would download one from a model hub; `load_wordllama` passes
the package folder as `cache_dir` with `disable_download=True`, so both shipped files are found and a missing one is
an error naming it, never a download. Importing wordllama calls `logging.basicConfig(level=INFO)`, which would
make every library's INFO records appear on stderr; the import here runs with a placeholder root handler, so that
call finds one and does nothing.

Texts are embedded on one worker thread per client, `batch_size` texts a call (the event loop never blocks on
them). A cancelled token returns at once; the batch already on the thread finishes there (about 0.1 s for 256
chunks of 100 words).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ext.core import (
    BaseEmbeddingClient,
    ClientClosedError,
    ConfigurationError,
    EmbeddingResult,
    RequestUsage,
    config_from_arguments,
)

if TYPE_CHECKING:
    from wordllama import WordLlamaInference

__all__ = [
    "DEFAULT_DIMENSIONS",
    "DIMENSIONS",
    "WordLlamaEmbeddingClient",
    "WordLlamaEmbeddingConfig",
    "load_wordllama",
]

MODEL_CONFIG = "l2_supercat"
"""The WordLlama model its wheel ships (weights at 256 dimensions and the tokenizer)."""
DEFAULT_DIMENSIONS = 256
DIMENSIONS = (64, 128, 256)
"""The sizes the shipped model gives: its full 256, or the leading 64 or 128 components (trained to be cut so)."""
_TEXTS_PER_PASS = 32
"""Texts per pass. A pass pads every text to its longest one's tokens (1 KB of float32 a token, twice over): 32
texts of `max_chars` stay near 500 MB at the very worst (one token a character), and texts go in length order, so
padding is small."""


def _import_wordllama() -> Any:
    """The wordllama module, imported without its `logging.basicConfig(level=INFO)` taking effect."""
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)  # basicConfig does nothing when the root logger has a handler
    try:
        import wordllama
    finally:
        root.removeHandler(placeholder)
    return wordllama


def load_wordllama(dimensions: int = DEFAULT_DIMENSIONS) -> WordLlamaInference:
    """WordLlama's own model object (`WordLlamaInference`) for the model its wheel ships, cut to `dimensions`;
    from the installed files only (see the module docstring). Raises `ConfigurationError` when wordllama or one of
    its shipped files is missing."""
    if dimensions not in DIMENSIONS:
        raise ConfigurationError(
            f"dimensions must be one of {list(DIMENSIONS)} (the shipped model's), got {dimensions!r}"
        )
    try:
        wordllama = _import_wordllama()
    except ImportError:
        raise ConfigurationError(
            "wordllama is not installed: pip install 'wordllama>=0.4,<0.5' (or, from a clone, "
            "pip install -e packages/ext-models-wordllama)"
        ) from None
    folder = Path(wordllama.__file__).parent
    try:
        model: WordLlamaInference = wordllama.WordLlama.load(
            config=MODEL_CONFIG,
            cache_dir=folder,
            dim=DEFAULT_DIMENSIONS,
            trunc_dim=None if dimensions == DEFAULT_DIMENSIONS else dimensions,
            disable_download=True,
        )
    except FileNotFoundError as exc:
        raise ConfigurationError(
            f"the WordLlama model is incomplete in {folder} ({exc}); reinstall wordllama (0.4 ships its model)"
        ) from None
    return model


def _embed_pass(model: WordLlamaInference, texts: list[str], normalize: bool) -> tuple[list[list[float]], int]:
    """The vectors of `texts` and the tokens read: the steps of WordLlama's own `embed` (dense model), on one
    tokenization that also gives the count (`embed` would tokenize again). A test holds the vectors equal to
    `embed`'s, number for number."""
    encodings = model.tokenize(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int32)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
    np.clip(ids, 0, model.embedding.shape[0] - 1, out=ids)
    pooled = model.avg_pool(model.embedding[ids], mask)
    if normalize:
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled.tolist(), int(mask.sum())


class WordLlamaEmbeddingConfig(BaseModel):
    """`WordLlamaEmbeddingClient` configuration."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    dimensions: int = Field(DEFAULT_DIMENSIONS, description="Vector size: 256 (the model's), 128 or 64.")
    normalize: bool = Field(True, description="Scale each vector to length 1 (cosine = dot product).")
    max_chars: int = Field(
        8192, gt=0, description="Characters of a text read at most; the rest is cut (a static model gains little)."
    )
    batch_size: Optional[int] = Field(None, gt=0, le=4096, description="Texts per call on the thread (default 256).")
    max_retries: int = Field(0, ge=0, description="In process there is nothing transient to retry.")

    @field_validator("dimensions")
    @classmethod
    def _shipped_size(cls, value: int) -> int:
        if value not in DIMENSIONS:
            raise ValueError(f"must be one of {list(DIMENSIONS)} (the sizes of the shipped model)")
        return value


class WordLlamaEmbeddingClient(BaseEmbeddingClient):
    """Embeddings from WordLlama in this process: no server, no key, no network. See the module docstring."""

    provider_name: ClassVar[str] = "wordllama"
    max_batch_size: ClassVar[int] = 4096
    default_batch_size: ClassVar[int | None] = 256
    component_config_schema: ClassVar[type[BaseModel]] = WordLlamaEmbeddingConfig
    component_provider_override: ClassVar[str | None] = "ext.models.wordllama.WordLlamaEmbeddingClient"

    _config: WordLlamaEmbeddingConfig

    def __init__(
        self,
        *,
        dimensions: int = DEFAULT_DIMENSIONS,
        normalize: bool = True,
        max_chars: int = 8192,
        batch_size: int | None = None,
        max_retries: int = 0,
    ) -> None:
        config = config_from_arguments(WordLlamaEmbeddingConfig, locals(), type(self).__name__)
        super().__init__(model=f"wordllama-{MODEL_CONFIG}-{config.dimensions}", config=config)
        self._wordllama: WordLlamaInference | None = load_wordllama(config.dimensions)
        # One thread: calls run in order, and close() waits for the batch in progress.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ext-wordllama-embed")

    def _run(self, texts: list[str]) -> tuple[list[list[float]], int]:
        model = self._wordllama
        if model is None:
            raise ClientClosedError(f"{type(self).__name__} is closed")
        cut = [text[: self._config.max_chars] for text in texts]
        order = sorted(range(len(cut)), key=lambda i: len(cut[i]))
        out: list[list[float]] = [[] for _ in texts]
        tokens = 0
        for start in range(0, len(order), _TEXTS_PER_PASS):
            indices = order[start : start + _TEXTS_PER_PASS]
            vectors, read = _embed_pass(model, [cut[i] for i in indices], self._config.normalize)
            tokens += read
            for index, vector in zip(indices, vectors, strict=True):
                out[index] = vector
        return out, tokens

    async def _embed_batch(self, texts: list[str]) -> EmbeddingResult:
        vectors, tokens = await asyncio.wrap_future(self._executor.submit(self._run, texts))
        return EmbeddingResult.model_construct(
            vectors=vectors, usage=RequestUsage(prompt_tokens=tokens), model=self.model
        )

    async def _close(self) -> None:
        """Drop the model after the batch running on the thread (if any) has finished."""
        await asyncio.wrap_future(self._executor.submit(self._drop))
        self._executor.shutdown(wait=False)

    def _drop(self) -> None:
        self._wordllama = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"
