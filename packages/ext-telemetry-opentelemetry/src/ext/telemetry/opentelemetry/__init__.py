"""ext-telemetry-opentelemetry: OpenTelemetry spans and metrics for ext's chat pipeline, after the GenAI semantic
conventions (`ChatClientBuilder(client).use_tool_loop(tools).use(OpenTelemetryMiddleware())`)."""

from ext.telemetry.opentelemetry.__about__ import __version__
from ext.telemetry.opentelemetry._middleware import (
    CACHED,
    CANCELLED,
    INSTRUMENTATION_NAME,
    NO_RESULT,
    TOOL_ERROR,
    OpenTelemetryConfig,
    OpenTelemetryMiddleware,
)

__all__ = [
    "CACHED",
    "CANCELLED",
    "INSTRUMENTATION_NAME",
    "NO_RESULT",
    "TOOL_ERROR",
    "OpenTelemetryConfig",
    "OpenTelemetryMiddleware",
    "__version__",
]
