"""Convert a small subset of the Berkeley Function Calling Leaderboard's data into ext-eval's JSONL format.

The output is committed as ext-eval's package data (`src/ext/eval/data/bfcl.jsonl`); run this again only to
change the subset. It reads the `bfcl-eval` package's data (Apache-2.0; the attribution and license text sit next
to the output):

    pip download --no-deps bfcl-eval -d /tmp/bfcl && unzip -q /tmp/bfcl/bfcl_eval-*.whl -d /tmp/bfcl/x
    python tools/eval/convert_bfcl.py --source /tmp/bfcl/x/bfcl_eval

or, with bfcl-eval installed, `python tools/eval/convert_bfcl.py` (it finds the package without importing it, which
would pull in BFCL's model handlers).

BFCL's function docs use Python-flavoured types; they become JSON Schema (`dict` -> `object`, `float` ->
`number`, `tuple` -> `array`, `any` -> no type). Dotted names (`math.factorial`) become `math_factorial`, as BFCL
itself renames them for OpenAI-style APIs, whose tool names allow no dot.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "packages" / "ext-eval" / "src" / "ext" / "eval" / "data" / "bfcl.jsonl"

# BFCL file stem -> (our category, how many cases): the first N of each file, in BFCL's order.
SUBSET: dict[str, tuple[str, int]] = {
    "BFCL_v4_simple_python": ("simple", 20),
    "BFCL_v4_multiple": ("multiple", 10),
    "BFCL_v4_parallel": ("parallel", 10),
    "BFCL_v4_irrelevance": ("irrelevance", 10),
}

_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
    "number": "number",
}


def tool_name(name: str) -> str:
    return name.replace(".", "_")


def json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A BFCL parameter schema as JSON Schema (recursively)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            if value in _TYPES:
                out["type"] = _TYPES[value]
            elif value != "any":
                raise ValueError(f"unknown BFCL type {value!r}")
        elif key == "properties":
            out["properties"] = {name: json_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out["items"] = json_schema(value)
        else:
            out[key] = value
    return out


def convert(question: dict[str, Any], answer: dict[str, Any] | None, category: str) -> dict[str, Any]:
    tools = []
    for function in question["function"]:
        parameters = json_schema(function["parameters"])
        parameters.setdefault("required", [])
        tools.append(
            {"name": tool_name(function["name"]), "description": function["description"], "parameters": parameters}
        )
    case: dict[str, Any] = {
        "id": f"bfcl_{question['id']}",
        "category": category,
        "messages": question["question"][0],  # single-turn categories: one turn of role/content messages
        "tools": tools,
    }
    if answer is None:
        case["expected"] = {"no_call": True}
    else:
        case["expected"] = [
            {"name": tool_name(name), "arguments": arguments}
            for call in answer["ground_truth"]
            for name, arguments in call.items()
        ]
    return case


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def bfcl_data(source: str | None) -> Path:
    if source is not None:
        return Path(source) / "data"
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bfcl-eval is not installed: pip install bfcl-eval, or pass --source (see this file's docstring)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help="the bfcl_eval package folder (default: the installed package)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    data = bfcl_data(args.source)
    lines = []
    for stem, (category, count) in SUBSET.items():
        questions = read_jsonl(data / f"{stem}.json")[:count]
        answer_file = data / "possible_answer" / f"{stem}.json"
        answers = {a["id"]: a for a in read_jsonl(answer_file)} if answer_file.exists() else {}
        for question in questions:
            answer = answers.get(question["id"])
            if answer is None and category != "irrelevance":
                raise SystemExit(f"{stem}: no possible answer for {question['id']}")
            lines.append(json.dumps(convert(question, answer, category), ensure_ascii=False))
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} cases to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
