"""Conformance suites: base test classes that every `ChatCompletionClient`, `Workbench` and agent
runtime implementation subclasses in its own tests. A new provider is done when its subclass passes."""

from ext.testing.conformance._chat import ADD, FEATURES, MULTIPLY, ChatClientConformance
from ext.testing.conformance._runtime import (
    MESSAGE_TYPES,
    EchoAgent,
    Fail,
    GetNotes,
    Journal,
    Note,
    Notes,
    Ping,
    Pong,
    Relay,
    RuntimeConformance,
    Slow,
    Unhandled,
)
from ext.testing.conformance._workbench import WorkbenchConformance

__all__ = [
    "ADD",
    "FEATURES",
    "MESSAGE_TYPES",
    "MULTIPLY",
    "ChatClientConformance",
    "EchoAgent",
    "Fail",
    "GetNotes",
    "Journal",
    "Note",
    "Notes",
    "Ping",
    "Pong",
    "Relay",
    "RuntimeConformance",
    "Slow",
    "Unhandled",
    "WorkbenchConformance",
]
