"""Path templates and query strings: argument values are data, never URL structure."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ext.core import ConfigurationError, ToolArgumentsError

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")


class PathTemplate:
    """A path such as `/users/{user_id}/posts`, split once into literal text and placeholder names."""

    __slots__ = ("names", "parts", "template")

    def __init__(self, template: str) -> None:
        self.template = template
        parts: list[str] = []  # even indexes: literal text; odd indexes: placeholder names
        position = 0
        for match in _PLACEHOLDER.finditer(template):
            name = match.group(1)
            if not _NAME.match(name):
                raise ConfigurationError(
                    f"path: placeholder {{{name}}} in {template!r} is not a valid argument name "
                    "(letters, digits, '_' or '-', not starting with a digit)"
                )
            parts.extend((template[position : match.start()], name))
            position = match.end()
        parts.append(template[position:])
        for literal in parts[::2]:
            if "{" in literal or "}" in literal:
                raise ConfigurationError(f"path: unbalanced '{{' or '}}' in {template!r}")
        self.parts = tuple(parts)
        self.names = frozenset(parts[1::2])

    def fill(self, values: Mapping[str, Any], tool: str) -> str:
        """The path with each placeholder replaced by its argument, percent-encoded so it stays one opaque
        piece of its segment: `/`, `?`, `#`, `%` and spaces are escaped, and a value of only dots is
        escaped too so that no client or server folds it as a `.`/`..` segment."""
        if not self.names:
            return self.template
        out: list[str] = []
        for index, part in enumerate(self.parts):
            if index % 2 == 0:
                out.append(part)
                continue
            if part not in values or values[part] is None:
                raise ToolArgumentsError(
                    f"invalid arguments for tool {tool!r}: argument {part!r} is required (it fills {{{part}}} "
                    "in the path)"
                )
            text = scalar_text(values[part])
            if not text:
                raise ToolArgumentsError(
                    f"invalid arguments for tool {tool!r}: argument {part!r} must not be empty (it fills "
                    f"{{{part}}} in the path)"
                )
            encoded = quote(text, safe="")
            if not encoded.strip("."):
                encoded = encoded.replace(".", "%2E")
            out.append(encoded)
        return "".join(out)


def scalar_text(value: Any) -> str:
    """An argument value as URL text: strings as they are, booleans as JSON `true`/`false`, numbers in
    Python's shortest form, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_query(values: Mapping[str, Any]) -> str:
    """A query string: `None` values are left out, lists repeat the key, everything is percent-encoded
    (spaces as `%20`), so no value can add a parameter or end the query."""
    pairs: list[str] = []
    for key, value in values.items():
        name = quote(key, safe="")
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            pairs.extend(f"{name}={quote(scalar_text(item), safe='')}" for item in value if item is not None)
        else:
            pairs.append(f"{name}={quote(scalar_text(value), safe='')}")
    return "&".join(pairs)
