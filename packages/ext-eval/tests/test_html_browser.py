"""The HTML report in a real browser: headless Chromium (Debian's `chromium`; tools/test.sh installs it) loads a page
written from a known run, runs its script, and the test reads the rendered DOM: the figures on the bars, the rows
each filter shows, and that the dataset's hostile text ran nothing. A screenshot is kept as a test artifact in
`$EXT_TEST_ARTIFACTS` (default: `test-artifacts/` at the repository's root)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ext_eval_html_cases import known_cases, known_report

from ext.eval import write_html

ROOT = Path(__file__).resolve().parents[3]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("these tests need headless Chromium: apt-get install chromium (tools/test.sh does when run as root)")


def _browser(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _dom(page: Path, profile: Path, fragment: str = "") -> str:
    return _browser(page.as_uri() + fragment, profile, "--dump-dom").stdout


def _shown_rows(dom: str) -> list[str]:
    rows = re.findall(r"<tr (data-id=\"[^\"]*\"[^>]*)>", dom)
    return [re.search(r'data-id="([^"]*)"', r).group(1) for r in rows if "hidden" not in r]  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    write_html(known_report(), path, known_cases())  # type: ignore[arg-type]
    return path


def test_the_page_renders_its_figures_and_all_rows(page: Path, tmp_path: Path) -> None:
    dom = _dom(page, tmp_path)
    assert 'data-ready="1"' in dom  # the page's own script ran
    figures = re.findall(r'<text class="figure"[^>]*data-config="beta" data-category="([^"]*)">([^<]*)</text>', dom)
    assert dict(figures) == {"irrelevance": "0% (0/1)", "simple": "100% (2/2)", "overall": "67% (2/3)"}
    assert _shown_rows(dom) == ["s1", "s2", "i1"]
    assert '<span id="shown">3 of 3 cases shown</span>' in dom


def test_hostile_dataset_text_runs_nothing(page: Path, tmp_path: Path) -> None:
    dom = _dom(page, tmp_path)
    assert "<title>ext eval: known</title>" in dom  # the dataset's script would have set it to PWNED
    assert "PWNED</title>" not in dom
    assert "<img" not in dom
    assert '&lt;script&gt;document.title="PWNED"&lt;/script&gt;' in dom


@pytest.mark.parametrize(
    ("fragment", "rows", "shown"),
    [
        ("#verdict=wrong", ["s2", "i1"], "2 of 3"),
        ("#verdict=right", ["s1"], "1 of 3"),
        ("#category=simple&disagree=1", ["s2"], "1 of 3"),
        ("#category=irrelevance", ["i1"], "1 of 3"),
    ],
)
def test_filters_show_the_right_rows(page: Path, tmp_path: Path, fragment: str, rows: list[str], shown: str) -> None:
    dom = _dom(page, tmp_path, fragment)
    assert _shown_rows(dom) == rows
    assert f'<span id="shown">{shown} cases shown</span>' in dom


def test_screenshot_is_kept_as_an_artifact(page: Path, tmp_path: Path) -> None:
    artifacts = Path(os.environ.get("EXT_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "ext-eval"
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "report.png"
    shot.unlink(missing_ok=True)
    _browser(page.as_uri(), tmp_path, f"--screenshot={shot}", "--window-size=1400,1600", "--hide-scrollbars")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 1600)
