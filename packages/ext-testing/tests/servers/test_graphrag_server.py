"""GraphRagServer driven by the real openai SDK: graphrag's prompt kinds answered, embeddings deterministic."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator

import openai
import pytest

from ext.testing.graphrag import GraphRagResponder, GraphRagServer, KnownEntity, KnownRelationship, embed_text
from ext.testing.script import Reply

WORLD = GraphRagResponder(
    [KnownEntity("Alice", "person", "Alice bakes."), KnownEntity("Riverton", "geo", "A town.")],
    [KnownRelationship("Alice", "Riverton", "Alice bakes in Riverton", 5)],
)


@pytest.fixture
async def gr_server() -> AsyncIterator[GraphRagServer]:
    async with GraphRagServer(WORLD, api_key="sk-test") as srv:
        yield srv


@pytest.fixture
async def gr_client(gr_server: GraphRagServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=gr_server.base_url + "/v1", api_key="sk-test", max_retries=0) as c:
        yield c


async def _ask(client: openai.AsyncOpenAI, system: str | None, user: str) -> str:
    messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    result = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
    return result.choices[0].message.content or ""


async def test_extraction_in_graphrag_tuple_format(gr_server: GraphRagServer, gr_client: openai.AsyncOpenAI) -> None:
    prompt = "-Goal- ...\n-Real Data-\nEntity_types: person,geo\nText: Alice opened a shop in Riverton.\n####\nOutput:"
    text = await _ask(gr_client, None, prompt)
    assert text == (
        '("entity"<|>ALICE<|>PERSON<|>Alice bakes.)\n##\n("entity"<|>RIVERTON<|>GEO<|>A town.)\n##\n'
        '("relationship"<|>ALICE<|>RIVERTON<|>Alice bakes in Riverton<|>5)\n<|COMPLETE|>'
    )
    assert [GraphRagResponder.kind_of(r) for r in gr_server.requests] == ["extract_graph"]


async def test_report_map_and_answers(gr_server: GraphRagServer, gr_client: openai.AsyncOpenAI) -> None:
    report = json.loads(await _ask(gr_client, None, "Write a comprehensive report of a community\n# Real Data\nAlice"))
    assert report["title"] == "Community of Alice"
    assert report["findings"] == [{"summary": "Alice", "explanation": "Alice bakes."}]

    table = '---Data tables---\n\nid|title|occurrence weight|content\n0|Town|1.0|"# Town\n\nAlice"\n\n"points"'
    points = json.loads(await _ask(gr_client, table, "What?"))
    assert points == {"points": [{"description": "Report 'Town' is relevant.", "score": 50}]}

    gr_server.responder.answers["local"] = "Scripted."
    assert await _ask(gr_client, "---Data tables---\nAlice", "Who?") == "Scripted."
    assert GraphRagResponder.query_of(gr_server.requests[-1]) == "Who?"
    gr_server.responder.answers.clear()
    gr_server.enqueue(Reply(text="an enqueued reply comes first"))
    assert await _ask(gr_client, "---Data tables---", "Who?") == "an enqueued reply comes first"


async def test_embeddings_float_and_base64(gr_server: GraphRagServer, gr_client: openai.AsyncOpenAI) -> None:
    plain = await gr_client.embeddings.create(
        model="text-embedding-3-small", input=["Alice bakes", "x"], encoding_format="float"
    )
    assert [d.embedding for d in plain.data] == [embed_text("Alice bakes"), embed_text("x")]
    assert math.isclose(sum(v * v for v in plain.data[0].embedding), 1.0)
    packed = await gr_client.embeddings.create(
        model="text-embedding-3-small", input="Alice bakes"
    )  # SDK default: base64
    assert packed.data[0].embedding == pytest.approx(embed_text("Alice bakes"), abs=1e-6)
    assert gr_server.embedded == ["Alice bakes", "x", "Alice bakes"]
    with pytest.raises(openai.AuthenticationError):
        async with openai.AsyncOpenAI(base_url=gr_server.base_url + "/v1", api_key="wrong", max_retries=0) as bad:
            await bad.embeddings.create(model="m", input="x")
