"""Conformance suites: base test classes that every `ChatCompletionClient` and `Workbench`
implementation subclasses in its own tests. A new provider is done when its subclass passes."""

from ext.testing.conformance._chat import FEATURES, ChatClientConformance
from ext.testing.conformance._workbench import WorkbenchConformance

__all__ = ["FEATURES", "ChatClientConformance", "WorkbenchConformance"]
