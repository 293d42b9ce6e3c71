"""`ChromaVectorStore`: ext-core's `VectorStore` on a Chroma server, through Chroma's HTTP API (v2) with httpx.

A collection is a Chroma collection with cosine distance (`configuration.hnsw.space`); its vector size is kept in
the collection's metadata (`ext:vector_size`) so it is known before anything is written. Chroma returns cosine
*distance* (1 - cosine similarity); the store turns it back into similarity, the scale of every ext backend.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from ext.core import (
    BaseVectorStore,
    ClientClosedError,
    ConfigurationError,
    MetadataValue,
    VectorMatch,
    VectorQuery,
    VectorRecord,
    VectorStoreError,
    VectorStoreOptions,
    VectorStoreUnavailableError,
    check_http_url,
    resolve_secret,
)
from ext.vectors.chroma import _metadata

SIZE_KEY = "ext:vector_size"
NAME_KEY = "ext:collection"
# Chroma's rule for collection names (its 400 "Validation error: name: ..."); other names are stored under a digest.
_CHROMA_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")


class ChromaVectorStoreConfig(BaseModel):
    """`ChromaVectorStore` as plain data (the key is never part of a dump: `api_key_env` names it)."""

    model_config = ConfigDict(extra="forbid", defer_build=True, hide_input_in_errors=True)

    url: str = Field(min_length=1, description="http(s):// URL of the Chroma server, without credentials.")
    collection_name: str = Field(min_length=1)
    vector_size: int = Field(gt=0)
    api_key: SecretStr | None = Field(default=None, description="Chroma token; never printed or dumped.")
    api_key_env: str | None = Field(default=None, description="Environment variable holding the token.")
    api_key_header: str = Field(
        default="x-chroma-token",
        description="Header carrying the token: 'x-chroma-token' (Chroma Cloud) or 'authorization' (Bearer).",
    )
    tenant: str = Field(default="default_tenant", min_length=1)
    database: str = Field(default="default_database", min_length=1)
    connect_timeout: float = Field(default=10.0, gt=0, description="Seconds to wait for a connection.")
    timeout: float = Field(default=30.0, gt=0, description="Seconds to wait for the server's answer to one request.")
    hnsw_ef_search: int = Field(default=100, ge=1, description="HNSW candidates per query (Chroma's `ef_search`).")
    hnsw_ef_construction: int = Field(default=100, ge=1, description="HNSW build quality (`ef_construction`).")
    hnsw_max_neighbors: int = Field(default=16, ge=2, description="HNSW graph degree (`max_neighbors`).")


def _check_url(url: str) -> str:
    if not isinstance(url, str) or not url:
        raise ConfigurationError("ChromaVectorStore: url must be an http:// or https:// URL, got an empty value")
    try:
        check_http_url(url, "ChromaVectorStore: url")
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    parts = urlsplit(url)
    # The URL is printed and dumped: a credential in it would leak, so it is refused (without echoing the URL).
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ConfigurationError(
            "ChromaVectorStore: url must not carry credentials, a query or a fragment; give the token as api_key or "
            "api_key_env"
        )
    return url.rstrip("/")


def chroma_name(collection_name: str) -> str:
    """The Chroma collection that holds `collection_name`: the name itself when Chroma accepts it, else a digest."""
    if _CHROMA_NAME.match(collection_name):
        return collection_name
    return "ext-" + hashlib.sha256(collection_name.encode()).hexdigest()[:32]


class ChromaVectorStore(BaseVectorStore[ChromaVectorStoreConfig]):
    """A collection of vectors on a Chroma server (HNSW, cosine), through its HTTP API.

    `url` is the server's address (`http://127.0.0.1:8000`); a token (`api_key`, `api_key_env`, or
    `VectorStoreOptions.api_key`) is sent in `api_key_header` and never printed, logged or dumped. Each upsert is
    one request, which Chroma validates whole and then appends to its log in one statement: a batch is written
    whole or not at all (README).
    """

    component_config_schema = ChromaVectorStoreConfig
    component_provider_override = "ext.vectors.chroma.ChromaVectorStore"

    def __init__(
        self,
        url: str,
        *,
        collection_name: str,
        vector_size: int,
        api_key: str | SecretStr | None = None,
        api_key_env: str | None = None,
        api_key_header: str = "x-chroma-token",
        tenant: str = "default_tenant",
        database: str = "default_database",
        connect_timeout: float = 10.0,
        timeout: float = 30.0,
        hnsw_ef_search: int = 100,
        hnsw_ef_construction: int = 100,
        hnsw_max_neighbors: int = 16,
    ) -> None:
        super().__init__(collection_name=collection_name, vector_size=vector_size)
        secret, from_env = resolve_secret(api_key, api_key_env)
        if api_key_env is not None and secret is None:
            raise ConfigurationError(f"ChromaVectorStore: api_key_env {api_key_env!r} is not set or empty")
        if api_key_header.lower() not in ("x-chroma-token", "authorization"):
            raise ConfigurationError(
                f"ChromaVectorStore: api_key_header must be 'x-chroma-token' or 'authorization', got {api_key_header!r}"
            )
        self._config = ChromaVectorStoreConfig(
            url=_check_url(url),
            collection_name=collection_name,
            vector_size=vector_size,
            api_key=secret,
            api_key_env=from_env,
            api_key_header=api_key_header.lower(),
            tenant=tenant,
            database=database,
            connect_timeout=connect_timeout,
            timeout=timeout,
            hnsw_ef_search=hnsw_ef_search,
            hnsw_ef_construction=hnsw_ef_construction,
            hnsw_max_neighbors=hnsw_max_neighbors,
        )
        self._name = chroma_name(collection_name)
        self._base = f"/api/v2/tenants/{quote(tenant, safe='')}/databases/{quote(database, safe='')}/collections"
        self._client: httpx.AsyncClient | None = None
        # The collection's Chroma id once seen with the right size; dropped when Chroma says it is gone.
        self._collection_id: str | None = None
        self._closed = False

    @classmethod
    def from_options(cls, options: VectorStoreOptions, **kwargs: Any) -> ChromaVectorStore:
        """The store `options` describe: `endpoint` is the server's URL, `api_key` (if any) its token."""
        return cls(
            options.endpoint,
            collection_name=options.collection_name,
            vector_size=options.vector_size,
            api_key=options.api_key,
            **kwargs,
        )

    def _where(self) -> str:
        return f"url={self._config.url!r}"

    # --- HTTP ---------------------------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._closed:
            raise ClientClosedError(f"{self!r} is closed")
        if self._client is None:
            headers = {"content-type": "application/json"}
            key = self._config.api_key
            if key is not None:
                value = key.get_secret_value()
                header = self._config.api_key_header
                headers[header] = f"Bearer {value}" if header == "authorization" else value
            # One client per store: its connections and headers (the token) are this store's alone.
            self._client = httpx.AsyncClient(
                base_url=self._config.url,
                headers=headers,
                timeout=httpx.Timeout(self._config.timeout, connect=self._config.connect_timeout),
            )
        return self._client

    def _scrub(self, text: str) -> str:
        key = self._config.api_key
        if key is not None and key.get_secret_value():
            text = text.replace(key.get_secret_value(), "***")
        return text

    async def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> httpx.Response:
        client = self._http()
        try:
            return await client.request(method, path, json=body)
        except httpx.ConnectTimeout:
            raise VectorStoreUnavailableError(
                f"Chroma at {self._config.url} did not accept a connection within "
                f"connect_timeout={self._config.connect_timeout} s"
            ) from None
        except httpx.TimeoutException:
            raise TimeoutError(
                f"Chroma at {self._config.url} did not answer {method} {path} within timeout={self._config.timeout} s"
            ) from None
        except httpx.TransportError as exc:
            # `from None`: the transport's exception is rebuilt without any secret, the original is dropped.
            detail = self._scrub(str(exc) or type(exc).__name__)
            raise VectorStoreUnavailableError(f"Chroma at {self._config.url} cannot be reached: {detail}") from None

    def _error(self, response: httpx.Response, what: str) -> VectorStoreError:
        try:
            body = response.json()
            detail = f"{body.get('error', '')}: {body.get('message', '')}"
        except ValueError:
            detail = response.text[:500]
        detail = self._scrub(detail)
        message = f"Chroma at {self._config.url} refused {what} ({response.status_code} {detail})"
        if response.status_code in (401, 403):
            return VectorStoreUnavailableError(f"{message}; check api_key and api_key_header")
        if response.status_code == 413:
            return VectorStoreError(f"{message}; the batch is over the server's request size limit: send fewer records")
        return VectorStoreError(message)

    async def _call(self, method: str, path: str, body: Mapping[str, Any] | None, what: str) -> Any:
        response = await self._request(method, path, body)
        if response.status_code != 200:
            raise self._error(response, what)
        return response.json()

    # --- the collection ------------------------------------------------------------------------------------

    def _size_of(self, collection: Mapping[str, Any]) -> int:
        metadata = collection.get("metadata") or {}
        size = metadata.get(SIZE_KEY, collection.get("dimension"))
        space = ((collection.get("configuration_json") or {}).get("hnsw") or {}).get("space")
        if space not in (None, "cosine"):
            raise VectorStoreError(
                f"Chroma collection {self._name!r} uses {space!r} distance; ChromaVectorStore needs cosine"
            )
        # A collection made by another client, still empty, has no size yet: it takes this store's.
        return self.vector_size if size is None else int(size)

    def _accept(self, collection: Mapping[str, Any]) -> str:
        self.check_stored_size(self._size_of(collection))
        self._collection_id = str(collection["id"])
        return self._collection_id

    async def _collection(self) -> dict[str, Any] | None:
        response = await self._request("GET", f"{self._base}/{quote(self._name, safe='')}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._error(response, f"looking up collection {self.collection_name!r}")
        found: dict[str, Any] = response.json()
        return found

    async def _resolve(self) -> str:
        if self._collection_id is not None:
            return self._collection_id
        collection = await self._collection()
        if collection is None:
            raise self.not_found()
        return self._accept(collection)

    async def _records(self, op: str, body: Mapping[str, Any] | None, what: str) -> Any:
        """Call the collection's `op` endpoint (POST `body` to upsert, query, get, delete; GET count)."""
        for attempt in (1, 2):
            collection_id = await self._resolve()
            method = "GET" if body is None else "POST"
            response = await self._request(method, f"{self._base}/{collection_id}/{op}", body)
            if response.status_code == 404 and attempt == 1:
                # The collection this store knew was dropped (perhaps made again): look it up once more.
                self._collection_id = None
                continue
            if response.status_code != 200:
                raise self._error(response, what)
            return response.json()
        raise self.not_found()  # pragma: no cover - the loop returns or raises

    async def create_collection(self) -> None:
        hnsw = {
            "space": "cosine",
            "ef_search": self._config.hnsw_ef_search,
            "ef_construction": self._config.hnsw_ef_construction,
            "max_neighbors": self._config.hnsw_max_neighbors,
        }
        body = {
            "name": self._name,
            "metadata": {SIZE_KEY: self.vector_size, NAME_KEY: self.collection_name},
            "configuration": {"hnsw": hnsw},
            # get_or_create answers with the existing collection (its metadata unchanged) when there is one.
            "get_or_create": True,
        }
        self._accept(await self._call("POST", self._base, body, f"creating collection {self.collection_name!r}"))

    async def collection_exists(self) -> bool:
        return await self._collection() is not None

    async def delete_collection(self) -> None:
        self._collection_id = None
        response = await self._request("DELETE", f"{self._base}/{quote(self._name, safe='')}")
        if response.status_code not in (200, 404):
            raise self._error(response, f"deleting collection {self.collection_name!r}")

    # --- records -------------------------------------------------------------------------------------------

    async def _upsert(self, records: list[VectorRecord]) -> None:
        for index, record in enumerate(records):
            _metadata.check_metadata(record.metadata, f"records[{index}]")
        ids = [r.id for r in records]
        # Chroma's upsert merges metadata into a stored record's: keys the new record lacks are deleted explicitly.
        found = await self._records("get", {"ids": ids, "include": ["metadatas"]}, "reading the batch's records")
        before = {i: set(m or ()) for i, m in zip(found["ids"], found.get("metadatas") or [], strict=True)}
        body = {
            "ids": ids,
            "embeddings": [r.vector for r in records],
            "documents": [r.text for r in records],
            "metadatas": [_metadata.encode(r.metadata, before.get(r.id, set())) for r in records],
        }
        await self._records("upsert", body, f"an upsert of {len(records)} records")

    async def _query(self, query: VectorQuery) -> list[VectorMatch]:
        body: dict[str, Any] = {
            "query_embeddings": [query.vector],
            "n_results": query.top_k,
            "include": ["documents", "metadatas", "distances"],
        }
        where = _metadata.where(query.filter)
        if where is not None:
            body["where"] = where
        found = await self._records("query", body, "a query")
        matches = []
        for id_, distance, text, stored in zip(
            found["ids"][0], found["distances"][0], found["documents"][0], found["metadatas"][0], strict=True
        ):
            # Chroma's cosine space answers distance = 1 - cosine similarity.
            score = 1.0 - float(distance)
            if query.min_score is None or score >= query.min_score:
                matches.append(VectorMatch(id=id_, score=score, text=text or "", metadata=_metadata.decode(stored)))
        matches.sort(key=lambda m: (-m.score, m.id))
        return matches

    async def _get(self, ids: list[str]) -> list[VectorRecord]:
        if not ids:
            await self._resolve()
            return []
        body = {"ids": ids, "include": ["embeddings", "documents", "metadatas"]}
        found = await self._records("get", body, "a get")
        by_id = {
            id_: VectorRecord(id=id_, vector=vector, text=text or "", metadata=_metadata.decode(stored))
            for id_, vector, text, stored in zip(
                found["ids"], found["embeddings"], found["documents"], found["metadatas"], strict=True
            )
        }
        return [by_id[i] for i in ids if i in by_id]

    async def _matching_ids(self, filter: dict[str, list[MetadataValue]], ids: list[str] | None = None) -> list[str]:
        body: dict[str, Any] = {"include": []}
        where = _metadata.where(filter)
        if where is not None:
            body["where"] = where
        if ids is not None:
            body["ids"] = ids
        found = await self._records("get", body, "a get")
        return list(found["ids"])

    async def _delete_listed(self, existing: list[str]) -> int:
        # Chroma's delete answers how many ids it was given, not how many existed: callers list them first.
        if existing:
            await self._records("delete", {"ids": existing}, f"deleting {len(existing)} records")
        return len(existing)

    async def _delete(self, ids: list[str]) -> int:
        if not ids:
            await self._resolve()
            return 0
        return await self._delete_listed(await self._matching_ids({}, ids))

    async def _delete_where(self, filter: dict[str, list[MetadataValue]]) -> int:
        return await self._delete_listed(await self._matching_ids(filter))

    async def _count(self, filter: dict[str, list[MetadataValue]]) -> int:
        if filter:
            return len(await self._matching_ids(filter))
        return int(await self._records("count", None, "a count"))

    async def close(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # --- components ----------------------------------------------------------------------------------------

    def _to_config(self) -> ChromaVectorStoreConfig:
        return self._config

    @classmethod
    def _from_config(cls, config: ChromaVectorStoreConfig) -> ChromaVectorStore:
        # A key read from the environment is read again there; one given in code has to be given again.
        fields = config.model_dump(exclude={"url", "api_key"})
        return cls(config.url, api_key=config.api_key if config.api_key_env is None else None, **fields)
