"""Exceptions raised by ext itself (provider SDK errors propagate unchanged)."""

from __future__ import annotations


class ExtError(Exception):
    """Base class of every exception ext raises on its own behalf."""


class ConfigurationError(ExtError, ValueError):
    """A constructor argument, option or config value is invalid. The message names the field."""


class UnsupportedOptionError(ConfigurationError):
    """A per-call option that the provider or model cannot honour."""


class ComponentError(ExtError, ValueError):
    """A component config cannot be dumped or loaded."""


class ToolArgumentsError(ExtError, ValueError):
    """Tool-call arguments are not valid JSON or do not match the tool's schema."""


class OutputParseError(ExtError, ValueError):
    """The model's output is not the JSON or structured output that was asked for.

    `text` holds the raw output so a caller can log or repair it.
    """

    def __init__(self, message: str, *, text: str) -> None:
        super().__init__(message)
        self.text = text


class ClientClosedError(ExtError, RuntimeError):
    """The client (or workbench) was closed and cannot be used again."""
