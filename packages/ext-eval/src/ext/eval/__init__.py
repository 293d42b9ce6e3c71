"""ext-eval: run a dataset of tool-calling cases against model clients or chat pipelines, and report accuracy,
malformed calls, latency and tokens, scored as the Berkeley Function Calling Leaderboard checks calls."""

from ext.eval.__about__ import __version__
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
    "OVERALL",
    "AnswerCheck",
    "CallRecord",
    "CaseResult",
    "ComparisonRow",
    "ConfigReport",
    "Dataset",
    "DatasetError",
    "EvalCase",
    "EvalReport",
    "EvalTarget",
    "ExpectedCall",
    "NoCall",
    "ProgressCallback",
    "Summary",
    "ToolSpec",
    "Verdict",
    "__version__",
    "config_report",
    "is_pipeline_spec",
    "load_dataset",
    "load_report",
    "malformed_reason",
    "normalize",
    "parse_case",
    "percentile",
    "run_case",
    "run_eval",
    "score",
    "shipped_dataset_path",
    "shipped_datasets",
    "summarize",
    "target_from_spec",
]
