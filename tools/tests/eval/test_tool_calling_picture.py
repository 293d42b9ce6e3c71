"""The root README's tool-calling pictures are what `tool_calling_picture.py` draws from the results files the tables
cite: redrawn here and compared byte for byte, so a picture cannot drift from its data."""

from __future__ import annotations

from pathlib import Path

from tool_calling_picture import draw, report_from_results

RESULTS = Path(__file__).resolve().parents[2] / "eval" / "results"
AUTO = [
    str(RESULTS / "tool_calling_smollm2_135m_5.json"),
    str(RESULTS / "tool_calling_smollm2_135m_5_round2.json") + ":llama-server/native",
    str(RESULTS / "tool_calling_smollm2_135m_ollama.json"),
]
REQUIRED = [
    str(RESULTS / "tool_calling_smollm2_135m_required_5.json"),
    str(RESULTS / "tool_calling_smollm2_135m_required_5_round2.json") + ":llama-server/native",
    str(RESULTS / "tool_calling_smollm2_135m_ollama_required.json"),
]


def test_the_auto_picture_is_drawn_from_its_results(tmp_path: Path) -> None:
    out = tmp_path / "auto.svg"
    draw(AUTO, out, "SmolLM2-135M, tool_choice=auto: accuracy per category (BFCL subset, first 5 each)")
    assert out.read_text() == (RESULTS / "tool_calling_auto.svg").read_text()


def test_the_required_picture_is_drawn_from_its_results(tmp_path: Path) -> None:
    out = tmp_path / "required.svg"
    title = "SmolLM2-135M, tool_choice=required: accuracy per category (BFCL subset, first 5 each)"
    draw(REQUIRED, out, title, ["simple", "multiple", "parallel"])
    assert out.read_text() == (RESULTS / "tool_calling_required.svg").read_text()


def test_the_figures_are_the_readme_tables() -> None:
    report = report_from_results(REQUIRED, ["simple", "multiple", "parallel"])
    overall = {c.name: f"{c.overall.correct}/{c.overall.cases}" for c in report.configs}
    assert overall["llama-server/constrained"] == "8/15"  # 53% in the README's required table
    assert overall["ollama/constrained"] == "2/15"  # 13%
    assert [c.name for c in report.configs][:2] == ["in-process/constrained", "in-process/prompt"]
