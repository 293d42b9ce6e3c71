"""Test credentials for SDKs that take credential objects instead of keys."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["StaticTokenCredential"]


class StaticTokenCredential:
    """The smallest async token credential (azure-core's `AsyncTokenCredential` protocol): `get_token` returns
    `token`, valid for an hour, and records the scopes of every call in `calls`. What an
    `azure.identity.aio` credential looks like to an Azure SDK, without Entra ID. Needs azure-core
    (`ext-testing[azure]`)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.calls: list[tuple[str, ...]] = []
        self.closed = False

    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        self.calls.append(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)

    async def close(self) -> None:
        self.closed = True

    async def __aenter__(self) -> StaticTokenCredential:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return "StaticTokenCredential(token=***)"
