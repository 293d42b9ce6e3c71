"""Typed output: the answer read as the agent's `output_type`, and the corrective message when it is not.

The provider does the constraining (the pipeline passes `json_output=output_type`: OpenAI and Azure send a
strict JSON schema as `response_format`, Anthropic `output_config.format`, Ollama `format`, llama.cpp a grammar
built from the schema); the client parses the answer into `CreateResult.parsed`. The agent checks that value
and, for a client that does not parse, parses the text with core's `parse_json_output` (pydantic-core's JSON
reader: linear time, bounded nesting, no interpreter error on hostile input). Texts kept for the corrective
message and the error are cut to a bound, so a huge answer cannot grow the session without limit.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ext.core import CreateResult, OutputParseError, parse_json_output

__all__ = ["MAX_ERROR_CHARS", "MAX_ECHO_CHARS", "check_output_type", "correction_text", "cut", "typed_value"]

MAX_ERROR_CHARS = 2_000
"""The validation message kept for the corrective retry and the error."""
MAX_ECHO_CHARS = 20_000
"""The failed answer kept in the session for the corrective retry."""


def check_output_type(output_type: object) -> type[BaseModel] | None:
    if output_type is None or output_type is str:
        return None
    if isinstance(output_type, type) and issubclass(output_type, BaseModel):
        return output_type
    raise TypeError(f"output_type must be a pydantic BaseModel subclass (or None / str for text), got {output_type!r}")


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def typed_value(result: CreateResult, output_type: type[BaseModel]) -> Any:
    """The answer as `output_type`; `OutputParseError` (with the raw text) when it does not validate."""
    if isinstance(result.parsed, output_type):
        return result.parsed
    text = result.content if isinstance(result.content, str) else ""
    return parse_json_output(text, output_type, finish_reason=result.finish_reason)


def correction_text(error: OutputParseError, output_type: type[BaseModel]) -> str:
    return (
        f"Your answer could not be read as {output_type.__name__}: {cut(str(error), MAX_ERROR_CHARS)}\n"
        "Answer again with only a JSON object matching the required schema."
    )
