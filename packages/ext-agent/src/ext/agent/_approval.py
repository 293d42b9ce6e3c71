"""Which tool calls need a human's approval before they run.

`require_approval` takes tool names (every call of those tools is held), or a mapping of tool names to True or
to a predicate on the call's parsed arguments (`lambda args: args["amount"] > 100`). The arguments are read
with core's bounded parser; arguments that cannot be read, and a predicate that raises, hold the call (the
safe side: a person decides).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

from ext.core import FunctionCall, ToolArgumentsError, parse_tool_arguments

__all__ = ["ApprovalPolicy", "ApprovalPredicate", "RequireApproval"]

logger = logging.getLogger(__name__)

ApprovalPredicate = Callable[[dict[str, Any]], bool]
"""Decides from a call's arguments whether it needs approval."""

RequireApproval = Union[Iterable[str], Mapping[str, Union[bool, ApprovalPredicate]]]
"""What `ChatAgent(require_approval=...)` takes."""


class ApprovalPolicy:
    """`require_approval` checked once; `needs(call)` per call."""

    __slots__ = ("_rules",)

    def __init__(self, require_approval: RequireApproval | None) -> None:
        rules: dict[str, bool | ApprovalPredicate] = {}
        if require_approval is None:
            pass
        elif isinstance(require_approval, Mapping):
            for name, rule in require_approval.items():
                if not isinstance(name, str):
                    raise TypeError(f"require_approval: keys must be tool names, got {name!r}")
                if not isinstance(rule, bool) and not callable(rule):
                    raise TypeError(
                        f"require_approval[{name!r}] must be True, False or a predicate on the arguments, "
                        f"got {type(rule).__name__}"
                    )
                rules[name] = rule
        elif isinstance(require_approval, (str, bytes)) or not isinstance(require_approval, Iterable):
            raise TypeError(
                "require_approval must be a list of tool names or a mapping of names to True or a predicate, "
                f"got {type(require_approval).__name__}"
            )
        else:
            for name in require_approval:
                if not isinstance(name, str):
                    raise TypeError(f"require_approval: tool names must be str, got {name!r}")
                rules[name] = True
        self._rules = rules

    def __bool__(self) -> bool:
        return any(rule is not False for rule in self._rules.values())

    @property
    def tool_names(self) -> list[str]:
        return sorted(self._rules)

    def needs(self, call: FunctionCall) -> bool:
        rule = self._rules.get(call.name, False)
        if isinstance(rule, bool):
            return rule
        try:
            arguments = parse_tool_arguments(call.arguments, tool=call.name)
        except ToolArgumentsError:
            return True
        try:
            return bool(rule(arguments))
        except Exception:
            logger.warning("approval predicate for %s raised; the call is held", call.name, exc_info=True)
            return True
