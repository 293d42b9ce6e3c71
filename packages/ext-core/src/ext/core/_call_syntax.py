"""Python-like tool calls written as text: ``get_weather(city="Paris", unit="c")`` or ``[f(a=1), g("x")]``.

Read by a small tokenizer and recursive-descent reader of its own, never by `ast` or `eval`: the text is model
output, and `ast.parse` raises `RecursionError` or `MemoryError` on some short inputs (``f(a.a.a...)``,
``f(-----...1)``). Arguments are literals only: strings (``'...'``, ``"..."``, triple-quoted, ``r`` and ``u``
prefixes, adjacent ones joined), finite numbers, ``True`` / ``False`` / ``None`` and their JSON spellings, lists,
tuples (read as lists) and dicts with string keys, nested at most `MAX_DEPTH` levels in all. The work is linear in
the text, and reading stops after `MAX_CALL_TOKENS` tokens in one answer (a longer answer written this way stays
text), shared by all the calls of the answer (`TokenBudget`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_CALLS", "MAX_CALL_TOKENS", "MAX_DEPTH", "TokenBudget", "python_calls"]

MAX_DEPTH = 32
"""The deepest nesting of brackets (lists, objects, calls) read in an answer; a deeper one is text."""

MAX_CALLS = 128
"""The most calls one answer may hold; one with more is text (each call is Python work, and no model makes more)."""

MAX_CALL_TOKENS = 2048
"""The most tokens (names, literals, punctuation) read in an answer's Python-like calls; a longer one is text.
The reader is linear but Python code, about a microsecond a token: this keeps one read to a few milliseconds. A
long string is one token. JSON, decoded in native code, has no such cap."""

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<string>[rRuU]?(?:
        '''(?:[^'\\]|\\.|'(?!''))*'''
        |\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"
        |'(?:[^'\\\n]|\\.)*'
        |"(?:[^"\\\n]|\\.)*"))
    |(?P<number>[-+]?(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?)
    |(?P<name>[A-Za-z_][A-Za-z0-9_-]*)
    |(?P<punct>[()\[\]{},:=.])
    )""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|[0-7]{1,3}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {
    "\n": "",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}
_WORDS: dict[str, Any] = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMESPACE = "functions"  # `functions.get_weather(...)`: the namespace OpenAI's tool prompts put tools in


class TokenBudget:
    """What is left of `MAX_CALL_TOKENS` for one answer (its ``<tool_call>`` blocks share it)."""

    __slots__ = ("left",)

    def __init__(self, tokens: int = MAX_CALL_TOKENS) -> None:
        self.left = tokens


class _NotACall(Exception):
    """Raised inside the reader where the text stops being a call; caught by `python_calls`."""


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    head = code[0]
    if head in "xuUN" and len(code) > 1:
        if head == "N":
            try:
                return unicodedata.lookup(code[2:-1])
            except KeyError:
                raise _NotACall from None
        point = int(code[1:], 16)
    elif head in "01234567":
        point = int(code, 8)
    elif head in "xuUN":
        raise _NotACall  # a truncated \x, \u, \U or \N escape: a SyntaxError in Python
    else:
        return _SIMPLE_ESCAPES.get(head, match.group(0))  # an unknown escape stays as written, as in Python
    if point > 0x10FFFF or 0xD800 <= point <= 0xDFFF:
        raise _NotACall  # not a code point a JSON string can carry
    return chr(point)


def _string(token: str) -> str:
    raw = token[0] in "rR"
    if token[0] in "rRuU":
        token = token[1:]
    quotes = 3 if token[:3] in ("'''", '"""') and len(token) >= 6 else 1
    body = token[quotes:-quotes]
    if _SURROGATE.search(body):
        raise _NotACall  # a lone surrogate: not text a JSON string (or UTF-8) can carry
    return body if raw else _ESCAPE.sub(_unescape, body)


def _number(token: str) -> int | float:
    try:
        if any(c in token for c in ".eE"):
            value = float(token)
            if not math.isfinite(value):
                raise _NotACall  # 1e999: no JSON number holds it
            return value
        return int(token)  # ValueError past 4300 digits (Python's limit): text
    except ValueError:
        raise _NotACall from None


