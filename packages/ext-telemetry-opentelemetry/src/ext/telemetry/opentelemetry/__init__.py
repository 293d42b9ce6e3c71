"""ext-telemetry-opentelemetry: OpenTelemetry spans and metrics for ext's chat pipeline, after the GenAI semantic
conventions (`ChatClientBuilder(client).use_tool_loop(tools).use(OpenTelemetryMiddleware())`), and spans for an
agent runtime's messages (`LocalAgentRuntime(observer=OpenTelemetryRuntimeObserver())`)."""

from ext.telemetry.opentelemetry.__about__ import __version__
from ext.telemetry.opentelemetry._middleware import (
    CACHED,
    CANCELLED,
    FALLBACK,
    INSTRUMENTATION_NAME,
    NO_RESULT,
    TOOL_ERROR,
    OpenTelemetryConfig,
    OpenTelemetryMiddleware,
)
from ext.telemetry.opentelemetry._runtime_observer import MESSAGING_SYSTEM, OpenTelemetryRuntimeObserver

__all__ = [
    # application code
    "OpenTelemetryConfig",
    "OpenTelemetryMiddleware",
    "OpenTelemetryRuntimeObserver",
    # attribute values and names (dashboards, tests)
    "CACHED",
    "FALLBACK",
    "CANCELLED",
    "INSTRUMENTATION_NAME",
    "MESSAGING_SYSTEM",
    "NO_RESULT",
    "TOOL_ERROR",
    "__version__",
]
