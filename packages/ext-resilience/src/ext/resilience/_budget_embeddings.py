"""`BudgetedEmbeddingClient`: a `Budget` over an `EmbeddingClient` (embeddings have no pipeline), so one budget
counts chat and embedding spend alike."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

from ext.core import (
    CancellationToken,
    ConfigurationError,
    EmbeddingClient,
    EmbeddingResult,
    RequestUsage,
    text_token_bound,
)

from ._budget import Budget
from ._ratelimit_keys import current_caller_key

__all__ = ["BudgetedEmbeddingClient"]


class BudgetedEmbeddingClient:
    """An `EmbeddingClient` whose every `embed` is checked against `budget` before and recorded after.

    The call's key is `key` (default `global`): `model` and `client` use the embedding client's `provider_name`
    and `model`, `caller` the key `limit_key` set. The prompt estimate is ext's token bound of the texts.
    """

    def __init__(self, client: EmbeddingClient, budget: Budget, *, key: str = "global") -> None:
        if not isinstance(client, EmbeddingClient):
            raise ConfigurationError(f"client must be an EmbeddingClient, got {type(client).__name__}")
        if not isinstance(budget, Budget):
            raise ConfigurationError(f"budget must be a Budget, got {type(budget).__name__}")
        if key not in ("global", "client", "model", "caller"):
            raise ConfigurationError(f"key must be one of global, client, model, caller, got {key!r}")
        self._client = client
        self._budget = budget
        self._key = key
        self._model = str(getattr(client, "model", "") or "")
        self._provider = str(getattr(client, "provider_name", None) or type(client).__name__)

    def __repr__(self) -> str:
        return f"BudgetedEmbeddingClient({self._client!r}, {self._budget!r})"

    @property
    def client(self) -> EmbeddingClient:
        return self._client

    @property
    def vector_size(self) -> int | None:
        return self._client.vector_size

    def _call_key(self) -> str:
        if self._key == "client":
            return self._provider
        if self._key == "model":
            return f"{self._provider}/{self._model}"
        if self._key == "caller":
            return current_caller_key()
        return "global"

    async def embed(self, texts: Sequence[str], cancellation_token: CancellationToken | None = None) -> EmbeddingResult:
        tokens = sum(text_token_bound(text) for text in texts if isinstance(text, str))
        hold = await self._budget.hold(
            key=self._call_key(), model=self._model, provider=self._provider, prompt_tokens=tokens
        )
        try:
            result = await self._client.embed(texts, cancellation_token)
        except BaseException:
            await self._budget.settle(hold, None)
            raise
        await self._budget.settle(hold, result.usage)
        return result

    def total_usage(self) -> RequestUsage:
        return self._client.total_usage()

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> BudgetedEmbeddingClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