class _Reader:
    """The tokens of one answer, read front to back on demand (prose fails at its second word), with one token of
    lookahead, at most `MAX_CALL_TOKENS` of them."""

    def __init__(self, text: str, budget: TokenBudget) -> None:
        self.text = text
        self.position = 0
        self.budget = budget
        self.ahead: list[tuple[str, str]] = []

    def _next(self) -> tuple[str, str]:
        if self.position >= len(self.text):
            return ("end", "")
        match = _TOKEN.match(self.text, self.position)
        self.budget.left -= 1
        if match is None or self.budget.left < 0:
            raise _NotACall
        kind = match.lastgroup
        assert kind is not None
        self.position = match.end()
        return kind, match.group(kind)

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        while len(self.ahead) <= ahead:
            self.ahead.append(self._next())
        return self.ahead[ahead]

    def take(self) -> tuple[str, str]:
        token = self.peek()
        del self.ahead[0]
        return token

    def expect(self, punct: str) -> None:
        if self.take() != ("punct", punct):
            raise _NotACall

    def at(self, punct: str) -> bool:
        return self.peek() == ("punct", punct)

    def items(self, close: str, depth: int) -> tuple[list[Any], bool]:
        """Values separated by commas up to `close` (the opening bracket taken); True when a comma was seen."""
        values: list[Any] = []
        comma = False
        while not self.at(close):
            values.append(self.value(depth))
            if not self.at(","):
                break
            self.take()
            comma = True
        self.expect(close)
        return values, comma

    def value(self, depth: int) -> Any:
        kind, text = self.take()
        if kind == "string":
            parts = [_string(text)]
            while self.peek()[0] == "string":  # "a" "b": Python joins adjacent strings
                parts.append(_string(self.take()[1]))
            return "".join(parts)
        if kind == "number":
            return _number(text)
        if kind == "name" and text in _WORDS:
            return _WORDS[text]
        if kind != "punct" or text not in "([{" or depth >= MAX_DEPTH:
            raise _NotACall
        if text == "[":
            return self.items("]", depth + 1)[0]
        if text == "(":
            values, comma = self.items(")", depth + 1)
            return values[0] if len(values) == 1 and not comma else values  # (x) is x; (x,) a tuple
        entries: dict[str, Any] = {}
        while not self.at("}"):
            key_kind, key = self.take()
            if key_kind != "string":
                raise _NotACall  # a set, or a key JSON cannot hold
            self.expect(":")
            entries[_string(key)] = self.value(depth + 1)
            if not self.at(","):
                break
            self.take()
        self.expect("}")
        return entries

    def call(self, tools: Mapping[str, Sequence[str]], depth: int) -> tuple[str, dict[str, Any]]:
        parts = [self.name()]
        while self.at("."):
            self.take()
            parts.append(self.name())
        # Only the bare name, or OpenAI's `functions.` namespace: `evil.module.delete_file` is not `delete_file`.
        if len(parts) == 2 and parts[0] == _NAMESPACE:
            parts = parts[1:]
        if len(parts) != 1 or parts[0] not in tools or depth >= MAX_DEPTH:
            raise _NotACall
        name = parts[0]
        order = tools[name]
        self.expect("(")
        arguments: dict[str, Any] = {}
        positional = 0
        while not self.at(")"):
            if self.peek()[0] == "name" and self.peek(1) == ("punct", "="):
                key = self.take()[1]
                self.take()
                if key in arguments:
                    raise _NotACall  # given twice: a TypeError in Python
                arguments[key] = self.value(depth + 1)
            else:
                # Positional arguments follow the order of the schema's properties, and come before keywords.
                if positional >= len(order) or len(arguments) > positional:
                    raise _NotACall
                arguments[order[positional]] = self.value(depth + 1)
                positional += 1
            if not self.at(","):
                break
            self.take()
        self.expect(")")
        return name, arguments

    def name(self) -> str:
        kind, text = self.take()
        if kind != "name":
            raise _NotACall
        return text


def python_calls(
    text: str, tools: Mapping[str, Sequence[str]], budget: TokenBudget | None = None
) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls `text` is, written like Python (a call, or a list of calls), or None when it is not exactly that.

    `tools` maps each tool that may be called to its parameters' names in order (for positional arguments);
    `budget`: the tokens left for the answer `text` belongs to (None: a whole `MAX_CALL_TOKENS`)."""
    text = text.strip()
    if not text:
        return None
    try:
        reader = _Reader(text, budget or TokenBudget())
        if reader.at("["):
            reader.take()
            calls: list[tuple[str, dict[str, Any]]] = []
            while not reader.at("]"):
                if len(calls) == MAX_CALLS:
                    return None
                calls.append(reader.call(tools, 1))
                if not reader.at(","):
                    break
                reader.take()
            reader.expect("]")
        else:
            calls = [reader.call(tools, 0)]
        if reader.peek()[0] != "end" or not calls:
            return None
    except _NotACall:
        return None
    return calls
