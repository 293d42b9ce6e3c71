"""One MCP server's OAuth records in a `TokenStore`, and the mcp SDK's `TokenStorage` over them.

Records are keyed by authorization server (issuer) and resource (the MCP server's canonical URL):

    oauth:issuer|<resource>                -> {"issuer": ...}             which server the resource last used
    oauth:tokens|<issuer>|<resource>       -> the token + its absolute expiry
    oauth:client|<issuer>|<resource>       -> the client registration
    oauth:meta|<issuer>|<resource>         -> the authorization server's metadata (its token endpoint...)

A registration or a token is only ever read back for the issuer it was written under, so credentials obtained
from one authorization server are never offered to another. Tokens and the registration are separate records:
refreshing writes the token record only, and a failed refresh leaves the registration in place.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from mcp.client.auth.utils import issuers_match
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from pydantic import ValidationError

from ._token_store import TokenStore


@dataclass
class Stored:
    """What the store held for a resource when it was loaded."""

    issuer: str | None
    token: OAuthToken | None
    expires_at: float | None
    client: OAuthClientInformationFull | None
    metadata: OAuthMetadata | None
    resource_metadata: ProtectedResourceMetadata | None


class OAuthRecords:
    """The records of one resource. `issuer` is the authorization server the records are read for: the one last
    used (from the store) until discovery names one; writes under a new issuer move the pointer to it."""

    def __init__(self, store: TokenStore, resource: str, fixed_client: OAuthClientInformationFull | None) -> None:
        self.store = store
        self.resource = resource
        self.issuer: str | None = None
        self.fixed_client = fixed_client
        self.issuer_now: Any = None  # set by the flow: a callable giving the issuer discovery settled on, or None

    # --- keys ----------------------------------------------------------------------------------------

    def _pointer(self) -> str:
        return f"oauth:issuer|{self.resource}"

    def _key(self, kind: str, issuer: str | None) -> str:
        return f"oauth:{kind}|{issuer or ''}|{self.resource}"

    # --- whole-resource operations -------------------------------------------------------------------

    async def _read_pointer(self) -> None:
        pointer = await self.store.get(self._pointer())
        issuer = pointer.get("issuer") if pointer else None
        self.issuer = issuer if isinstance(issuer, str) else None

    async def load(self) -> Stored:
        await self._read_pointer()
        token, expires_at = await self.token_record()
        meta = await self.store.get(self._key("meta", self.issuer))
        metadata = resource_metadata = None
        if meta:
            try:
                if meta.get("metadata"):
                    metadata = OAuthMetadata.model_validate(meta["metadata"])
                if meta.get("resource_metadata"):
                    resource_metadata = ProtectedResourceMetadata.model_validate(meta["resource_metadata"])
            except ValidationError:
                metadata = resource_metadata = None
        return Stored(self.issuer, token, expires_at, await self.get_client_info(), metadata, resource_metadata)

    async def token_record(self) -> tuple[OAuthToken | None, float | None]:
        if self.issuer is None:
            await self._read_pointer()  # nothing was stored at start: another process may have logged in since
        record = await self.store.get(self._key("tokens", self.issuer))
        if not record:
            return None, None
        try:
            token = OAuthToken.model_validate(record.get("token"))
        except ValidationError:
            return None, None
        expires_at = record.get("expires_at")
        return token, float(expires_at) if isinstance(expires_at, (int, float)) else None

    async def save_metadata(
        self, issuer: str, metadata: OAuthMetadata, resource_metadata: ProtectedResourceMetadata | None
    ) -> None:
        await self._bind(issuer)
        await self.store.put(
            self._key("meta", issuer),
            {
                "metadata": metadata.model_dump(mode="json", exclude_none=True),
                "resource_metadata": resource_metadata.model_dump(mode="json", exclude_none=True)
                if resource_metadata is not None
                else None,
            },
        )

    async def forget_tokens(self) -> None:
        await self.store.delete(self._key("tokens", self.issuer))

    async def forget_client(self) -> None:
        await self.store.delete(self._key("client", self.issuer))

    async def forget_all(self) -> bool:
        """Delete every record of this resource (logout). True if there was something to delete."""
        pointer = await self.store.get(self._pointer())
        issuers = {self.issuer}
        if pointer and isinstance(pointer.get("issuer"), str):
            issuers.add(pointer["issuer"])
        found = pointer is not None
        for issuer in issuers:
            for kind in ("tokens", "client", "meta"):
                key = self._key(kind, issuer)
                if await self.store.get(key) is not None:
                    found = True
                await self.store.delete(key)
        await self.store.delete(self._pointer())
        return found

    async def _bind(self, issuer: str | None) -> None:
        if issuer and issuer != self.issuer:
            self.issuer = issuer
            await self.store.put(self._pointer(), {"issuer": issuer})

    def _current_issuer(self) -> str | None:
        now = self.issuer_now() if callable(self.issuer_now) else None
        return now if isinstance(now, str) else self.issuer

    # --- the mcp SDK's TokenStorage ------------------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        token, _ = await self.token_record()
        return token

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self._bind(self._current_issuer())
        expires_at = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        await self.store.put(
            self._key("tokens", self.issuer),
            {"token": tokens.model_dump(mode="json", exclude_none=True), "expires_at": expires_at},
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        fixed = self.fixed_client
        if fixed is not None and (
            fixed.issuer is None or self.issuer is None or issuers_match(fixed.issuer, self.issuer)
        ):
            return fixed
        record = await self.store.get(self._key("client", self.issuer))
        if not record:
            return None
        try:
            client = OAuthClientInformationFull.model_validate(record)
        except ValidationError:
            return None
        # A registration bound to another server than the one these records are read for is not offered.
        if client.issuer is not None and self.issuer is not None and not issuers_match(client.issuer, self.issuer):
            return None
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._bind(client_info.issuer or self._current_issuer())
        await self.store.put(self._key("client", self.issuer), client_info.model_dump(mode="json", exclude_none=True))
