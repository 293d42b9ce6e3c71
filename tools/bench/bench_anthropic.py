"""ext-models-anthropic vs the raw anthropic SDK, against one loopback AnthropicServer in the same run.

Run (in the ext-models-anthropic environment):
``hatch run ext-models-anthropic:python tools/bench/bench_anthropic.py [--iterations N]``.

The server runs in a child process, so the CPU column measures the client alone. Cases: one
create (sequential and 64 concurrent), a 500-chunk stream (chunks/s after the first, time to
first chunk), and cold import time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

# Script-dir import: `python tools/bench/bench_anthropic.py` puts tools/bench on sys.path.
from _harness import Result, Row, StreamResult, compare, import_time, measure, measure_stream, print_table

MODEL = "claude-sonnet-5-5"
KEY = "sk-ant-bench"
STREAM_CHUNKS = 500

_SERVER = """
import asyncio, sys
from ext.testing.script import Reply
from ext.testing.servers.anthropic import AnthropicServer

async def main():
    text = AnthropicServer(api_key=sys.argv[1], default=Reply(text="Hello! How can I help you today?"), record=False)
    stream = AnthropicServer(
        api_key=sys.argv[1], default=Reply(chunks=[f"w{i} " for i in range(int(sys.argv[2]))]), record=False
    )
    async with text, stream:
        print(text.port, stream.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def _import_on_top(sdk: str, module: str, runs: int = 9) -> float:
    """Median seconds to import `module` in a fresh interpreter that already imported `sdk`: what ext adds."""
    import subprocess

    code = (
        "import importlib, sys, time\n"
        "importlib.import_module(sys.argv[1])\n"
        "t = time.perf_counter_ns()\n"
        "importlib.import_module(sys.argv[2])\n"
        "print(time.perf_counter_ns() - t)\n"
    )
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code, sdk, module], capture_output=True, text=True, check=True)
        samples.append(int(out.stdout.split()[-1]))
    return statistics.median(samples) / 1e9


