"""ext-eval: run a dataset of tool-calling cases against model clients or chat pipelines, and report accuracy,
malformed calls, latency and tokens, scored as the Berkeley Function Calling Leaderboard checks calls."""

from ext.eval.__about__ import __version__
from ext.eval._charts import accuracy_chart, latency_chart, malformed_chart
from ext.eval._dataset import (
    AnswerCheck,
    Dataset,
    DatasetError,
    EvalCase,
    ExpectedCall,
    NoCall,
    ToolSpec,
    load_dataset,
    parse_case,
    shipped_dataset_path,
    shipped_datasets,
)
from ext.eval._html import CONTENT_SECURITY_POLICY, render_html, write_html
from ext.eval._report import (
    OVERALL,
    CallRecord,
    CaseResult,
    ComparisonRow,
    ConfigReport,
    EvalReport,
    Summary,
    config_report,
    load_report,
    percentile,
    summarize,
)
from ext.eval._run import EvalTarget, ProgressCallback, is_pipeline_spec, run_case, run_eval, target_from_spec
from ext.eval._scoring import Verdict, normalize, score
from ext.eval._wellformed import malformed_reason

__all__ = [
    # application code: running an evaluation
    "Dataset",
    "DatasetError",
    "EvalTarget",
    "is_pipeline_spec",
    "load_dataset",
    "ProgressCallback",
    "run_eval",
    "shipped_dataset_path",
    "shipped_datasets",
    "target_from_spec",
    # application code: reports
    "CallRecord",
    "CaseResult",
    "ComparisonRow",
    "config_report",
    "ConfigReport",
    "EvalReport",
    "load_report",
    "OVERALL",
    "percentile",
    "summarize",
    "Summary",
    # application code: the report as a page (and its charts as SVG)
    "accuracy_chart",
    "CONTENT_SECURITY_POLICY",
    "latency_chart",
    "malformed_chart",
    "render_html",
    "write_html",
    # dataset authors: cases and how they are scored
    "AnswerCheck",
    "EvalCase",
    "ExpectedCall",
    "malformed_reason",
    "NoCall",
    "normalize",
    "parse_case",
    "run_case",
    "score",
    "ToolSpec",
    "Verdict",
    "__version__",
]
