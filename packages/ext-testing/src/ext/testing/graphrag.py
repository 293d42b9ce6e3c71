"""A loopback OpenAI-protocol server that answers Microsoft GraphRAG's prompts with scripted, well-formed replies.

:class:`GraphRagServer` is an :class:`~ext.testing.servers.OpenAIServer` with ``POST /v1/embeddings`` added
(deterministic bag-of-words vectors, float or base64) whose default script is a :class:`GraphRagResponder`. The
responder knows a small world (:class:`KnownEntity`, :class:`KnownRelationship`) and recognises each graphrag
prompt by its fixed wording:

- graph extraction: the world's entities named in the chunk, and the relationships between two of them, in
  graphrag's tuple format (``("entity"<|>NAME<|>TYPE<|>description)`` records joined by ``##``);
- claim extraction (graphrag's covariates, ``extract_claims.enabled``): the world's claims (:class:`KnownClaim`)
  whose subject (and object) the chunk names, in graphrag's claim tuple format;
- gleaning follow-ups: nothing more (``N``);
- description summaries: the descriptions joined;
- community reports (JSON, the ``CommunityReportResponse`` shape): a title naming the world's entities found in
  the community's context;
- global search map (JSON ``points``): one point per community report title in the batch;
- global search reduce and local search (streamed): an answer naming the report titles / entities in the context
  (override with :attr:`GraphRagResponder.answers`).

Every request is recorded; :meth:`GraphRagResponder.kind_of` says which prompt a recorded request carried, so a
test can assert what reached the model. No network, no real model: point graphrag's ``api_base`` at
``server.base_url + "/v1"``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ext.testing.script import Reply
from ext.testing.servers._base import RecordedRequest, Response, Route, ScriptItem, json_response
from ext.testing.servers.openai import OpenAIServer

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "GraphRagResponder",
    "GraphRagServer",
    "KnownClaim",
    "KnownEntity",
    "KnownRelationship",
    "embed_text",
]

EMBEDDING_DIMENSIONS = 64
"""Length of the vectors :func:`embed_text` returns."""

_TUPLE = "<|>"
_RECORD = "##"
_COMPLETE = "<|COMPLETE|>"
_WORD = re.compile(r"[a-z0-9]+")
_REPORTS_HEADER = re.compile(r"^id\|title\|.*$", re.MULTILINE)
_REPORT_ROW = re.compile(r"^\d+\|([^|\n]*)\|", re.MULTILINE)


@dataclass(frozen=True)
class KnownEntity:
    """An entity the responder extracts wherever ``name`` appears in a chunk (case-insensitive)."""

    name: str
    type: str
    description: str


@dataclass(frozen=True)
class KnownRelationship:
    """A relationship the responder extracts when both ends appear in a chunk."""

    source: str
    target: str
    description: str
    weight: float = 1.0


@dataclass(frozen=True)
class KnownClaim:
    """A claim (graphrag covariate) the responder extracts when its subject (and object, if any) appear in a
    chunk."""

    subject: str
    object: str | None
    type: str
    status: str
    description: str


def embed_text(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit vector: each lower-cased word hashed into a bucket (so texts sharing words are close)."""
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dimensions
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0:
        vector[0] = 1.0
        return vector
    return [v / norm for v in vector]


def _messages(request: RecordedRequest) -> list[dict[str, Any]]:
    body = request.json if isinstance(request.json, dict) else {}
    return [m for m in body.get("messages") or [] if isinstance(m, dict)]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


