"""`CooldownMiddleware`: one pipeline's client refused at once while it cools down (without a fallback)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ext.core import ConfigurationError, CreateResult, classify_error
from ext.pipeline import ChatCall, ChatItem, ChatMiddleware, CreateNext, StreamNext

from ._cooldown import Cooldowns
from ._errors import ClientCoolingDownError
from ._fallback import client_name


class CooldownMiddleware(ChatMiddleware):
    """Counts the outcome of every call of the pipeline's client in `cooldowns`, and while the client cools down
    raises `ClientCoolingDownError` before any request is sent. `name` keys the client in the backend (default
    `provider/model`). With a fallback, give the `Cooldowns` to `FallbackMiddleware` instead: it skips cooled
    clients and counts every client it calls."""

    def __init__(self, cooldowns: Cooldowns, *, name: str | None = None) -> None:
        if not isinstance(cooldowns, Cooldowns):
            raise ConfigurationError(f"cooldowns must be a Cooldowns, got {type(cooldowns).__name__}")
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
        self._cooldowns = cooldowns
        self._name = name

    @property
    def cooldowns(self) -> Cooldowns:
        return self._cooldowns

    def __repr__(self) -> str:
        return f"CooldownMiddleware({self._cooldowns!r})"

    async def _check(self, call: ChatCall) -> str:
        name = self._name or client_name(call.client)
        left = await self._cooldowns.remaining(name)
        if left > 0:
            raise ClientCoolingDownError(name, left)
        return name

    async def _failed(self, name: str, error: Exception) -> None:
        found = classify_error(error)
        if found is not None:
            await self._cooldowns.failed(name, found.kind)

    async def create(self, call: ChatCall, next: CreateNext) -> CreateResult:
        name = await self._check(call)
        try:
            result = await next(call)
        except Exception as exc:
            await self._failed(name, exc)
            raise
        await self._cooldowns.succeeded(name)
        return result

    async def create_stream(self, call: ChatCall, next: StreamNext) -> AsyncIterator[ChatItem]:
        name = await self._check(call)
        stream = next(call)
        try:
            async for item in stream:
                if isinstance(item, CreateResult):
                    await self._cooldowns.succeeded(name)
                yield item
        except Exception as exc:
            await self._failed(name, exc)
            raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def close(self) -> None:
        await self._cooldowns.close()
