"""The pictures beside the root README's tool-calling tables: accuracy per category of each configuration, drawn by
ext-eval's `accuracy_chart` (the same chart `ext eval --html` puts in its page) from the results files
`eval_tool_calling.py` writes.

    python tools/eval/tool_calling_picture.py --out tools/eval/results/tool_calling_auto.svg \\
        tools/eval/results/tool_calling_smollm2_135m_5.json tools/eval/results/tool_calling_smollm2_135m_ollama.json \\
        tools/eval/results/tool_calling_smollm2_135m_5_round2.json:llama-server/native
    python tools/eval/tool_calling_picture.py --out tools/eval/results/tool_calling_required.svg \
        --categories simple multiple parallel tools/eval/results/tool_calling_smollm2_135m_required_5.json \
        tools/eval/results/tool_calling_smollm2_135m_required_5_round2.json:llama-server/native \
        tools/eval/results/tool_calling_smollm2_135m_ollama_required.json

A file may name the configurations to take from it (`FILE:config,config`); a configuration met again in a later file
replaces the earlier one. `eval_tool_calling.py --picture FILE` draws its own run the same way.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from ext.eval import CaseResult, ConfigReport, EvalReport, accuracy_chart, config_report

ORDER = (
    "in-process/constrained",
    "in-process/prompt",
    "llama-server/constrained",
    "llama-server/prompt",
    "llama-server/native",
    "ollama/constrained",
    "ollama/prompt",
)


def report_from_results(sources: Sequence[str], categories: Sequence[str] = ()) -> EvalReport:
    """One report of the configurations in `sources` (`FILE` or `FILE:config,...`), in the README's row order, over
    the cases of `categories` (all when empty)."""
    configs: dict[str, ConfigReport] = {}
    dataset = ""
    for source in sources:
        path, _, wanted = source.partition(":")
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        dataset = str(data.get("dataset", dataset))
        names = wanted.split(",") if wanted else list(data["configs"])
        for name in names:
            if name not in data["configs"]:
                raise SystemExit(f"{path}: no configuration {name!r} (it has {', '.join(data['configs'])})")
            results = [CaseResult.model_validate(r) for r in data["configs"][name]["results"]]
            results = [r for r in results if not categories or r.category in categories]
            configs[name] = config_report(name, results)
    ordered = sorted(configs.values(), key=lambda c: ORDER.index(c.name) if c.name in ORDER else len(ORDER))
    return EvalReport(dataset=dataset, configs=ordered)


def draw(sources: Sequence[str], out: Path, title: str, categories: Sequence[str] = ()) -> None:
    report = report_from_results(sources, categories)
    out.write_text(accuracy_chart(report, standalone=True, title=title) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", metavar="FILE[:config,...]")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--title", default="Tool calling: accuracy per category")
    parser.add_argument("--categories", nargs="+", default=[], help="only these categories (default: all)")
    args = parser.parse_args()
    draw(args.sources, args.out, args.title, args.categories)


if __name__ == "__main__":
    main()
