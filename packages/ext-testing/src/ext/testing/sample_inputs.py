"""Sample inputs the conformance suites send, for a provider's own tests too: two tools with their functions (`ADD`,
`MULTIPLY`), two tool schemas of the same shape (`GET_WEATHER`, `LOCAL_TIME`), a one-pixel PNG (`PNG_1PX`) and seven
texts to embed (`TEXTS`)."""

from __future__ import annotations

from ext.core import FunctionTool, ToolSchema

__all__ = [
    # Tools
    "ADD",
    "GET_WEATHER",
    "LOCAL_TIME",
    "MULTIPLY",
    # An image and texts
    "PNG_1PX",
    "TEXTS",
]

PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f0005000201"
    "8f2b3f5a0000000049454e44ae426082"
)
"""A valid 1x1 PNG: the smallest image a vision request can carry."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


ADD = FunctionTool(add)
MULTIPLY = FunctionTool(multiply)

GET_WEATHER: ToolSchema = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
"""A tool schema with one required string argument (tool-calling tests: what is sent, what comes back)."""
LOCAL_TIME: ToolSchema = {
    "name": "local_time",
    "description": "The local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
"""A second tool of the same shape as `GET_WEATHER`, so a choice between tools can be seen."""

TEXTS = [
    "The cat sat on the mat.",
    "Stock markets fell sharply on Monday.",
    "A kitten was sleeping on the rug.",
    "The central bank raised interest rates.",
    "Photosynthesis turns light into chemical energy.",
    "Il pleut à Paris depuis ce matin.",
    "東京は日本の首都です。",
]
"""Seven distinct texts (more than two batches of three), some not ASCII."""
