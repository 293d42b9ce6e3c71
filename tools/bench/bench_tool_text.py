"""Read time of ext-core's tolerant tool-call reader (`find_tool_calls`) against the answer's size.

    hatch run ext-core:python tools/bench/bench_tool_text.py                      # this tree's reader
    hatch run ext-core:python tools/bench/bench_tool_text.py --before 6f71fcf     # and the reader at a revision

Cases, each at 4, 16, 64 and 256 KB: a runaway Python-like call (``get_weather(`` then ``(1),`` repeated, never
closed: the issue's repro), a runaway JSON call list (never closed), well-formed JSON calls carrying a long string,
a list of one-digit numbers (the densest call that is read) or a list of empty arrays (text past `MAX_CONTAINERS`),
a Python-like call with a list of numbers (text past `MAX_CALL_TOKENS`), and prose. "after" is the median of
`--runs` reads in this process; "before" loads the reader's module from git at the given revision (it was
self-contained) and reads each answer once in a child process, given up after `--budget` seconds (the earlier
reader was quadratic: minutes at 32 KB)."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ext.core import find_tool_calls

ROOT = Path(__file__).resolve().parents[2]
MODULE = "packages/ext-core/src/ext/core/_tool_text.py"
SIZES_KB = (4, 16, 64, 256)
TOOLS = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}},
    "delete_file": {"type": "object", "properties": {"path": {"type": "string"}}},
}
CASES: dict[str, Callable[[int], str]] = {
    "runaway python call": lambda size: "get_weather(" + "(1)," * (size // 4),
    "runaway json calls": lambda size: '{"tool_calls": [' + '{"name": "get_weather", "arguments": {}}, ' * (size // 42),
    "json call, long arg": lambda size: json.dumps({"name": "get_weather", "arguments": {"city": "x" * size}}),
    "json call, numbers": lambda size: json.dumps({"name": "get_weather", "arguments": {"city": [1] * (size // 3)}}),
    "json call, tiny arrays": lambda size: json.dumps(
        {"name": "get_weather", "arguments": {"city": [[]] * (size // 4)}}
    ),
    "python call, numbers": lambda size: "get_weather(city=[" + "1," * (size // 2) + "])",
    "prose": lambda size: "The weather in Paris is sunny. " * (size // 31),
}

Reader = Callable[[str, dict[str, Any]], list[Any]]


def _old_reader(revision: str) -> Reader:
    source = subprocess.run(
        ["git", "show", f"{revision}:{MODULE}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    module = types.ModuleType("old_tool_text")
    exec(compile(source, f"{revision}:{MODULE}", "exec"), module.__dict__)  # our own file, from git
    reader: Reader = module.find_tool_calls
    return reader


def _timed_once(reader: Reader, text: str, results: Any) -> None:
    started = time.perf_counter()
    try:
        reader(text, TOOLS)
        results.put(time.perf_counter() - started)
    except BaseException as exc:  # the earlier reader raised RecursionError on some answers
        results.put(f"{type(exc).__name__}")


def _before(reader: Reader, text: str, budget: float) -> str:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_timed_once, args=(reader, text, results))
    child.start()
    child.join(budget)
    if child.is_alive():
        child.terminate()
        child.join()
        return f"> {budget:.0f} s"
    outcome = results.get()
    return outcome if isinstance(outcome, str) else f"{outcome * 1000:.2f} ms"


def _after(text: str, runs: int) -> str:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        find_tool_calls(text, TOOLS)
        times.append(time.perf_counter() - started)
    return f"{statistics.median(times) * 1000:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", metavar="REVISION", help="also time the reader at this git revision")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds before an earlier read is given up")
    parser.add_argument("--runs", type=int, default=21, help="reads per case for this tree's reader (median)")
    args = parser.parse_args()
    old = _old_reader(args.before) if args.before else None
    header = f"{'case':<24} {'size':>7} {'before':>14} {'after':>12}"
    print(header)
    print("-" * len(header))
    for case, make in CASES.items():
        given_up = False
        for size_kb in SIZES_KB:
            text = make(size_kb * 1024)
            before = "-"
            if old is not None:
                # Once the earlier reader runs out of time, larger answers would too.
                before = f"> {args.budget:.0f} s" if given_up else _before(old, text, args.budget)
                given_up = before.startswith(">")
            print(f"{case:<24} {size_kb:>4} KB {before:>14} {_after(text, args.runs):>12}", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
