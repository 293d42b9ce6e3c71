"""Instructions with template variables, filled per run.

`{name}` is replaced by the variable `name` (a letter or `_`, then letters, digits or `_`); `{{` and `}}` are
literal braces; any other brace is literal too, so JSON examples in instructions need no escaping. A value is
a string, or a function of no arguments called once per run (a date, a user's name from a request context).
Nothing else is evaluated: no attribute access or indexing as `str.format` would allow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Union

from ._errors import AgentError

__all__ = ["Variable", "check_variables", "render_instructions", "template_names"]

Variable = Union[str, Callable[[], str]]
"""A template value: text, or a function giving it per run."""

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_names(template: str) -> list[str]:
    """The variable names `template` uses, in order of first use."""
    seen: dict[str, None] = {}
    for match in _FIELD.finditer(template):
        if match.group(1):
            seen.setdefault(match.group(1), None)
    return list(seen)


def check_variables(variables: object, argument: str = "variables") -> dict[str, Variable]:
    """`variables` as a dict of names to strings or callables; a `TypeError` naming the bad entry otherwise."""
    if variables is None:
        return {}
    if not isinstance(variables, Mapping):
        raise TypeError(f"{argument} must be a mapping of names to str or callables, got {type(variables).__name__}")
    checked: dict[str, Variable] = {}
    for name, value in variables.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise TypeError(f"{argument}: a variable name must be an identifier, got {name!r}")
        if not isinstance(value, str) and not callable(value):
            raise TypeError(
                f"{argument}[{name!r}] must be a str or a function returning one, got {type(value).__name__}"
            )
        checked[name] = value
    return checked


def render_instructions(template: str, variables: Mapping[str, Variable]) -> str:
    """`template` with every `{name}` filled; an `AgentError` naming each missing variable."""
    missing = [name for name in template_names(template) if name not in variables]
    if missing:
        raise AgentError(
            f"instructions use variable(s) {', '.join(missing)} with no value: pass variables={{...}} to the agent "
            "or to the run"
        )
    values: dict[str, str] = {}

    def fill(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        if name not in values:
            value = variables[name]
            text = value() if callable(value) else value
            if not isinstance(text, str):
                raise AgentError(f"the instructions variable {name!r} gave {type(text).__name__}, expected str")
            values[name] = text
        return values[name]

    return _FIELD.sub(fill, template)