def _median_round(results: list[Result]) -> Result:
    return sorted(results, key=lambda r: r.p50_ms)[len(results) // 2]


async def run(iterations: int, rounds: int) -> None:
    import anthropic

    from ext.core import LLMMessage, UserMessage
    from ext.models.anthropic import AnthropicChatCompletionClient

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _SERVER,
        KEY,
        str(STREAM_CHUNKS),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        text_port, stream_port = (int(p) for p in (await proc.stdout.readline()).split())
        text_url, stream_url = f"http://127.0.0.1:{text_port}", f"http://127.0.0.1:{stream_port}"
        raw = anthropic.AsyncAnthropic(base_url=text_url, api_key=KEY, max_retries=0, timeout=60)
        raw_stream_sdk = anthropic.AsyncAnthropic(base_url=stream_url, api_key=KEY, max_retries=0, timeout=60)
        ours = AnthropicChatCompletionClient(MODEL, max_tokens=1024, base_url=text_url, api_key=KEY, timeout=60)
        ours_stream = AnthropicChatCompletionClient(
            MODEL, max_tokens=1024, base_url=stream_url, api_key=KEY, timeout=60
        )
        raw_messages: list[Any] = [{"role": "user", "content": "Hi"}]
        messages: list[LLMMessage] = [UserMessage(content="Hi")]
        notes: list[str] = []

        async def raw_call() -> Any:
            return await raw.messages.create(model=MODEL, max_tokens=1024, messages=raw_messages)

        async def ext_call() -> Any:
            return await ours.create(messages)

        rows: list[Row] = []
        warmup = max(20, iterations // 10)
        for concurrency in (1, 64):
            case = "create" if concurrency == 1 else "create x64"
            raws: list[Result] = []
            exts: list[Result] = []
            # Alternate raw and ext over several rounds and keep each side's median round, so a burst of
            # load on a shared machine does not land on one side only.
            for _ in range(rounds):
                raws.append(
                    await measure("raw", raw_call, iterations=iterations, warmup=warmup, concurrency=concurrency)
                )
                exts.append(
                    await measure("ext", ext_call, iterations=iterations, warmup=warmup, concurrency=concurrency)
                )
            r, o = _median_round(raws), _median_round(exts)
            rows += [Row(case, r), Row(case, o, baseline=r)]
            # Each round's ext/raw ratio, then the median: pairs measured moments apart see the same load.
            paired = [compare(a, b) for a, b in zip(raws, exts, strict=True)]
            p50 = statistics.median(x.p50 for x in paired)
            cpu = statistics.median(x.cpu for x in paired)
            ops = statistics.median(x.ops_per_s for x in paired)
            notes.append(
                f"{case}: median of {rounds} paired rounds, ext/raw: p50 {p50:.3f}, CPU/op {cpu:.3f}, ops/s {ops:.3f}"
            )
        print_table(rows)
        print("\n".join(notes))

        async def raw_events() -> AsyncIterator[Any]:
            stream = await raw_stream_sdk.messages.create(
                model=MODEL, max_tokens=1024, messages=raw_messages, stream=True
            )
            async for event in stream:
                if event.type == "content_block_delta":
                    yield event

        async def ext_chunks() -> AsyncIterator[Any]:
            async for item in ours_stream.create_stream(messages):
                yield item

        runs = 5
        raw_runs: list[StreamResult] = []
        ext_runs: list[StreamResult] = []
        raw_cpu: list[float] = []
        ext_cpu: list[float] = []
        for _ in range(rounds):
            # CPU per chunk (the client process only) is steadier than wall-clock rates on a busy machine.
            for runs_list, cpu_list, name, source in (
                (raw_runs, raw_cpu, "raw", raw_events),
                (ext_runs, ext_cpu, "ext", ext_chunks),
            ):
                cpu0 = time.process_time_ns()
                result = await measure_stream(name, source, runs=runs, warmup=1)
                cpu_list.append((time.process_time_ns() - cpu0) / 1e3 / ((runs + 1) * result.items))
                runs_list.append(result)
        raw_s = sorted(raw_runs, key=lambda r: r.median_items_per_s)[rounds // 2]
        ext_s = sorted(ext_runs, key=lambda r: r.median_items_per_s)[rounds // 2]
        stream_ratio = statistics.median(
            b.median_items_per_s / a.median_items_per_s for a, b in zip(raw_runs, ext_runs, strict=True)
        )
        print()
        for res in (raw_s, ext_s):
            print(
                f"stream {res.name:<4} ttfc {res.ttfi_ms:.3f} ms  {res.median_items_per_s:,.0f} chunks/s  "
                f"({res.items} items, median round of {rounds} x {runs} runs)"
            )
        print(f"stream throughput ext/raw: median over {rounds} paired rounds {stream_ratio:.3f}")
        cpu_ratio = statistics.median(b / a for a, b in zip(raw_cpu, ext_cpu, strict=True))
        print(
            f"stream CPU per chunk: raw {statistics.median(raw_cpu):.1f} µs, ext {statistics.median(ext_cpu):.1f} µs "
            f"(paired ext/raw {cpu_ratio:.3f})"
        )
        await raw.close()
        await raw_stream_sdk.close()
        await ours.close()
        await ours_stream.close()
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)

    sdk = import_time("anthropic", runs=9)
    ext = import_time("ext.models.anthropic._client", runs=9)
    light = import_time("ext.models.anthropic", runs=9)
    on_top = _import_on_top("anthropic", "ext.models.anthropic._client")
    print(f"\nimporting the ext client after anthropic is loaded adds {on_top * 1e3:.0f} ms (median of 9)")
    print(
        f"cold import (median of 9): anthropic {sdk * 1e3:.0f} ms; ext client {ext * 1e3:.0f} ms "
        f"(+{(ext - sdk) * 1e3:.0f} ms); ext.models.anthropic without the client {light * 1e3:.0f} ms"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    asyncio.run(run(args.iterations, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
