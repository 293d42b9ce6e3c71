"""bench_pipeline.py for real, in a few creates: against ext-testing's OpenAI loopback server and against the
embedded model through llama.cpp. Shapes and counts (every pipeline create a miss, every side as many creates,
every figure printed), never timings."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import bench_pipeline
import pytest

from ext.models.openai import OpenAIChatCompletionClient
from ext.pipeline import CacheMiddleware, ChatPipeline, LoggingMiddleware, RetryMiddleware
from ext.testing.script import Reply
from ext.testing.servers import OpenAIServer

FIGURES = (
    "CPU per block vs bare, bare (A/A)    : median ",
    "CPU per block vs bare, pipeline miss : median ",
    "p50 overhead of logging + retry + cache miss: ",
    "pipeline's own time per miss (the create less the bare client's create inside it): p50 ",
)


def test_every_pipeline_create_misses_and_every_side_sends_the_same_messages() -> None:
    async def go() -> tuple[list[Any], list[list[float]], list[int], list[Any], list[str]]:
        reply = Reply(text="hi", prompt_tokens=1, completion_tokens=1)
        async with OpenAIServer(api_key="sk-test", default=reply) as server:

            def make(wrap: Any) -> Any:
                cls = wrap(OpenAIChatCompletionClient) if wrap else OpenAIChatCompletionClient
                return cls("gpt-4o-mini", base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0)

            results, ratios, own_ns, clients = await bench_pipeline.compare_creates(make, 3, 4, warmup=2)
            for client in clients:
                await client.close()
            sent = [r.json["messages"][0]["content"] for r in server.requests if r.json is not None]
            return results, ratios, own_ns, clients, sent

    results, ratios, own_ns, clients, sent = asyncio.run(go())

    assert [r.name for r in results] == ["bare", "bare (A/A)", "pipeline miss"]
    assert [r.ops for r in results] == [12, 12, 12]
    assert len(own_ns) == 12 and all(ns > 0 for ns in own_ns)  # the warmup's 2 left out
    assert [len(r) for r in ratios] == [3, 3, 3] and ratios[0] == [1.0, 1.0, 1.0]
    # Warmup and blocks: 14 creates a side, the k-th of each side the same new message.
    assert Counter(sent) == {f"Say hi #{k}": 3 for k in range(14)}
    pipeline = clients[2]
    assert isinstance(pipeline, ChatPipeline)
    logging_, retry, cache = pipeline.middleware
    assert (type(logging_), type(retry), type(cache)) == (LoggingMiddleware, RetryMiddleware, CacheMiddleware)
    assert isinstance(cache, CacheMiddleware) and (cache.misses, cache.hits) == (14, 0)


def test_loopback_run_prints_the_table_and_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(bench_pipeline.run(blocks=2, block=3, hits=50))

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "2 blocks of 3 creates per side, interleaved; 50 cache hits"
    impls = [line[19:31].strip() for line in lines if line.startswith("create ")]
    assert impls == ["bare", "bare (A/A)", "pipeline mi…", "cache hit"]
    for figure in FIGURES:
        assert sum(line.startswith(figure) for line in lines) == 1, figure
    assert lines[-1].startswith("cache hit p50: ")


def test_model_run_prints_the_table_and_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(bench_pipeline.run_model(blocks=1, block=1, max_tokens=2))

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "SmolLM2-135M-Instruct (llama.cpp, in process), at most 2 completion tokens per create"
    assert lines[1] == "1 blocks of 1 creates per side, interleaved"
    impls = [line[19:31].strip() for line in lines if line.startswith("create ")]
    assert impls == ["bare", "bare (A/A)", "pipeline mi…"]
    for figure in FIGURES:
        assert sum(line.startswith(figure) for line in lines) == 1, figure
