"""Datasets: JSONL files of cases (messages, tools, and what counts as right), validated line by line.

Each line is one JSON object (the README documents the format). A bad line is a `DatasetError` naming the file,
the line and the field, raised before any model is called.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from ext.core import AssistantMessage, LLMMessage, SystemMessage, ToolSchema, UserMessage

_SHIPPED = {"bfcl": "bfcl.jsonl", "demo": "demo.jsonl"}
# JSON's whitespace (RFC 8259): a line of these alone is blank. str.strip() would also strip U+2028 and the like.
_JSON_WHITESPACE = " \t\r"


class DatasetError(ValueError):
    """A dataset line that is not a valid case: the message starts with `file:line:` and names the field."""


class ExpectedCall(BaseModel):
    """One call the model should make: the tool's name and, per parameter, the values that count as right
    (BFCL's "possible answer": `""` among them means the parameter may be left out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="The tool's name.")
    arguments: dict[str, list[Any]] = Field(
        default_factory=dict, description='Each parameter\'s allowed values; include "" when it may be omitted.'
    )

    @field_validator("arguments")
    @classmethod
    def _nonempty(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for param, allowed in value.items():
            if not allowed:
                raise ValueError(f"arguments.{param}: expected a non-empty list of allowed values")
        return value


class NoCall(BaseModel):
    """Irrelevance: the right answer calls no tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    no_call: Literal[True]


class AnswerCheck(BaseModel):
    """Checks on the answer text (no tool call): every `contains` string appears (case-insensitive) and `regex`
    matches somewhere (Python `re.search`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contains: list[str] = Field(default_factory=list)
    regex: str | None = None

    @model_validator(mode="after")
    def _something(self) -> AnswerCheck:
        if not self.contains and self.regex is None:
            raise ValueError("an answer check needs `contains` or `regex`")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex: not a valid regular expression ({exc})") from None
        return self


def _expected_form(value: Any) -> str:
    """Which form `expected` is written in, so an error names the field of that form only."""
    if isinstance(value, list):
        return "calls"
    if isinstance(value, dict) and "no_call" in value:
        return "no_call"
    if isinstance(value, (NoCall, AnswerCheck)):
        return "no_call" if isinstance(value, NoCall) else "answer"
    return "answer"


_TAGS = ("calls", "no_call", "answer")

Expected = Annotated[
    Union[
        Annotated[list[ExpectedCall], Tag("calls")],
        Annotated[NoCall, Tag("no_call")],
        Annotated[AnswerCheck, Tag("answer")],
    ],
    Discriminator(_expected_form),
]
"""A list of calls, `{"no_call": true}`, or answer checks (`contains`, `regex`)."""

_ROLES = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}


def _message(index: int, value: Any) -> Any:
    """A plain `{role, content}` dict as the ext message JSON of that role (validated as such afterwards, so an
    error names the field); ext message JSON (with `type`) as is."""
    if isinstance(value, dict) and "type" not in value and "role" in value:
        role = value.get("role")
        cls = _ROLES.get(role) if isinstance(role, str) else None
        if cls is None:
            raise ValueError(f"item {index}: role must be one of {', '.join(_ROLES)}, got {role!r}")
        fields = {k: v for k, v in value.items() if k != "role"}
        if cls is not SystemMessage:
            fields.setdefault("source", role)
        return {"type": cls.__name__, **fields}
    return value


class ToolSpec(BaseModel):
    """A tool as the model sees it (`ext.core.ToolSchema`): name, description and the JSON Schema of its arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$", description="As the OpenAI API allows tool names.")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @field_validator("parameters")
    @classmethod
    def _object(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError('parameters: expected a JSON Schema with "type": "object"')
        if not isinstance(value.get("properties", {}), dict):
            raise ValueError("parameters.properties: expected an object")
        return value

    def tool_schema(self) -> ToolSchema:
        return ToolSchema(name=self.name, description=self.description, parameters=self.parameters)


class EvalCase(BaseModel):
    """One case of a dataset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    category: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="simple, multiple, parallel, irrelevance, ...")
    messages: list[LLMMessage] = Field(min_length=1)
    tools: list[ToolSpec] = Field(default_factory=list)
    expected: Expected

    @field_validator("messages", mode="before")
    @classmethod
    def _plain_messages(cls, value: Any) -> Any:
        return [_message(i, item) for i, item in enumerate(value)] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _calls_name_tools(self) -> EvalCase:
        names = {tool.name for tool in self.tools}
        if len(names) != len(self.tools):
            raise ValueError("tools: two tools have the same name")
        if isinstance(self.expected, list):
            if not self.expected:
                raise ValueError('expected: an empty list; write {"no_call": true} when no tool should be called')
            for index, call in enumerate(self.expected):
                if call.name not in names:
                    raise ValueError(f"expected.{index}.name: {call.name!r} is not among the tools ({sorted(names)})")
        return self

    @property
    def tools_by_name(self) -> dict[str, ToolSchema]:
        return {tool.name: tool.tool_schema() for tool in self.tools}

    @property
    def tool_schemas(self) -> list[ToolSchema]:
        return [tool.tool_schema() for tool in self.tools]


@dataclass(frozen=True)
class Dataset:
    """The cases of one dataset, in file order."""

    name: str
    cases: tuple[EvalCase, ...]

    def __iter__(self) -> Iterator[EvalCase]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)

    def select(self, *, categories: Sequence[str] = (), limit: int | None = None) -> Dataset:
        """The cases of `categories` (all when empty), at most `limit` of them."""
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        known = {case.category for case in self.cases}
        unknown = [c for c in categories if c not in known]
        if unknown:
            raise ValueError(f"category {unknown[0]!r} is not in {self.name} (it has {', '.join(sorted(known))})")
        cases = [case for case in self.cases if not categories or case.category in categories]
        return Dataset(self.name, tuple(cases[:limit]))


