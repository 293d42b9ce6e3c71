"""Charts of an evaluation report as inline SVG: plain text, no script, no external font or stylesheet, so a chart
shows the same in a page opened from disk, in a README on a code host, and in a browser with scripts off.

Every text that comes from a report (configuration and category names) is escaped; figures are formatted here."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ._report import OVERALL, ConfigReport, EvalReport, Summary, percentile, summarize

# Colour-blind-safe (Okabe-Ito), one per configuration, in report order; repeats after eight.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
_FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12"'
_LABEL_WIDTH = 150
_BAR_HEIGHT = 14
_CHART_WIDTH = 420


def colour(index: int) -> str:
    """The colour of the configuration at `index` in a report."""
    return PALETTE[index % len(PALETTE)]


def _svg(width: int, height: int, title: str, body: list[str], *, standalone: bool) -> str:
    namespace = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    return (
        f'<svg{namespace} width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" {_FONT}>'
        f"<title>{escape(title)}</title>"
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>' + "".join(body) + "</svg>"
    )


def _legend(configs: Sequence[ConfigReport], y: int, width: int) -> tuple[list[str], int]:
    """The legend's parts, wrapped to `width`, and the height it takes (rows of 18 px)."""
    parts: list[str] = []
    x = 8
    for index, config in enumerate(configs):
        item = 24 + 7 * len(config.name)
        if x > 8 and x + item > width:
            x, y = 8, y + 18
        parts.append(f'<rect x="{x}" y="{y - 10}" width="10" height="10" fill="{colour(index)}"/>')
        parts.append(f'<text x="{x + 14}" y="{y}">{escape(config.name)}</text>')
        x += item
    return parts, y


def _summary(config: ConfigReport, category: str) -> Summary:
    if category == OVERALL:
        return config.overall
    return config.categories.get(category) or summarize([])


def accuracy_chart(report: EvalReport, *, standalone: bool = False, title: str | None = None) -> str:
    """Accuracy per category (and overall) as horizontal bars, one per configuration, each labelled with its
    figure (`62% (5/8)`). `standalone` adds the SVG namespace, for a file of its own."""
    configs = report.configs
    categories = [*sorted({c for config in configs for c in config.categories}), OVERALL]
    group = _BAR_HEIGHT * len(configs) + 10
    top = 28
    width = _LABEL_WIDTH + _CHART_WIDTH + 110
    body = [f'<text x="8" y="16" font-weight="bold">{escape(title or "Accuracy per category")}</text>']
    for row, category in enumerate(categories):
        y0 = top + row * group
        label_y = y0 + (_BAR_HEIGHT * len(configs)) / 2 + 4
        weight = ' font-weight="bold"' if category == OVERALL else ""
        body.append(f'<text x="8" y="{label_y:.0f}"{weight}>{escape(category)}</text>')
        for index, config in enumerate(configs):
            summary = _summary(config, category)
            y = y0 + index * _BAR_HEIGHT
            bar = round(_CHART_WIDTH * summary.accuracy)
            figure = f"{summary.accuracy:.0%} ({summary.correct}/{summary.cases})" if summary.cases else "no cases"
            body.append(
                f'<rect class="bar" x="{_LABEL_WIDTH}" y="{y}" width="{bar}" height="{_BAR_HEIGHT - 2}" '
                f'fill="{colour(index)}" data-config="{escape(config.name)}" data-category="{escape(category)}">'
                f"<title>{escape(config.name)}, {escape(category)}: {figure}</title></rect>"
            )
            body.append(
                f'<text class="figure" x="{_LABEL_WIDTH + bar + 4}" y="{y + _BAR_HEIGHT - 4}" '
                f'data-config="{escape(config.name)}" data-category="{escape(category)}">{figure}</text>'
            )
    axis_y = top + group * len(categories)
    body.append(f'<line x1="{_LABEL_WIDTH}" y1="{top - 4}" x2="{_LABEL_WIDTH}" y2="{axis_y}" stroke="#555"/>')
    legend, last_row = _legend(configs, axis_y + 18, width)
    body += legend
    height = last_row + 10
    return _svg(width, height, title or "Accuracy per category", body, standalone=standalone)


