"""Embedding throughput, batched: `OpenAIEmbeddingClient.embed` against the raw openai SDK's `embeddings.create`
on the same loopback OpenAIServer, with an A/A control, in one run.

Run: ``hatch run ext-models-openai:python tools/bench/bench_embeddings.py [--blocks B] [--block N] [--texts T]``

Sides, each embedding the same ``--texts`` texts (``--dimensions`` each, base64 on the wire as the SDK asks) per op:

- ``raw openai`` and ``raw openai (A/A)``: two identical raw SDK clients. Their difference is the noise of this
  machine and this run: the yardstick for ext's overhead.
- ``ext``: `OpenAIEmbeddingClient` (validation of the texts, one request per 2048, the vector checks: count,
  size, finite values; usage).

The sides run in short interleaved blocks (``measure_interleaved``), so drift of the machine's speed weighs on all
of them alike; the server runs in the same event loop, so every side pays the same server share. Printed: the
table (p50/p99 per op, ops/s, CPU per op), texts/s per side, and the per-block CPU ratios vs the first raw side
(median with a 95 % CI and the p5-p95 spread of the blocks).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

import openai

# Script-dir import: `python tools/bench/bench_embeddings.py` puts tools/bench on sys.path.
from _harness import Result, Row, format_table, measure_interleaved, median_ci

from ext.models.openai import OpenAIEmbeddingClient
from ext.testing.servers import OpenAIServer

KEY = "sk-bench"
MODEL = "text-embedding-3-small"
SIDES = ("raw openai", "raw openai (A/A)", "ext")


def texts_for(count: int) -> list[str]:
    """`count` distinct sentences of a realistic length (about 60 characters)."""
    return [f"Sentence number {i} of the benchmark corpus, about a topic or two." for i in range(count)]


async def compare_embeddings(
    base_url: str, *, texts: list[str], dimensions: int, blocks: int, block: int, warmup: int
) -> tuple[list[Result], list[list[float]], list[Any]]:
    """The three sides in interleaved blocks: Results, per-block CPU ratios vs the first side, and the clients
    (for the caller to close). Every op of every side returns len(texts) vectors of `dimensions` (checked)."""
    raw_a = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0)
    raw_b = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0)
    ours = OpenAIEmbeddingClient(MODEL, api_key=KEY, base_url=base_url, dimensions=dimensions, max_retries=0)

    def raw_side(sdk: openai.AsyncOpenAI) -> Any:
        async def call() -> None:
            response = await sdk.embeddings.create(model=MODEL, input=texts, dimensions=dimensions)
            assert len(response.data) == len(texts) and len(response.data[-1].embedding) == dimensions

        return call

    async def call_ext() -> None:
        result = await ours.embed(texts)
        assert len(result.vectors) == len(texts) and len(result.vectors[-1]) == dimensions

    sides = [(SIDES[0], raw_side(raw_a)), (SIDES[1], raw_side(raw_b)), (SIDES[2], call_ext)]
    results, ratios = await measure_interleaved(sides, blocks=blocks, block=block, warmup=warmup)
    return results, ratios, [raw_a, raw_b, ours]


def report(results: list[Result], ratios: list[list[float]], texts: int) -> list[str]:
    """The lines printed after the table."""
    lines = [
        f"texts/s, {name:<17}: {result.ops_per_s * texts:,.0f}" for name, result in zip(SIDES, results, strict=True)
    ]
    for name, side in zip(SIDES[1:], ratios[1:], strict=True):
        lo, hi = median_ci(side)
        spread = sorted(side)
        p5, p95 = spread[len(spread) // 20], spread[len(spread) * 19 // 20]
        lines.append(
            f"CPU per block vs raw, {name:<17}: median {statistics.median(side):.3f} (95 % CI {lo:.3f}-{hi:.3f}); "
            f"blocks p5-p95 {p5:.3f}-{p95:.3f}"
        )
    return lines


async def run(blocks: int, block: int, count: int, dimensions: int) -> None:
    texts = texts_for(count)
    async with OpenAIServer(api_key=KEY, record=False) as server:
        results, ratios, clients = await compare_embeddings(
            server.base_url + "/v1", texts=texts, dimensions=dimensions, blocks=blocks, block=block, warmup=block
        )
        for client in clients:
            await client.close()
    base = results[0]
    print(f"{blocks} blocks of {block} ops per side, interleaved; {count} texts x {dimensions} dimensions per op\n")
    print(format_table([Row("embed", base), *(Row("embed", r, baseline=base) for r in results[1:])]))
    print()
    print("\n".join(report(results, ratios, count)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--blocks", type=int, default=30, help="interleaved blocks per side")
    parser.add_argument("--block", type=int, default=10, help="ops per block")
    parser.add_argument("--texts", type=int, default=256, help="texts per op (one request up to 2048)")
    parser.add_argument("--dimensions", type=int, default=256, help="vector size asked for")
    args = parser.parse_args()
    asyncio.run(run(args.blocks, args.block, args.texts, args.dimensions))


if __name__ == "__main__":
    main()
