"""`ext eval`: run a dataset against one or more configurations (ext-eval) and show the figures.

The tables go to stdout; the progress bar goes to stderr (hidden with --quiet). `--json FILE` also writes the whole
report, every case included; `--html FILE` the same as a page (ext-eval's `write_html`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from ext.core import ComponentError, ConfigurationError

from ._context import State, run_command
from ._errors import CliError
from ._output import Output

if TYPE_CHECKING:
    from rich.table import Table

    from ext.eval import CaseResult, ConfigReport, EvalReport, EvalTarget

_INSTALL_HINT = "install ext-eval (from a clone: pip install -e 'packages/ext-cli[eval]')"
_PIPE_WIDTH = 160


@click.command("eval")
@click.argument("dataset")
@click.option(
    "-m",
    "--model",
    "models",
    multiple=True,
    metavar="PROVIDER:MODEL|FILE",
    help="A configuration: PROVIDER:MODEL or a pipeline file; twice to compare two (default: the embedded model).",
)
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="FILE",
    help="A configuration from an agent spec file: its model pipeline, with its instructions (repeatable).",
)
@click.option("--json", "json_path", metavar="FILE", help="Also write the full report (every case) as JSON.")
@click.option(
    "--html",
    "html_path",
    metavar="FILE",
    help="Also write the report as one self-contained HTML page (charts, every case, filters; opens from disk).",
)
@click.option("--limit", type=click.IntRange(min=1), help="Run at most N cases (after --category).")
@click.option("--category", "categories", multiple=True, help="Only cases of this category (repeatable).")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True, help="Cases in flight.")
@click.option(
    "--tool-choice",
    default="auto",
    show_default=True,
    metavar="auto|required|none",
    help="The tool choice sent with each case that has tools.",
)
@click.pass_context
def eval_command(
    ctx: click.Context,
    dataset: str,
    models: Sequence[str],
    agents: Sequence[str],
    json_path: str | None,
    html_path: str | None,
    limit: int | None,
    categories: Sequence[str],
    concurrency: int,
    tool_choice: str,
) -> None:
    """Score configurations on DATASET: a JSONL file, or a shipped one (bfcl, demo)."""
    state: State = ctx.obj

    async def go() -> int:
        report = await run_eval_command(
            dataset,
            models,
            state.out,
            agents=agents,
            categories=categories,
            limit=limit,
            concurrency=concurrency,
            tool_choice=tool_choice,
        )
        if json_path is not None:
            report.write_json(json_path)
            state.out.info(f"report written to {json_path}")
        if html_path is not None:
            from ext.eval import load_dataset, write_html

            write_html(report, html_path, load_dataset(dataset).cases)
            state.out.info(f"page written to {html_path}")
        return 0

    ctx.exit(run_command(ctx, go))


async def run_eval_command(
    dataset: str,
    models: Sequence[str],
    out: Output,
    *,
    agents: Sequence[str] = (),
    categories: Sequence[str] = (),
    limit: int | None = None,
    concurrency: int = 4,
    tool_choice: str = "auto",
) -> EvalReport:
    """Load, run, and print the tables; the report is returned for --json."""
    # Imported here, not with the module: every `ext` command imports this module to register `eval`.
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        from ext.eval import DatasetError, load_dataset, run_eval
    except ImportError:
        raise CliError("ext-eval is not installed", hint=_INSTALL_HINT) from None
    try:
        cases = load_dataset(dataset).select(categories=categories, limit=limit)
    except (DatasetError, ValueError) as exc:
        raise CliError(str(exc)) from None
    targets: list[EvalTarget] = []
    try:
        specs: Sequence[str | None] = models or ([] if agents else [None])
        for spec in specs:
            targets.append(_target(spec))
        if agents:
            from ._agent_cli import agent_eval_target

            for path in agents:
                targets.append(agent_eval_target(path))
    except BaseException:
        for built in targets:  # run_eval closes them once it runs; not reached here
            await built.client.close()
        raise
    console = Console(file=out.out, highlight=False)
    if not console.is_terminal:
        console.width = _PIPE_WIDTH  # piped or redirected: full rows, never names cut to fit 80 columns
    total = len(cases) * len(targets)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out.err,
        disable=out.quiet,
        transient=out.err.is_terminal,
    ) as progress:
        task = progress.add_task(f"{cases.name}: {len(cases)} cases", total=total)

        def advance(_: str, __: CaseResult) -> None:
            progress.advance(task)

        report = await run_eval(cases, targets, concurrency=concurrency, tool_choice=tool_choice, on_result=advance)
    for config in report.configs:
        console.print(_summary_table(config))
    if len(report.configs) == 2:
        console.print(_comparison_table(report))
    return report


def _target(spec: str | None) -> EvalTarget:
    """A configuration as `ext chat -m` builds it (the same providers, defaults and errors), or a pipeline file."""
    from ext.eval import EvalTarget, is_pipeline_spec, target_from_spec

    from ._chat import _model_label
    from ._defaults import DEFAULT_MODEL_SETTINGS, default_model_spec
    from ._providers import make_client

    try:
        if spec is not None and is_pipeline_spec(spec):
            return target_from_spec(spec)
        model = spec or default_model_spec()
        client = make_client(model, DEFAULT_MODEL_SETTINGS if spec is None else {})
    except (ConfigurationError, ComponentError) as exc:
        raise CliError(f"-m {spec}: {exc}" if spec else str(exc)) from None
    return EvalTarget(_model_label(model), client, owned=True)


def _percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def _summary_table(config: ConfigReport) -> Table:
    from rich.table import Table

    table = Table(title=config.name, title_justify="left")
    priced = config.overall.cost_usd is not None  # a cost column only when ext-resilience priced the model
    names = ("category", "cases", "accuracy", "malformed", "errors", "p50 s", "p99 s", "tokens in/out")
    for name in (*names, "cost $") if priced else names:
        table.add_column(name, justify="left" if name == "category" else "right", no_wrap=True)
    rows: list[tuple[str, Any]] = [*config.categories.items(), ("overall", config.overall)]
    for category, s in rows:
        cost = ["-" if s.cost_usd is None else f"{s.cost_usd:.6f}"] if priced else []
        table.add_row(
            category,
            str(s.cases),
            _percent(s.accuracy),
            _percent(s.malformed_rate),
            str(s.errors),
            f"{s.latency_p50_s:.2f}",
            f"{s.latency_p99_s:.2f}",
            f"{s.prompt_tokens}/{s.completion_tokens}",
            *cost,
        )
    return table


def _comparison_table(report: EvalReport) -> Table:
    from rich.table import Table

    a, b = report.configs[0].name, report.configs[1].name
    table = Table(title=f"{b} vs {a} (delta = B - A)", title_justify="left")
    for name in ("category", "accuracy A", "accuracy B", "delta", "malformed A", "malformed B", "delta", "p50 delta s"):
        table.add_column(name, justify="left" if name == "category" else "right", no_wrap=True)
    for row in report.compare():
        table.add_row(
            row.category,
            _percent(row.accuracy_a),
            _percent(row.accuracy_b),
            f"{row.accuracy_delta * 100:+.1f}",
            _percent(row.malformed_rate_a),
            _percent(row.malformed_rate_b),
            f"{row.malformed_rate_delta * 100:+.1f}",
            f"{row.latency_p50_delta_s:+.2f}",
        )
    return table
