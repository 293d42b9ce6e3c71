"""What every loopback server's embeddings routes share: deterministic vectors, a token estimate, the float32
base64 encoding, and the `EmbeddingScript` a test uses to make the next requests fail, hang or return chosen vectors.
Each protocol's routes are in a module named for it (`_openai_embeddings`, `_ollama_embeddings`,
`_azure_ai_embeddings`); they read their server through a Protocol they declare, so no server module is imported
back.

The vectors are a function of the text alone (a SHA-256-seeded Gaussian, normalised to length 1 and rounded to
float32, the precision every provider sends), so a test can compute what the server will return with
:func:`embedding_vector` and assert order and values.
"""

from __future__ import annotations

import array
import base64
import hashlib
import math
import random
import struct
from collections import deque
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Protocol, Union

from ext.testing.script import Fault
from ext.testing.servers._messages import RecordedRequest, Response

if TYPE_CHECKING:
    from ext.testing.servers._http import _Connection

__all__ = [
    "EmbeddingScript",
    "EmbeddingScriptItem",
    "FaultTarget",
    "VectorFunction",
    "embedding_tokens",
    "embedding_vector",
    "fault_response",
    "float32_base64",
]

VectorFunction = Callable[[list[str]], list[list[float]]]
"""Given the texts of one request, the vectors to answer with (any count, size or values: to test a client's
checks)."""

EmbeddingScriptItem = Union[Fault, VectorFunction]


class FaultTarget(Protocol):
    """What answering a fault from inside a route takes from the server (a `LoopbackServer`): its open connections
    (``hang`` and ``drop`` act on the request's own) and its protocol's error shape."""

    @property
    def _connections(self) -> Collection[_Connection]: ...

    def render_fault(self, fault: Fault, request: RecordedRequest) -> Response: ...


def embedding_vector(text: str, dimensions: int) -> list[float]:
    """The vector every loopback server returns for ``text``: unit length, float32 values, ``dimensions`` long."""
    rng = random.Random(hashlib.sha256(text.encode("utf-8")).digest())
    raw = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(math.fsum(x * x for x in raw)) or 1.0
    return array.array("f", [x / norm for x in raw]).tolist()


def float32_base64(vector: list[float]) -> str:
    """``encoding_format: "base64"`` as OpenAI and Azure AI send it: little-endian float32, what the SDKs decode
    (numpy.frombuffer(dtype="float32") / array("f"))."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def embedding_tokens(text: str) -> int:
    """The token count the loopback servers report for ``text``: one per started 4 bytes of UTF-8 (about what
    BPE tokenizers give English text)."""
    return max(1, -(-len(text.encode("utf-8")) // 4))


class EmbeddingScript:
    """The embeddings routes of one server: which models exist (name -> vector size), and a FIFO of items for
    the next requests that pass validation. An item is a :class:`Fault` (any kind: ``hang`` waits until the
    client disconnects, ``drop`` closes the connection) or a :data:`VectorFunction`. With the queue empty every
    valid request gets :func:`embedding_vector` of each input.

    :attr:`requests` holds every request that reached an embeddings route (also the rejected ones), and
    :attr:`inputs` the texts of each request that was answered (or faulted), in arrival order.
    """

    def __init__(self, sizes: Mapping[str, int], *, default_size: int | None = None) -> None:
        self.sizes = dict(sizes)
        self.default_size = default_size
        self.requests: list[RecordedRequest] = []
        self.inputs: list[list[str]] = []
        self._items: deque[EmbeddingScriptItem] = deque()

    def enqueue(self, *items: EmbeddingScriptItem) -> None:
        """Append faults or vector functions for the next valid requests."""
        for item in items:
            if not isinstance(item, Fault) and not callable(item):
                raise TypeError(f"cannot enqueue {item!r}: expected a Fault or a callable(texts) -> vectors")
            self._items.append(item)

    @property
    def pending(self) -> int:
        return len(self._items)

    def size_of(self, model: str) -> int | None:
        """The native vector size of ``model`` (``default_size`` for a model not listed), None if unknown."""
        return self.sizes.get(model, self.default_size)

    def reset(self) -> None:
        self.requests.clear()
        self.inputs.clear()
        self._items.clear()

    async def answer(
        self,
        server: FaultTarget,
        request: RecordedRequest,
        texts: list[str],
        dimensions: int,
        render: Callable[[list[list[float]]], Response],
    ) -> Response:
        """The response to a valid request: the next script item's, else the deterministic vectors."""
        self.inputs.append(texts)
        item = self._items.popleft() if self._items else None
        if isinstance(item, Fault):
            return await fault_response(server, request, item)
        vectors = item(texts) if item is not None else [embedding_vector(text, dimensions) for text in texts]
        return render(vectors)


async def fault_response(server: FaultTarget, request: RecordedRequest, fault: Fault) -> Response:
    """``fault`` as this server renders it; ``hang`` and ``drop`` act on the connection (the response is then
    never sent)."""
    if fault.kind in ("hang", "drop", "drop_mid_body"):
        # The server's own connection object: the route handler has no other way to reach the socket.
        conn = next((c for c in server._connections if c.id == request.connection_id), None)
        if conn is not None:
            if fault.kind == "hang":
                await conn.wait_closed()
            else:
                conn.close()
        return Response(status=500, body=b"")
    return server.render_fault(fault, request)
