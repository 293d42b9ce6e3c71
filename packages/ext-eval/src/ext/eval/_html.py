"""An evaluation report as one self-contained HTML page: opens from disk, fetches nothing, runs one small inline
script (the case table's filters) and nothing else.

Dataset text (messages, arguments, answers) is untrusted: every piece is HTML-escaped, and the page's
Content-Security-Policy allows only the one script this module writes (by its hash), no other script, no network,
no frames; so text that escaped by mistake still could not run. The page works without the script: every row is
shown and the filters do nothing."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from ._charts import accuracy_chart, colour, latency_chart, malformed_chart
from ._dataset import AnswerCheck, EvalCase, ExpectedCall, NoCall
from ._report import CaseResult, EvalReport

_SCRIPT = """\
(function () {
  var rows = Array.prototype.slice.call(document.querySelectorAll("#cases tbody tr"));
  var category = document.getElementById("f-category");
  var verdict = document.getElementById("f-verdict");
  var disagree = document.getElementById("f-disagree");
  var shown = document.getElementById("shown");
  function apply(write) {
    var n = 0;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var ok = (category.value === "" || r.getAttribute("data-category") === category.value) &&
        (verdict.value === "" || (verdict.value === "right") === (r.getAttribute("data-right") === "all")) &&
        (!disagree.checked || r.getAttribute("data-disagree") === "1");
      r.hidden = !ok;
      if (ok) n++;
    }
    shown.textContent = n + " of " + rows.length + " cases shown";
    if (write) {
      var parts = [];
      if (category.value) parts.push("category=" + encodeURIComponent(category.value));
      if (verdict.value) parts.push("verdict=" + verdict.value);
      if (disagree.checked) parts.push("disagree=1");
      history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
    }
  }
  var hash = location.hash.replace(/^#/, "").split("&");
  for (var j = 0; j < hash.length; j++) {
    var kv = hash[j].split("=");
    var value = decodeURIComponent(kv[1] || "");
    if (kv[0] === "category") category.value = value;
    if (kv[0] === "verdict" && (value === "right" || value === "wrong")) verdict.value = value;
    if (kv[0] === "disagree") disagree.checked = value === "1";
  }
  category.addEventListener("change", function () { apply(true); });
  verdict.addEventListener("change", function () { apply(true); });
  disagree.addEventListener("change", function () { apply(true); });
  apply(false);
  document.documentElement.setAttribute("data-ready", "1");
  document.documentElement.setAttribute("data-ready-ms", String(Math.round(performance.now())));
})();
"""
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; script-src 'sha256-{_SCRIPT_HASH}'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)

_STYLE = """\
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 4px 6px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 10em; overflow: auto; max-width: 40em; }
.role { color: #666; font-size: 12px; }
.right { color: #0a7a2f; font-weight: bold; } .wrong { color: #b00020; font-weight: bold; }
.filters { margin: 8px 0; display: flex; gap: 16px; align-items: center; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
tr[hidden] { display: none; }
"""


def render_html(report: EvalReport, cases: Iterable[EvalCase] = (), *, title: str | None = None) -> str:
    """The page of `report`. `cases` (the dataset's, any order) adds each case's messages and expected calls to
    the case table; without them the table shows what each configuration did."""
    by_id = {case.id: case for case in cases}
    heading = title or f"ext eval: {report.dataset}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(heading)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(heading)}</h1>",
        _summary_table(report),
        '<div class="charts">',
        accuracy_chart(report),
        malformed_chart(report),
        latency_chart(report),
        "</div>",
        _case_table(report, by_id),
        f"<script>{_SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_html(
    report: EvalReport, path: str | os.PathLike[str], cases: Iterable[EvalCase] = (), *, title: str | None = None
) -> None:
    """Write `render_html(report, cases)` to `path` (UTF-8), whole or not at all: a temporary file renamed."""
    target = Path(path)
    page = render_html(report, cases, title=title)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(page, encoding="utf-8")
    os.replace(partial, target)


def _summary_table(report: EvalReport) -> str:
    priced = any(config.overall.cost_usd is not None for config in report.configs)
    rows = [
        "<h2>Overall</h2>",
        '<table id="summary"><thead><tr><th>configuration</th><th>cases</th><th>accuracy</th><th>malformed</th>'
        "<th>errors</th><th>latency p50</th><th>latency p99</th><th>prompt tokens</th><th>completion tokens</th>"
        + ("<th>cost (USD)</th>" if priced else "")
        + "</tr></thead><tbody>",
    ]
    for index, config in enumerate(report.configs):
        s = config.overall
        cost = "" if not priced else f'<td class="num">{"-" if s.cost_usd is None else f"{s.cost_usd:.6f}"}</td>'
        rows.append(
            f'<tr data-config="{escape(config.name)}"><td><span class="swatch" style="background:{colour(index)}">'
            f"</span>{escape(config.name)}</td>"
            f'<td class="num">{s.cases}</td><td class="num">{s.accuracy:.1%}</td>'
            f'<td class="num">{s.malformed_rate:.1%}</td><td class="num">{s.errors}</td>'
            f'<td class="num">{s.latency_p50_s:.3f} s</td><td class="num">{s.latency_p99_s:.3f} s</td>'
            f'<td class="num">{s.prompt_tokens}</td><td class="num">{s.completion_tokens}</td>{cost}</tr>'
        )
    rows.append("</tbody></table>")
    return "".join(rows)


def _case_table(report: EvalReport, by_id: Mapping[str, EvalCase]) -> str:
    per_config = [{r.id: r for r in config.results} for config in report.configs]
    ids: dict[str, str] = {}  # id -> category, in first-seen order
    for config in report.configs:
        for result in config.results:
            ids.setdefault(result.id, result.category)
    categories = sorted(set(ids.values()))
    options = "".join(f'<option value="{escape(c)}">{escape(c)}</option>' for c in categories)
    head = "".join(f"<th>{escape(config.name)}</th>" for config in report.configs)
    parts = [
        "<h2>Cases</h2>",
        '<div class="filters">',
        f'<label>category <select id="f-category"><option value="">all</option>{options}</select></label>',
        '<label>verdict <select id="f-verdict"><option value="">all</option>'
        '<option value="right">right in every configuration</option>'
        '<option value="wrong">wrong in some configuration</option></select></label>',
        '<label><input type="checkbox" id="f-disagree"> configurations disagree</label>',
        f'<span id="shown">{len(ids)} of {len(ids)} cases shown</span>',
        "</div>",
        f'<table id="cases"><thead><tr><th>case</th><th>messages</th><th>expected</th>{head}</tr></thead><tbody>',
    ]
    for case_id, category in ids.items():
        results = [table.get(case_id) for table in per_config]
        verdicts = [r.correct for r in results if r is not None]
        right = "all" if all(verdicts) else ("none" if not any(verdicts) else "some")
        disagree = "1" if len(set(verdicts)) > 1 else "0"
        case = by_id.get(case_id)
        cells = "".join(_result_cell(r) for r in results)
        parts.append(
            f'<tr data-id="{escape(case_id)}" data-category="{escape(category)}" data-right="{right}" '
            f'data-disagree="{disagree}"><td>{escape(case_id)}<br><span class="role">{escape(category)}</span></td>'
            f"<td>{_messages(case) if case else '-'}</td><td>{_expected(case) if case else '-'}</td>{cells}</tr>"
        )
    parts.append("</tbody></table>")
    return "".join(parts)


def _text(value: str) -> str:
    return f'<div class="text">{escape(value)}</div>'


def _call(name: str, arguments: str) -> str:
    return _text(f"{name}({arguments})")


def _messages(case: EvalCase) -> str:
    parts: list[str] = []
    for message in case.messages:
        role = type(message).__name__.removesuffix("Message").lower() or "message"
        parts.append(f'<div class="role">{escape(role)}</div>{_content(getattr(message, "content", ""))}')
    return "".join(parts)


def _content(content: Any) -> str:
    if isinstance(content, str):
        return _text(content)
    if not isinstance(content, Sequence):
        return _text(str(content))
    parts: list[str] = []
    for item in content:
        if isinstance(item, str):
            parts.append(_text(item))
        elif hasattr(item, "arguments") and hasattr(item, "name"):
            parts.append(_call(str(item.name), str(item.arguments)))
        elif hasattr(item, "call_id") and hasattr(item, "content"):
            parts.append(_text(f"{getattr(item, 'name', '')} -> {item.content}"))
        else:
            parts.append(_text(f"[{type(item).__name__}]"))
    return "".join(parts)


def _expected(case: EvalCase) -> str:
    expected = case.expected
    if isinstance(expected, NoCall):
        return _text("no call")
    if isinstance(expected, AnswerCheck):
        checks = [f"contains {json.dumps(c, ensure_ascii=False)}" for c in expected.contains]
        if expected.regex is not None:
            checks.append(f"matches /{expected.regex}/")
        return _text("answer " + ", ".join(checks))
    calls: list[ExpectedCall] = expected
    return "".join(_call(call.name, json.dumps(call.arguments, ensure_ascii=False)) for call in calls)


def _result_cell(result: CaseResult | None) -> str:
    if result is None:
        return "<td>-</td>"
    mark = '<span class="right">right</span>' if result.correct else '<span class="wrong">wrong</span>'
    parts = [f'<td data-correct="{int(result.correct)}">{mark}']
    if result.malformed:
        parts.append(" (malformed)")
    parts += [_call(call.name, call.arguments) for call in result.calls]
    if result.answer is not None:
        parts.append(_text(result.answer))
    if result.error is not None:
        parts.append(_text(f"error: {result.error}"))
    if result.reason:
        parts.append(f'<div class="role">{escape(result.reason)}</div>')
    parts.append(f'<div class="role">{result.latency_s:.3f} s</div></td>')
    return "".join(parts)
