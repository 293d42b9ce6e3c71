"""The embedding protocol: a batch of texts in, one vector per text out, in order; and `BaseEmbeddingClient`,
the logic every implementation shares.

Implementations live in the provider distributions (OpenAI and Azure OpenAI, Ollama, Azure AI Inference,
llama.cpp in process). Vector stores and `VectorMemory` depend on the protocol only. A provider subclasses
`BaseEmbeddingClient` and implements one inner call, `_embed_batch`; the base validates the texts before any
request, splits them into the provider's batch limit, retries through core's `RetryPolicy`, honours a
`CancellationToken`, checks every vector it gets back (count, size, finite values) and sums usage.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import partial
from types import TracebackType
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ._cancellation import CancellationToken, CancelScope
from ._errors import ClientClosedError, ConfigurationError, ExtError
from ._lifecycle import ClientLifecycle
from ._messages import RequestUsage, UsageTally
from ._retry import Classifier, RetryPolicy

logger = logging.getLogger(__name__)


class EmbeddingResult(BaseModel):
    """The vectors for one `embed` call, in the order of the texts, and what the call cost."""

    model_config = ConfigDict(defer_build=True)

    vectors: list[list[float]] = Field(description="One vector per input text, in input order.")
    usage: RequestUsage = Field(default_factory=RequestUsage, description="Tokens read (prompt_tokens).")
    model: str = Field(default="", description="The model that produced the vectors, as the provider named it.")


@runtime_checkable
class EmbeddingClient(Protocol):
    """One async interface over every embedding provider.

    `embed` takes any number of texts: an implementation splits them into the provider's batch limit and
    re-assembles the vectors in order. A cancelled token aborts the request in flight.
    """

    @property
    def vector_size(self) -> int | None:
        """Dimensions of each vector, when known before the first call (else None until then)."""
        ...

    async def embed(
        self, texts: Sequence[str], cancellation_token: CancellationToken | None = None
    ) -> EmbeddingResult: ...

    def total_usage(self) -> RequestUsage:
        """Usage of every completed call since the client was made."""
        ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> EmbeddingClient: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class EmbeddingResponseError(ExtError):
    """A provider answered with vectors that cannot be used: the wrong count, the wrong size, or a value
    that is not finite (NaN, infinity). Nothing is returned or stored when this is raised."""


class BaseEmbeddingClient(ABC, ClientLifecycle):
    """Shared behaviour of every embedding client. A provider sets `provider_name` and `max_batch_size` and
    implements `_embed_batch` (and optionally `_close`, `_known_vector_size`). Its constructor validates its
    arguments as its config and passes that here (`config=`), with the model name and its retry classifier: the
    base takes `dimensions`, `batch_size` and `max_retries` from the config and keeps it for dumps.

    - An empty `texts` list returns an empty result without a request (nothing to embed is not an error).
    - Bad input raises `ConfigurationError` naming the item before any request: a bare string instead of a
      list, an item that is not a string, an empty string (OpenAI answers 400 to one; every provider here
      refuses it the same way).
    - Texts are sent in batches of `batch_size` (at most the provider's `max_batch_size`), one after another,
      and the vectors come back in input order.
    - A cancelled token aborts the request in flight (`asyncio.CancelledError`).
    """

    component_type: ClassVar[str] = "embedding"
    provider_name: ClassVar[str] = "provider"
    max_batch_size: ClassVar[int] = 2048
    """The most texts one request may carry (the provider's documented limit, or the one its class chose)."""
    default_batch_size: ClassVar[int | None] = None
    """`batch_size` when none is given (None: `max_batch_size`)."""

    _config: BaseModel

    def __init__(
        self,
        *,
        model: str,
        dimensions: int | None = None,
        batch_size: int | None = None,
        max_retries: int = 3,
        retry_policy: RetryPolicy | None = None,
        config: BaseModel | None = None,
        classify_error: Classifier | None = None,
    ) -> None:
        """`config`: the component config the client was built from; its fields `dimensions`, `batch_size` and
        `max_retries` (those it has) are used in place of the arguments, and a dump holds it. `classify_error`:
        the provider's retry classifier, consulted before core's (also with a `retry_policy` given)."""
        owner = type(self).__name__
        if config is not None:
            self._config = config
            dimensions = getattr(config, "dimensions", dimensions)
            batch_size = getattr(config, "batch_size", batch_size)
            max_retries = getattr(config, "max_retries", max_retries)
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"{owner}: model must be a non-empty string")
        if dimensions is not None and (not _is_int(dimensions) or dimensions <= 0):
            raise ConfigurationError(f"{owner}: dimensions must be a positive int, got {dimensions!r}")
        if batch_size is None:
            batch_size = self.default_batch_size or self.max_batch_size
        if not _is_int(batch_size) or not 1 <= batch_size <= self.max_batch_size:
            raise ConfigurationError(
                f"{owner}: batch_size must be an int from 1 to {self.max_batch_size} (the provider's limit per "
                f"request), got {batch_size!r}"
            )
        if not _is_int(max_retries) or max_retries < 0:
            raise ConfigurationError(f"{owner}: max_retries must be an int >= 0, got {max_retries!r}")
        self._model = model
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._retry = retry_policy or RetryPolicy(max_retries=max_retries)
        if classify_error is not None:
            self._retry = self._retry.with_classifiers([classify_error])
        self._custom_retry_policy = retry_policy is not None
        self._learned_size: int | None = None
        self._usage = UsageTally()
        self._closed = False

    # --- the provider's part ---------------------------------------------------------------------

    @abstractmethod
    async def _embed_batch(self, texts: list[str]) -> EmbeddingResult:
        """One request for at most `batch_size` non-empty texts: their vectors in order and the usage. SDK
        errors propagate unchanged (the base retries the transient ones)."""

    def _known_vector_size(self) -> int | None:
        """The vector size of the model, when the provider knows it before a call (else None)."""
        return None

    # --- public API ------------------------------------------------------------------------------

    @property
    def model(self) -> str:
        return self._model

    @property
    def dimensions(self) -> int | None:
        """The vector size asked of the provider, if any."""
        return self._dimensions

    @property
    def batch_size(self) -> int:
        """Most texts per request."""
        return self._batch_size

    @property
    def vector_size(self) -> int | None:
        """Dimensions of each vector: `dimensions` when set, else what the model is known to give, else what
        the first call returned (None before it)."""
        return self._dimensions or self._known_vector_size() or self._learned_size

    def check_texts(self, texts: Sequence[str]) -> list[str]:
        """`texts` as a list, or a `ConfigurationError` naming the first bad item (raised before any request)."""
        if self._closed:
            raise ClientClosedError(f"{type(self).__name__} is closed")
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise ConfigurationError(f"texts must be a list of strings, got {type(texts).__name__}")
        out = list(texts)
        for i, text in enumerate(out):
            if not isinstance(text, str):
                raise ConfigurationError(f"texts[{i}] must be a string, got {type(text).__name__}")
            if not text:
                raise ConfigurationError(f"texts[{i}] is an empty string; every text must have content")
        return out

    async def embed(self, texts: Sequence[str], cancellation_token: CancellationToken | None = None) -> EmbeddingResult:
        """One vector per text, in order, with the usage of every request made. See the class docstring."""
        items = self.check_texts(texts)
        if cancellation_token is not None and not isinstance(cancellation_token, CancellationToken):
            raise ConfigurationError(
                f"cancellation_token must be a CancellationToken, got {type(cancellation_token).__name__}"
            )
        if not items:
            return EmbeddingResult(vectors=[], model=self._model)
        vectors: list[list[float]] = []
        usages: list[RequestUsage] = []
        model = ""
        with CancelScope(cancellation_token):
            for start in range(0, len(items), self._batch_size):
                batch = items[start : start + self._batch_size]
                result = await self._retry.run(partial(self._embed_batch, batch))
                self._check_vectors(result.vectors, len(batch), start)
                vectors.extend(result.vectors)
                usages.append(result.usage)
                model = model or result.model
        usage = usages[0] if len(usages) == 1 else RequestUsage.sum(usages)
        self._usage.add(usage)
        return EmbeddingResult(vectors=vectors, usage=usage, model=model or self._model)

    def _check_vectors(self, vectors: list[list[float]], expected: int, offset: int) -> None:
        owner = type(self).__name__
        if len(vectors) != expected:
            raise EmbeddingResponseError(f"{owner}: the provider returned {len(vectors)} vectors for {expected} texts")
        size = self.vector_size
        for i, vector in enumerate(vectors):
            if size is None:
                size = len(vector)
            if len(vector) != size or not vector:
                raise EmbeddingResponseError(
                    f"{owner}: the vector for texts[{offset + i}] has {len(vector)} dimensions, expected {size}"
                )
            # One C-level sum finds NaN and infinity in the common all-finite case; the scan names the value.
            if not math.isfinite(sum(vector)):
                bad = next((j for j, x in enumerate(vector) if not math.isfinite(x)), None)
                if bad is not None:
                    raise EmbeddingResponseError(
                        f"{owner}: the vector for texts[{offset + i}] has a non-finite value at [{bad}] "
                        f"({vector[bad]!r}); nothing was returned"
                    )
        if self._learned_size is None and size is not None:
            self._learned_size = size


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


__all__ = ["BaseEmbeddingClient", "EmbeddingClient", "EmbeddingResponseError", "EmbeddingResult"]