@dataclass
class GraphRagResponder:
    """Answers graphrag's indexing and query prompts from a known world (a script callable for OpenAIServer).

    ``answers`` maps ``"local"`` / ``"global"`` to a fixed answer text; without one the answer names what was in
    the context. ``reply_delay`` delays query answers (local search and the global reduce step), for cancellation
    tests.
    """

    entities: Sequence[KnownEntity]
    relationships: Sequence[KnownRelationship] = ()
    claims: Sequence[KnownClaim] = ()
    answers: dict[str, str] = field(default_factory=dict)
    reply_delay: float = 0.0

    # -- recognising the prompt ----------------------------------------------------------------------------------

    @staticmethod
    def kind_of(request: RecordedRequest) -> str:
        """Which graphrag prompt a chat request carried: ``extract_graph``, ``glean``, ``glean_loop``,
        ``extract_claims``, ``summarize``, ``community_report``, ``global_map``, ``global_reduce``, ``local``,
        or ``other``."""
        messages = _messages(request)
        texts = [_text(m) for m in messages]
        first = texts[0] if texts else ""
        last = texts[-1] if texts else ""
        if "MANY entities and relationships were missed" in last or "MANY entities were missed" in last:
            return "glean"
        if "Answer Y if there are still entities" in last:
            return "glean_loop"
        if "-Real Data-" in first and "Entity_types:" in first:
            return "extract_graph"
        if "-Real Data-" in first and "Claim description:" in first:
            return "extract_claims"
        if "comprehensive summary of the data provided below" in first:
            return "summarize"
        if "Write a comprehensive report of a community" in first:
            return "community_report"
        if "---Analyst Reports---" in first:
            return "global_reduce"
        if "---Data tables---" in first:
            return "global_map" if '"points"' in first else "local"
        return "other"

    @staticmethod
    def query_of(request: RecordedRequest) -> str:
        """The user's question in a query request (its last user message)."""
        users = [_text(m) for m in _messages(request) if m.get("role") == "user"]
        return users[-1] if users else ""

    @staticmethod
    def context_of(request: RecordedRequest) -> str:
        """The system prompt (graphrag puts the retrieved context there)."""
        systems = [_text(m) for m in _messages(request) if m.get("role") == "system"]
        return "\n".join(systems) if systems else (_text(_messages(request)[0]) if _messages(request) else "")

    def entities_in(self, text: str) -> list[KnownEntity]:
        """The known entities named in ``text``, in world order."""
        lowered = text.lower()
        return [e for e in self.entities if e.name.lower() in lowered]

    @staticmethod
    def report_titles_in(text: str) -> list[str]:
        """Community report titles in a query context's report tables (``id|title|...`` header, one row per
        report; a row's content may span lines)."""
        titles: list[str] = []
        for header in _REPORTS_HEADER.finditer(text):
            section = text[header.end() :].split("\n-----", 1)[0]
            titles.extend(title.strip() for title in _REPORT_ROW.findall(section))
        return titles

    # -- answering ---------------------------------------------------------------------------------------------

    def __call__(self, request: RecordedRequest) -> Reply:
        kind = self.kind_of(request)
        messages = _messages(request)
        first = _text(messages[0]) if messages else ""
        if kind == "extract_graph":
            return Reply(text=self._extract(first))
        if kind == "extract_claims":
            return Reply(text=self._claims(first))
        if kind == "glean":
            return Reply(text=_COMPLETE)
        if kind == "glean_loop":
            return Reply(text="N")
        if kind == "summarize":
            return Reply(text=self._summarize(first))
        if kind == "community_report":
            return Reply(text=json.dumps(self._report(first)))
        if kind == "global_map":
            titles = self.report_titles_in(first)
            points = [{"description": f"Report {title!r} is relevant.", "score": 50} for title in titles]
            return Reply(text=json.dumps({"points": points}))
        if kind == "global_reduce":
            text = self.answers.get("global") or "Global answer from: " + ", ".join(
                e.name for e in self.entities_in(first)
            )
            return Reply(text=text, delay=self.reply_delay)
        if kind == "local":
            text = self.answers.get("local") or "Local answer about: " + ", ".join(
                e.name for e in self.entities_in(first)
            )
            return Reply(text=text, delay=self.reply_delay)
        return Reply(text="(graphrag loopback: unrecognised prompt)")

    @staticmethod
    def _chunk(prompt: str) -> str:
        _, _, real = prompt.partition("-Real Data-")
        _, _, chunk = real.partition("Text:")
        return chunk.rsplit("Output:", 1)[0]

    def _claims(self, prompt: str) -> str:
        # graphrag's claim format: (SUBJECT<|>OBJECT<|>TYPE<|>STATUS<|>START<|>END<|>DESCRIPTION<|>SOURCE), with
        # NONE for an unknown object or date (graphrag/prompts/index/extract_claims.py).
        chunk = self._chunk(prompt)
        lowered = chunk.lower()
        records = [
            _TUPLE.join(
                [
                    c.subject.upper(),
                    c.object.upper() if c.object else "NONE",
                    c.type.upper(),
                    c.status.upper(),
                    "NONE",
                    "NONE",
                    c.description,
                    chunk.strip(),
                ]
            )
            for c in self.claims
            if c.subject.lower() in lowered and (c.object is None or c.object.lower() in lowered)
        ]
        return f"\n{_RECORD}\n".join(f"({r})" for r in records) + f"\n{_COMPLETE}"

    def _extract(self, prompt: str) -> str:
        chunk = self._chunk(prompt)
        found = self.entities_in(chunk)
        names = {e.name.lower() for e in found}
        records = [f'("entity"{_TUPLE}{e.name.upper()}{_TUPLE}{e.type.upper()}{_TUPLE}{e.description})' for e in found]
        records += [
            f'("relationship"{_TUPLE}{r.source.upper()}{_TUPLE}{r.target.upper()}{_TUPLE}{r.description}'
            f"{_TUPLE}{r.weight:g})"
            for r in self.relationships
            if r.source.lower() in names and r.target.lower() in names
        ]
        return f"\n{_RECORD}\n".join(records) + f"\n{_COMPLETE}"

    @staticmethod
    def _summarize(prompt: str) -> str:
        _, _, data = prompt.partition("Description List:")
        data = data.split("#######", 1)[0].strip()
        try:
            descriptions = json.loads(data)
        except ValueError:
            return data
        if isinstance(descriptions, list):
            return " ".join(str(d) for d in descriptions)
        return str(descriptions)

    def _report(self, prompt: str) -> dict[str, Any]:
        # The community's context follows the prompt's instructions (the last "Text:" / "-Real Data-" part).
        data = prompt.rsplit("# Real Data", 1)[-1]
        members = self.entities_in(data)
        names = ", ".join(e.name for e in members) or "no known entities"
        return {
            "title": f"Community of {names}",
            "summary": f"A community formed by {names}.",
            "rating": float(len(members)),
            "rating_explanation": f"{len(members)} known entities.",
            "findings": [{"summary": e.name, "explanation": e.description} for e in members],
        }


