"""Running a dataset against one or more configurations: each case once per configuration, `concurrency` at a time,
scored as it completes."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ext.core import (
    ChatCompletionClient,
    ChatOptions,
    ConfigurationError,
    CreateResult,
    ToolChoice,
    normalize_provider_name,
    provider_infos,
)
from ext.pipeline import build_client, load_pipeline

from ._dataset import Dataset, EvalCase
from ._report import CallRecord, CaseResult, EvalReport, config_report
from ._scoring import score

logger = logging.getLogger(__name__)

_CONFIG_SUFFIXES = (".yaml", ".yml", ".json")

ProgressCallback = Callable[[str, CaseResult], None]
"""Called with the configuration's name and each case's result as it completes."""


@dataclass
class EvalTarget:
    """A configuration to evaluate: a name for the report and the client (or pipeline) that answers.

    With `owned`, the run closes the client when it is done (it built it from a spec)."""

    name: str
    client: ChatCompletionClient
    owned: bool = False


def is_pipeline_spec(spec: str) -> bool:
    """Whether a configuration names a pipeline file (by its suffix, or because the file exists)."""
    return spec.endswith(_CONFIG_SUFFIXES) or os.path.isfile(spec)


def target_from_spec(spec: str) -> EvalTarget:
    """A target from a pipeline file (`.yaml`, `.yml`, `.json`: `ext.pipeline.load_pipeline`) or `PROVIDER:MODEL`
    (`ext.pipeline.build_client`, the model going to the argument the provider declares)."""
    if is_pipeline_spec(spec):
        return EvalTarget(Path(spec).stem, load_pipeline(spec), owned=True)
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise ConfigurationError(f"a configuration is a pipeline file or PROVIDER:MODEL, got {spec!r}")
    info = provider_infos().get(normalize_provider_name(provider))
    parameter = info.model_parameter if info is not None else "model"
    return EvalTarget(spec, build_client(provider, None, **{parameter: model}), owned=True)


async def run_eval(
    dataset: Dataset,
    configs: Sequence[str | EvalTarget],
    *,
    concurrency: int = 4,
    options: ChatOptions | None = None,
    tool_choice: ToolChoice = "auto",
    on_result: ProgressCallback | None = None,
) -> EvalReport:
    """Run every case of `dataset` against each configuration (a pipeline file, `PROVIDER:MODEL`, or an
    `EvalTarget`), one configuration after the other, with at most `concurrency` cases in flight.

    A case whose call raises is recorded as wrong with its `error` (the run goes on); clients built here from
    specs are closed at the end. Cancelling the run cancels the calls in flight.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if not configs:
        raise ValueError("configs: give at least one configuration")
    targets: list[EvalTarget] = []
    try:
        for config in configs:
            targets.append(config if isinstance(config, EvalTarget) else target_from_spec(config))
        names = [t.name for t in targets]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise ValueError(f"configs: two configurations are named {duplicate!r}; name them apart (EvalTarget)")
        reports = []
        for target in targets:
            results = await _run_target(dataset, target, concurrency, options, tool_choice, on_result)
            reports.append(config_report(target.name, results))
        return EvalReport(dataset=dataset.name, configs=reports)
    finally:
        for target in targets:
            if target.owned:
                await target.client.close()


async def _run_target(
    dataset: Dataset,
    target: EvalTarget,
    concurrency: int,
    options: ChatOptions | None,
    tool_choice: ToolChoice,
    on_result: ProgressCallback | None,
) -> list[CaseResult]:
    gate = asyncio.Semaphore(concurrency)

    async def one(case: EvalCase) -> CaseResult:
        async with gate:
            result = await run_case(target.client, case, options=options, tool_choice=tool_choice)
        if on_result is not None:
            on_result(target.name, result)
        return result

    return list(await asyncio.gather(*(one(case) for case in dataset)))


async def run_case(
    client: ChatCompletionClient,
    case: EvalCase,
    *,
    options: ChatOptions | None = None,
    tool_choice: ToolChoice = "auto",
) -> CaseResult:
    """Ask `client` one case (with its tools; the calls are scored, not run) and score the answer."""
    # A case with no tools cannot ask for a tool choice: APIs refuse tool_choice without tools.
    choice = tool_choice if case.tools else "auto"
    started = time.perf_counter()
    try:
        created: CreateResult = await client.create(
            list(case.messages), tools=case.tool_schemas, tool_choice=choice, options=options
        )
    except Exception as exc:  # recorded per case: one failing case must not lose the run
        latency = time.perf_counter() - started
        logger.debug("case %s failed", case.id, exc_info=True)
        return CaseResult(
            id=case.id,
            category=case.category,
            correct=False,
            malformed=False,
            reason="the call failed",
            error=f"{type(exc).__name__}: {exc}",
            latency_s=latency,
        )
    latency = time.perf_counter() - started
    verdict = score(case, created.content)
    content = created.content
    return CaseResult(
        id=case.id,
        category=case.category,
        calls=[] if isinstance(content, str) else [CallRecord(name=c.name, arguments=c.arguments) for c in content],
        answer=content if isinstance(content, str) else None,
        correct=verdict.correct,
        malformed=verdict.malformed,
        reason=verdict.reason,
        latency_s=latency,
        prompt_tokens=created.usage.prompt_tokens,
        completion_tokens=created.usage.completion_tokens,
        cost_usd=None if created.cached else _cost(client, created),
    )


def _cost(client: ChatCompletionClient, created: CreateResult) -> float | None:
    """The call's cost in US dollars when ext-resilience (`ext-eval[cost]`) prices the model, else None."""
    try:
        from ext.resilience import price_usage
    except ImportError:
        return None
    model = str(getattr(client, "model", "") or "")
    cost = price_usage(model, created.usage, provider=getattr(client, "provider_name", None)) if model else None
    return None if cost is None else float(cost)
