"""The HTML report as text: figures, escaping, and the one script the page's policy allows."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from ext_eval_html_cases import known_cases, known_report

from ext.eval import render_html, write_html


def test_figures_on_the_bars_are_the_reports() -> None:
    page = render_html(known_report(), known_cases())  # type: ignore[arg-type]
    figures = re.findall(r'<text class="figure"[^>]*data-config="([^"]*)" data-category="([^"]*)">([^<]*)</text>', page)
    assert ("alpha &lt;b&gt;", "simple", "50% (1/2)") in figures
    assert ("beta", "simple", "100% (2/2)") in figures
    assert ("alpha &lt;b&gt;", "overall", "67% (2/3)") in figures
    assert ("beta", "irrelevance", "0% (0/1)") in figures


def test_dataset_text_is_escaped_and_no_other_script_is_allowed() -> None:
    page = render_html(known_report(), known_cases())  # type: ignore[arg-type]
    assert page.count("<script") == 1  # the page's own; the dataset's appear escaped
    assert "&lt;script&gt;document.title=&quot;PWNED&quot;&lt;/script&gt;" in page
    assert "<img" not in page
    assert "&amp;amp; &quot;quoted&quot;" in page
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert policy is not None
    assert f"script-src &#x27;sha256-{digest}&#x27;" in policy.group(1)
    assert "default-src &#x27;none&#x27;" in policy.group(1)


def test_rows_carry_what_the_filters_read() -> None:
    page = render_html(known_report(), known_cases())  # type: ignore[arg-type]
    rows = dict(
        re.findall(r'<tr data-id="([^"]*)" (data-category="[^"]*" data-right="[^"]*" data-disagree="[^"]*")', page)
    )
    assert rows == {
        "s1": 'data-category="simple" data-right="all" data-disagree="0"',
        "s2": 'data-category="simple" data-right="some" data-disagree="1"',
        "i1": 'data-category="irrelevance" data-right="some" data-disagree="1"',
    }


def test_without_the_dataset_the_table_shows_what_each_configuration_did() -> None:
    page = render_html(known_report())
    assert "get_weather({&quot;city&quot;: &quot;Bergen&quot;})" in page
    assert "Weather in Oslo?" not in page


def test_write_html_writes_the_whole_page(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    write_html(known_report(), target, known_cases())  # type: ignore[arg-type]
    text = target.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_cost_shows_when_a_configuration_is_priced() -> None:
    report = known_report()
    assert "cost (USD)" not in render_html(report)
    priced = report.configs[1].model_copy(
        update={"overall": report.configs[1].overall.model_copy(update={"cost_usd": 0.00125})}
    )
    page = render_html(report.model_copy(update={"configs": [report.configs[0], priced]}))
    assert "<th>cost (USD)</th>" in page
    assert '<td class="num">-</td></tr>' in page and '<td class="num">0.001250</td></tr>' in page