class GraphRagServer(OpenAIServer):
    """OpenAI Chat Completions plus ``POST /v1/embeddings``; chat requests go to ``responder`` unless scripted.

    Enqueued replies and faults still come first (``enqueue``), so a test can inject a failure into one call.
    """

    def __init__(
        self,
        responder: GraphRagResponder,
        *,
        api_key: str | None = None,
        dimensions: int = EMBEDDING_DIMENSIONS,
        record: bool = True,
    ) -> None:
        self.responder = responder
        self.dimensions = dimensions
        self.embedded: list[str] = []
        default: ScriptItem = responder
        super().__init__(api_key=api_key, default=default, record=record)

    def routes(self) -> Sequence[Route]:
        return (
            *super().routes(),
            Route("POST", "/v1/embeddings", "embeddings", self._embeddings),
            Route("POST", "/embeddings", "embeddings", self._embeddings),
        )

    def requests_of(self, kind: str) -> list[RecordedRequest]:
        """The recorded chat requests whose prompt is ``kind`` (see :meth:`GraphRagResponder.kind_of`)."""
        return [r for r in self.requests if r.route == "chat" and self.responder.kind_of(r) == kind]

    def _embeddings(self, request: RecordedRequest) -> Response:
        denied = self.check(request)
        if denied is not None:
            return denied
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs or []]
        if not texts:
            return self.render_error(400, "'input' must be a string or a non-empty array of strings", request)
        self.embedded.extend(texts)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = embed_text(text, self.dimensions)
            embedding: Any = (
                base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode() if as_base64 else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(len(_WORD.findall(t.lower())) for t in texts)
        model = body.get("model") if isinstance(body.get("model"), str) else "text-embedding-3-small"
        obj = {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return json_response(obj, headers={"x-request-id": f"req_{self._next_id()}"})
