"""Conformance suites: base test classes that every `ChatCompletionClient`, `Workbench`, `VectorStore` and
agent runtime implementation subclasses in its own tests. A new provider is done when its subclass passes."""

from ext.testing.conformance._anthropic import AnthropicMessagesConformance
from ext.testing.conformance._cache import CacheStoreConformance
from ext.testing.conformance._chat import (
    ADD,
    FEATURES,
    GET_WEATHER,
    LOCAL_TIME,
    MULTIPLY,
    PNG_1PX,
    ChatClientConformance,
)
from ext.testing.conformance._chat_completions import ChatCompletionsConformance
from ext.testing.conformance._component import assert_dump_round_trip, plain_config
from ext.testing.conformance._embeddings import TEXTS, EmbeddingClientConformance
from ext.testing.conformance._real_server import REAL_SERVER_FEATURES, RealServerConformance
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
    RecordedSpan,
    RecordingObserver,
    Relay,
    RuntimeConformance,
    Slow,
    Spoil,
    Unhandled,
)
from ext.testing.conformance._state import StateStoreConformance
from ext.testing.conformance._state_process import StateStoreProcess
from ext.testing.conformance._vectors import VectorStoreConformance
from ext.testing.conformance._workbench import WorkbenchConformance

__all__ = [
    "ADD",
    "FEATURES",
    "GET_WEATHER",
    "LOCAL_TIME",
    "MULTIPLY",
    "PNG_1PX",
    "REAL_SERVER_FEATURES",
    "MESSAGE_TYPES",
    "AnthropicMessagesConformance",
    "CacheStoreConformance",
    "ChatClientConformance",
    "ChatCompletionsConformance",
    "EmbeddingClientConformance",
    "TEXTS",
    "EchoAgent",
    "Fail",
    "GetNotes",
    "Journal",
    "Note",
    "Notes",
    "Ping",
    "Pong",
    "RealServerConformance",
    "RecordedSpan",
    "RecordingObserver",
    "Relay",
    "RuntimeConformance",
    "Slow",
    "Spoil",
    "Unhandled",
    "VectorStoreConformance",
    "WorkbenchConformance",
    "StateStoreConformance",
    "StateStoreProcess",
    "assert_dump_round_trip",
    "plain_config",
]
