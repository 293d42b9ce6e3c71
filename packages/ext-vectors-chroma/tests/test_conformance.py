from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ext.core import BaseVectorStore
from ext.testing.chroma import ChromaServer
from ext.testing.conformance import VectorStoreConformance
from ext.testing.redis import free_port
from ext.vectors.chroma import ChromaVectorStore

TOKEN = "chroma-test-token-5d2e"


class TestChroma(VectorStoreConformance):
    secrets: ClassVar[tuple[str, ...]] = (TOKEN,)

    @pytest.fixture(autouse=True)
    def _server(self, chroma: ChromaServer) -> None:
        self.server = chroma

    async def make_store(self, collection_name: str, vector_size: int) -> BaseVectorStore[Any]:
        # The test server has no authentication and ignores the token; the store must still never show it.
        url = self.server.url
        return ChromaVectorStore(url, collection_name=collection_name, vector_size=vector_size, api_key=TOKEN)

    async def reopen_store(self, store: BaseVectorStore[Any], vector_size: int) -> BaseVectorStore[Any] | None:
        return ChromaVectorStore(self.server.url, collection_name=store.collection_name, vector_size=vector_size)

    def make_unreachable_store(self) -> BaseVectorStore[Any]:
        url = f"http://127.0.0.1:{free_port()}"
        return ChromaVectorStore(url, collection_name="c", vector_size=4, api_key=TOKEN, connect_timeout=5)
