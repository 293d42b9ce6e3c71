"""Resources and prompts a server offers beside its tools.

- `Resource`: one fixed URI; its content is text or bytes, given as a value or read by a coroutine function at each
  `resources/read` (so it can change).
- `ResourceTemplate`: an RFC 6570 level-1 template (`docs://{source}/text`); `resources/read` of a matching URI calls
  the reader with the variables. A variable matches one path segment.
- `Prompt`: a name, its arguments, and a function from the arguments to the messages (plain strings are user text).
- `memory_resources(memory)`: the documents of an ext-memory `VectorMemory`, read-only, as a template
  (`memory://search/{query}` gives the closest passages).
"""

from __future__ import annotations

import base64
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union
from urllib.parse import unquote

import mcp_types as types

from ext.core import ConfigurationError

__all__ = ["Prompt", "Resource", "ResourceTemplate", "memory_resources"]

Content = Union[str, bytes]
PromptPart = Union[str, types.PromptMessage]


@dataclass(frozen=True)
class Resource:
    """A resource at a fixed URI. `read` is the content (text or bytes) or a coroutine function returning it."""

    uri: str
    name: str
    read: Content | Callable[[], Awaitable[Content]]
    description: str | None = None
    mime_type: str | None = None

    def listing(self) -> types.Resource:
        return types.Resource(uri=self.uri, name=self.name, description=self.description, mime_type=self.mime_type)

    async def contents(self) -> Content:
        return self.read if isinstance(self.read, (str, bytes)) else await self.read()


_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class ResourceTemplate:
    """Resources under a URI template; `read(variables)` gives the content of one."""

    uri_template: str
    name: str
    read: Callable[[dict[str, str]], Awaitable[Content]]
    description: str | None = None
    mime_type: str | None = None
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _VARIABLE.search(self.uri_template):
            raise ConfigurationError(f"uri_template must hold at least one {{variable}}, got {self.uri_template!r}")
        parts = _VARIABLE.split(self.uri_template)
        regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(parts))
        object.__setattr__(self, "_pattern", re.compile(regex))

    def listing(self) -> types.ResourceTemplate:
        return types.ResourceTemplate(
            uri_template=self.uri_template, name=self.name, description=self.description, mime_type=self.mime_type
        )

    def match(self, uri: str) -> dict[str, str] | None:
        found = self._pattern.fullmatch(uri)
        return None if found is None else {k: unquote(v) for k, v in found.groupdict().items()}


@dataclass(frozen=True)
class Prompt:
    """A prompt template. `render(arguments)` (plain or async) returns the messages; a `str` is a user text message."""

    name: str
    render: Callable[[dict[str, str]], Sequence[PromptPart] | Awaitable[Sequence[PromptPart]]]
    description: str | None = None
    arguments: Sequence[types.PromptArgument] = ()

    def listing(self) -> types.Prompt:
        return types.Prompt(name=self.name, description=self.description, arguments=list(self.arguments) or None)

    async def messages(self, arguments: Mapping[str, str]) -> list[types.PromptMessage]:
        out = self.render(dict(arguments))
        parts = await out if inspect.isawaitable(out) else out
        return [
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=p))
            if isinstance(p, str)
            else p
            for p in parts
        ]


def resource_contents(uri: str, mime_type: str | None, content: Content) -> types.ReadResourceResult:
    """A `resources/read` answer: text as text, bytes as base64 blob."""
    if isinstance(content, str):
        item: types.TextResourceContents | types.BlobResourceContents = types.TextResourceContents(
            uri=uri, mime_type=mime_type or "text/plain", text=content
        )
    else:
        item = types.BlobResourceContents(
            uri=uri, mime_type=mime_type or "application/octet-stream", blob=base64.b64encode(content).decode("ascii")
        )
    return types.ReadResourceResult(contents=[item])


class _Memory(Protocol):
    async def query(self, text: str, *args: Any, **kwargs: Any) -> Any: ...


def memory_resources(memory: _Memory, *, top_k: int = 4, name: str = "memory") -> ResourceTemplate:
    """The passages of an ext-memory `VectorMemory` closest to a query, read-only: `memory://search/{query}`
    (URL-encoded) reads as the passages' texts, separated by blank lines."""

    async def read(variables: dict[str, str]) -> Content:
        hits = await memory.query(variables["query"], top_k=top_k)
        return "\n\n".join(str(getattr(h, "text", h)) for h in hits)

    return ResourceTemplate(
        uri_template="memory://search/{query}",
        name=name,
        read=read,
        description="The stored passages closest to the query (read-only).",
        mime_type="text/plain",
    )
