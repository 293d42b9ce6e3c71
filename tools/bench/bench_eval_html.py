"""How fast `ext eval --html`'s page opens: a report of 1,000 cases (two configurations, long and hostile text in
some) written by ext-eval's `write_html`, loaded from disk in headless Chromium (Debian's `chromium`).

    hatch run ext-eval:python tools/bench/bench_eval_html.py [--cases 1000] [--runs 5]

"ready" is the page's own clock: `performance.now()` when its script has filtered the table (milliseconds since
the navigation started), read from the rendered DOM. "browser" is the wall time of a whole headless Chromium run
that loads the page and dumps its DOM, beside the same run on an empty page (the A/A-like floor: starting the
browser). Medians of `--runs` loads; the target is a page ready in under a second."""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ext.eval import CallRecord, CaseResult, EvalCase, EvalReport, config_report, parse_case, write_html

CATEGORIES = ("simple", "multiple", "parallel", "irrelevance")
TOOL = {"name": "lookup", "description": "d", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}


def build(cases: int) -> tuple[EvalReport, list[EvalCase]]:
    dataset, a, b = [], [], []
    for i in range(cases):
        category = CATEGORIES[i % len(CATEGORIES)]
        text = f"question {i} <script>alert({i})</script>" + ("long " * 2000 if i % 50 == 0 else "")
        dataset.append(
            parse_case(
                {
                    "id": f"c{i}",
                    "category": category,
                    "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}],
                    "tools": [TOOL],
                    "expected": [{"name": "lookup", "arguments": {"q": [f"v{i}"]}}],
                }
            )
        )
        call = [CallRecord(name="lookup", arguments=f'{{"q": "v{i}"}}')]
        a.append(
            CaseResult(
                id=f"c{i}",
                category=category,
                calls=call,
                correct=i % 3 != 0,
                malformed=i % 17 == 0,
                latency_s=0.1 + (i % 37) / 10,
            )
        )
        b.append(
            CaseResult(
                id=f"c{i}",
                category=category,
                answer="no",
                correct=i % 4 != 0,
                malformed=False,
                latency_s=0.2 + (i % 11) / 10,
            )
        )
    return EvalReport(dataset="bench", configs=[config_report("a", a), config_report("b", b)]), dataset


def load(browser: str, page: Path, profile: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("needs headless Chromium: apt-get install chromium")
    report, cases = build(args.cases)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        page, empty = root / "report.html", root / "empty.html"
        started = time.perf_counter()
        write_html(report, page, cases)
        written = time.perf_counter() - started
        empty.write_text("<!DOCTYPE html><html><body></body></html>")
        ready, walls, floors = [], [], []
        for run in range(args.runs):
            wall, dom = load(browser, page, root / f"p{run}")
            match = re.search(r'data-ready-ms="(\d+)"', dom)
            if match is None:
                raise SystemExit("the page's script did not finish")
            ready.append(float(match.group(1)))
            walls.append(wall)
            floors.append(load(browser, empty, root / f"e{run}")[0])
        size = page.stat().st_size
    print("| cases | page size | write_html | ready (page's clock) p50 | browser run p50 | empty-page run p50 |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {args.cases} | {size / 1e6:.1f} MB | {written * 1000:.0f} ms | {statistics.median(ready):.0f} ms "
        f"| {statistics.median(walls) * 1000:.0f} ms | {statistics.median(floors) * 1000:.0f} ms |"
    )


if __name__ == "__main__":
    main()
