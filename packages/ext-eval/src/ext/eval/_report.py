"""Results and reports: per case, per category and overall, as JSON, and two configurations side by side."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

OVERALL = "overall"


class CallRecord(BaseModel):
    """A tool call the model made, as it made it (arguments are its raw JSON text)."""

    name: str
    arguments: str


class CaseResult(BaseModel):
    """What one configuration did on one case."""

    id: str
    category: str
    calls: list[CallRecord] = Field(default_factory=list)
    answer: str | None = Field(default=None, description="The text answer, when the model made no call.")
    correct: bool
    malformed: bool
    reason: str = Field(default="", description="Why the answer is wrong (empty when right).")
    error: str | None = Field(default=None, description="The error the call raised, when it failed.")
    latency_s: float = Field(ge=0)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = Field(
        default=None, description="What the call cost in US dollars (ext-eval[cost]); None for a model without a price."
    )


class Summary(BaseModel):
    """The figures over a set of case results."""

    cases: int
    correct: int
    malformed: int
    errors: int
    accuracy: float = Field(description="correct / cases")
    malformed_rate: float = Field(description="cases with a malformed call / cases")
    latency_p50_s: float = Field(description="Median latency (nearest-rank).")
    latency_p99_s: float = Field(description="99th percentile latency (nearest-rank).")
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None = Field(
        default=None, description="The priced cases' cost in US dollars (None: none priced)."
    )


class ConfigReport(BaseModel):
    """One configuration's run: its figures overall and per category, and every case's result."""

    name: str
    overall: Summary
    categories: dict[str, Summary]
    results: list[CaseResult]


class ComparisonRow(BaseModel):
    """One category (or `overall`) of two configurations side by side; deltas are B minus A."""

    category: str
    accuracy_a: float
    accuracy_b: float
    accuracy_delta: float
    malformed_rate_a: float
    malformed_rate_b: float
    malformed_rate_delta: float
    latency_p50_delta_s: float


class EvalReport(BaseModel):
    """A whole run: the dataset and each configuration's report, in the order given."""

    dataset: str
    configs: list[ConfigReport]

    def config(self, name: str) -> ConfigReport:
        for report in self.configs:
            if report.name == name:
                return report
        raise KeyError(f"no configuration {name!r} in this report ({', '.join(c.name for c in self.configs)})")

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def write_json(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    def compare(self, a: str | None = None, b: str | None = None) -> list[ComparisonRow]:
        """Configuration `b` against `a` (default: the second against the first), per category then overall."""
        if len(self.configs) < 2 and (a is None or b is None):
            raise ValueError("a comparison needs two configurations")
        first = self.config(a) if a is not None else self.configs[0]
        second = self.config(b) if b is not None else self.configs[1]
        names = sorted(set(first.categories) | set(second.categories))
        return [_row(name, _summary_of(first, name), _summary_of(second, name)) for name in [*names, OVERALL]]


def _summary_of(report: ConfigReport, category: str) -> Summary:
    if category == OVERALL:
        return report.overall
    return report.categories.get(category) or summarize([])


def _row(category: str, a: Summary, b: Summary) -> ComparisonRow:
    return ComparisonRow(
        category=category,
        accuracy_a=a.accuracy,
        accuracy_b=b.accuracy,
        accuracy_delta=b.accuracy - a.accuracy,
        malformed_rate_a=a.malformed_rate,
        malformed_rate_b=b.malformed_rate,
        malformed_rate_delta=b.malformed_rate - a.malformed_rate,
        latency_p50_delta_s=b.latency_p50_s - a.latency_p50_s,
    )


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile `p` (0 < p <= 100) of `values`; 0.0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(results: Sequence[CaseResult]) -> Summary:
    """The figures over `results`."""
    count = len(results)
    correct = sum(r.correct for r in results)
    malformed = sum(r.malformed for r in results)
    latencies = [r.latency_s for r in results]
    return Summary(
        cases=count,
        correct=correct,
        malformed=malformed,
        errors=sum(r.error is not None for r in results),
        accuracy=correct / count if count else 0.0,
        malformed_rate=malformed / count if count else 0.0,
        latency_p50_s=percentile(latencies, 50),
        latency_p99_s=percentile(latencies, 99),
        prompt_tokens=sum(r.prompt_tokens for r in results),
        completion_tokens=sum(r.completion_tokens for r in results),
        cost_usd=_total_cost(results),
    )


def _total_cost(results: Sequence[CaseResult]) -> float | None:
    costs = [r.cost_usd for r in results if r.cost_usd is not None]
    return sum(costs) if costs else None


def config_report(name: str, results: Sequence[CaseResult]) -> ConfigReport:
    """A configuration's report from its case results (kept in the order given)."""
    by_category: dict[str, list[CaseResult]] = {}
    for result in results:
        by_category.setdefault(result.category, []).append(result)
    return ConfigReport(
        name=name,
        overall=summarize(results),
        categories={category: summarize(items) for category, items in sorted(by_category.items())},
        results=list(results),
    )


def load_report(path: str | os.PathLike[str]) -> EvalReport:
    """A report written by `EvalReport.write_json`."""
    return EvalReport.model_validate_json(Path(path).read_text(encoding="utf-8"))
