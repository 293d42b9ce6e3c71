"""ext-eval's scoring of parallel calls: the matching against the permutation search it replaced.

Run: ``python tools/bench/bench_eval_parallel.py [--max-search 8]`` (environment: ``ext-eval``).

The case is the search's worst: n expected calls that each accept the first n-1 cities, and n calls naming all n
cities, so no pairing exists and the search tries every order of n-1 calls before saying so. The "permutation
search" column reproduces that search (as ext-eval did it before 0.1: the pair judged again on every visit) through
the public `score` of one-call cases; "matching" is `ext.eval.score` on the whole case. Times are the median of
`--runs` runs, in milliseconds; the search runs only up to `--max-search` calls (it grows as (n-1)!).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from ext.core import FunctionCall
from ext.eval import EvalCase, parse_case, score

TOOL = {
    "name": "local_time",
    "description": "The local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def case(expected: list[dict[str, Any]]) -> EvalCase:
    return parse_case(
        {"id": "b", "category": "parallel", "messages": [{"role": "user", "content": "q"}], "tools": [TOOL],
         "expected": expected}
    )  # fmt: skip


def worst_case(n: int) -> tuple[list[dict[str, Any]], list[FunctionCall]]:
    cities = [f"City{k}" for k in range(n)]
    expected = [{"name": "local_time", "arguments": {"city": cities[:-1]}} for _ in range(n)]
    calls = [
        FunctionCall(id=str(k), name="local_time", arguments=json.dumps({"city": c})) for k, c in enumerate(cities)
    ]
    return expected, calls


def permutation_search(expected: list[dict[str, Any]], calls: list[FunctionCall]) -> bool:
    """The rule before the matching: pair expected call `index` onwards with unused calls, backtracking."""
    singles = [case([want]) for want in expected]

    def assign(index: int, used: frozenset[int]) -> bool:
        if index == len(expected):
            return True
        return any(
            position not in used and score(singles[index], [candidate]).correct and assign(index + 1, used | {position})
            for position, candidate in enumerate(calls)
        )

    return assign(0, frozenset())


def median_ms(fn: Callable[[], bool], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="2,4,6,7,8,9,20,50,100,200", help="Numbers of calls (comma-separated).")
    parser.add_argument("--max-search", type=int, default=8, help="Largest n the permutation search runs for.")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'calls':>5}  {'permutation search ms':>22}  {'matching ms':>12}")
    for n in (int(s) for s in args.sizes.split(",")):
        print(row(n, args.max_search, args.runs))


def row(n: int, max_search: int, runs: int) -> str:
    expected, calls = worst_case(n)
    whole = case(expected)
    assert not score(whole, calls).correct
    matched = median_ms(lambda: score(whole, calls).correct, runs)
    searched = "-"
    if n <= max_search:
        searched = f"{median_ms(lambda: permutation_search(expected, calls), 1 if n > 6 else runs):,.1f}"
    return f"{n:>5}  {searched:>22}  {matched:>12,.2f}"


if __name__ == "__main__":
    main()