def parse_case(data: Any) -> EvalCase:
    """One case from its JSON value (a `pydantic.ValidationError` when it is not valid)."""
    return EvalCase.model_validate(data)


def load_dataset(source: str | os.PathLike[str]) -> Dataset:
    """A dataset from a JSONL file, or a shipped one by name (`bfcl`, `demo`). Blank lines are skipped."""
    path = shipped_dataset_path(str(source)) if str(source) in _SHIPPED else Path(source)
    try:
        data_bytes = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the dataset ({exc.strerror or exc})") from None
    cases: list[EvalCase] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(_jsonl_lines(data_bytes, path), start=1):
        if not line.strip(_JSON_WHITESPACE):
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit; nesting too deep
            raise DatasetError(f"{where}: not valid JSON ({type(exc).__name__}: {exc})") from None
        if not isinstance(data, dict):
            raise DatasetError(f"{where}: expected a JSON object, got {type(data).__name__}")
        try:
            case = parse_case(data)
        except ValidationError as exc:
            raise DatasetError(f"{where}: {_first_error(exc)}") from None
        if case.id in seen:
            raise DatasetError(f"{where}: id: {case.id!r} is already used on line {seen[case.id]}")
        seen[case.id] = number
        cases.append(case)
    if not cases:
        raise DatasetError(f"{path}: no cases")
    return Dataset(path.stem, tuple(cases))


def _jsonl_lines(data: bytes, path: Path) -> list[str]:
    """The lines of a JSONL file: UTF-8, split at line feeds alone (a carriage return before one dropped), as JSON
    Lines defines them. `str.splitlines` would also split at U+0085, U+2028 and U+2029, which a JSON string may hold
    unescaped, and text-mode reading at a lone carriage return (JSON whitespace): both shift later line numbers."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 (byte {data[exc.start]:#04x})") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no line
    return [line.removesuffix("\r") for line in lines]


def _first_error(exc: ValidationError) -> str:
    """`field.path: message` of the first error, without pydantic's union tags in the path."""
    error = exc.errors(include_input=False, include_url=False)[0]
    loc = error["loc"]
    parts = [str(p) for i, p in enumerate(loc) if not (i == 1 and loc[0] == "expected" and p in _TAGS)]
    if len(loc) > 3 and loc[0] == "messages" and isinstance(loc[1], int):
        del parts[2]  # the message union's tag (the message type): the path goes on inside that message
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{'.'.join(parts)}: {message}" if parts else message


def shipped_dataset_path(name: str) -> Path:
    """The file of a dataset shipped with ext-eval: `bfcl` (a subset of BFCL's, Apache-2.0) or `demo`."""
    if name not in _SHIPPED:
        raise ValueError(f"no shipped dataset {name!r}; shipped: {', '.join(_SHIPPED)}")
    return Path(str(resources.files("ext.eval") / "data" / _SHIPPED[name]))


def shipped_datasets() -> tuple[str, ...]:
    """The names of the datasets shipped with ext-eval."""
    return tuple(_SHIPPED)