def malformed_chart(report: EvalReport, *, standalone: bool = False) -> str:
    """The malformed-call rate of each configuration (cases with a call that breaks its tool's schema)."""
    configs = report.configs
    top = 28
    height = top + 20 * len(configs) + 8
    width = _LABEL_WIDTH + _CHART_WIDTH + 110
    body = ['<text x="8" y="16" font-weight="bold">Malformed calls</text>']
    for index, config in enumerate(configs):
        summary = config.overall
        y = top + index * 20
        bar = round(_CHART_WIDTH * summary.malformed_rate)
        figure = f"{summary.malformed_rate:.0%} ({summary.malformed}/{summary.cases})"
        body.append(f'<text x="8" y="{y + 12}">{escape(config.name)}</text>')
        body.append(
            f'<rect class="bar" x="{_LABEL_WIDTH}" y="{y}" width="{bar}" height="16" fill="{colour(index)}" '
            f'data-config="{escape(config.name)}"/>'
        )
        body.append(
            f'<text class="figure" x="{_LABEL_WIDTH + bar + 4}" y="{y + 12}" data-config="{escape(config.name)}">'
            f"{figure}</text>"
        )
    return _svg(width, height, "Malformed calls", body, standalone=standalone)


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def latency_chart(report: EvalReport, *, standalone: bool = False) -> str:
    """Each configuration's case latencies as a strip of dots on one time axis, with p50 and p99 marked."""
    configs = report.configs
    latest = max((r.latency_s for config in configs for r in config.results), default=0.0) or 1.0
    top = 28
    lane = 34
    height = top + lane * len(configs) + 28
    width = _LABEL_WIDTH + _CHART_WIDTH + 110

    def x_of(seconds: float) -> float:
        return _LABEL_WIDTH + _CHART_WIDTH * seconds / latest

    body = ['<text x="8" y="16" font-weight="bold">Latency per case</text>']
    for index, config in enumerate(configs):
        y = top + index * lane
        latencies = [r.latency_s for r in config.results]
        body.append(f'<text x="8" y="{y + 16}">{escape(config.name)}</text>')
        body.append(
            f'<line x1="{_LABEL_WIDTH}" y1="{y + 12}" x2="{_LABEL_WIDTH + _CHART_WIDTH}" y2="{y + 12}" stroke="#ddd"/>'
        )
        # One path of dots keeps a 1,000-case report's chart small (a circle element per case would not be).
        dots = "".join(f"M{x_of(s):.1f} {y + 12}h0" for s in latencies)
        if dots:
            body.append(
                f'<path d="{dots}" stroke="{colour(index)}" stroke-width="5" stroke-linecap="round" opacity="0.5"/>'
            )
        for name, p in (("p50", 50), ("p99", 99)):
            value = percentile(latencies, p)
            x = x_of(value)
            body.append(
                f'<line class="mark" x1="{x:.1f}" y1="{y + 2}" x2="{x:.1f}" y2="{y + 22}" stroke="#000" '
                f'stroke-width="1.5" data-config="{escape(config.name)}" data-mark="{name}"/>'
            )
            anchor = "end" if name == "p50" else "start"
            shift = -3 if name == "p50" else 3
            body.append(
                f'<text class="figure" x="{x + shift:.1f}" y="{y + 32}" text-anchor="{anchor}" font-size="10" '
                f'data-config="{escape(config.name)}" data-mark="{name}">{name} {_seconds(value)}</text>'
            )
    axis_y = top + lane * len(configs) + 6
    body.append(f'<text x="{_LABEL_WIDTH}" y="{axis_y + 12}" font-size="10">0</text>')
    body.append(
        f'<text x="{_LABEL_WIDTH + _CHART_WIDTH}" y="{axis_y + 12}" font-size="10" text-anchor="end">'
        f"{_seconds(latest)}</text>"
    )
    return _svg(width, height, "Latency per case", body, standalone=standalone)
