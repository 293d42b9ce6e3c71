"""Conformance suites: base test classes that every `ChatCompletionClient`, `EmbeddingClient`, `Workbench`,
`VectorStore`, `CacheStore`, `StateStore` and agent runtime implementation subclasses in its own tests. A new
provider is done when its subclass passes.

What the suites send and run lives beside them, for a provider's own tests too: `ext.testing.sample_inputs` (tools,
tool schemas, an image, texts to embed), `ext.testing.runtime_agents` (the runtime suite's messages and agent),
`ext.testing.runtime_observer` (a recording `RuntimeObserver`)."""

from ext.testing.conformance._anthropic import AnthropicMessagesConformance
from ext.testing.conformance._cache import CacheStoreConformance
from ext.testing.conformance._chat import FEATURES, ChatClientConformance
from ext.testing.conformance._chat_completions import ChatCompletionsConformance
from ext.testing.conformance._component import assert_dump_round_trip, plain_config
from ext.testing.conformance._embedding_client import EmbeddingClientConformance
from ext.testing.conformance._real_server import REAL_SERVER_FEATURES, RealServerConformance
from ext.testing.conformance._runtime import RuntimeConformance
from ext.testing.conformance._state import StateStoreConformance
from ext.testing.conformance._state_process import StateStoreProcess
from ext.testing.conformance._vectors import VectorStoreConformance
from ext.testing.conformance._workbench import WorkbenchConformance

__all__ = [
    # Model clients, and the features a subclass declares
    "FEATURES",
    "REAL_SERVER_FEATURES",
    "AnthropicMessagesConformance",
    "ChatClientConformance",
    "ChatCompletionsConformance",
    "EmbeddingClientConformance",
    "RealServerConformance",
    # Tools
    "WorkbenchConformance",
    # Stores
    "CacheStoreConformance",
    "StateStoreConformance",
    "StateStoreProcess",
    "VectorStoreConformance",
    # Agent runtimes
    "RuntimeConformance",
    # Components: the config dump/load round trip
    "assert_dump_round_trip",
    "plain_config",
]
