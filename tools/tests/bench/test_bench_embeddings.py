"""bench_embeddings.py for real, in a few ops: every side sends the same texts and gets every vector back, and
every figure is printed. Shapes and counts, never timings."""

from __future__ import annotations

import asyncio
from typing import Any

import bench_embeddings

from ext.testing.servers import OpenAIServer


def test_every_side_embeds_the_same_texts_and_every_figure_is_reported() -> None:
    texts = bench_embeddings.texts_for(5)

    async def go() -> tuple[list[Any], list[list[float]], list[list[str]]]:
        async with OpenAIServer(api_key=bench_embeddings.KEY) as server:
            results, ratios, clients = await bench_embeddings.compare_embeddings(
                server.base_url + "/v1", texts=texts, dimensions=8, blocks=2, block=3, warmup=1
            )
            for client in clients:
                await client.close()
            return results, ratios, server.embeddings.inputs

    results, ratios, inputs = asyncio.run(go())
    assert [r.name for r in results] == list(bench_embeddings.SIDES)
    assert [len(r.latencies_ns) for r in results] == [6, 6, 6]
    assert len(inputs) == 3 * (1 + 6) and all(sent == texts for sent in inputs)  # warmup + timed, every side
    assert [len(side) for side in ratios] == [2, 2, 2] and ratios[0] == [1.0, 1.0]
    lines = bench_embeddings.report(results, ratios, len(texts))
    assert [line.split(":")[0].strip() for line in lines] == [
        "texts/s, raw openai",
        "texts/s, raw openai (A/A)",
        "texts/s, ext",
        "CPU per block vs raw, raw openai (A/A)",
        "CPU per block vs raw, ext",
    ]
