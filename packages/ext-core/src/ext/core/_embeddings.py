"""The embedding protocol: a batch of texts in, one vector per text out, in order.

Implementations live in the provider distributions (OpenAI and Azure OpenAI, Ollama, Azure AI Inference,
llama.cpp in process). Vector stores and `VectorMemory` depend on this protocol only.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ._cancellation import CancellationToken
from ._messages import RequestUsage


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


__all__ = ["EmbeddingClient", "EmbeddingResult"]
