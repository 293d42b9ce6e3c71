"""A worker process of the cross-process trace tests: hosts `front` or `solver` with an
`OpenTelemetryRuntimeObserver` over the SDK's in-memory exporter, and dumps its finished spans as JSON at exit.

Usage: python trace_worker.py GATEWAY_ADDRESS front|solver MODEL_BASE_URL OUT_JSON
(prints "ready" once its agent type is registered; stops, dumps and exits when its stdin closes)
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from traced_agents import Front, solver_factory, span_record

from ext.runtime.grpc import GrpcAgentRuntime
from ext.telemetry.opentelemetry import OpenTelemetryRuntimeObserver


async def main(address: str, role: str, base_url: str) -> list[dict[str, Any]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = OpenTelemetryRuntimeObserver(tracer_provider=provider)
    async with GrpcAgentRuntime(address, token_env=None, connect_timeout=10, observer=observer) as runtime:
        if role == "front":
            await runtime.register_agent_factory("front", Front)
        else:
            await runtime.register_agent_factory("solver", solver_factory(base_url, provider))
        print("ready", flush=True)
        # The test closes stdin once its question is answered.
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    records = [span_record(s) for s in exporter.get_finished_spans()]
    provider.shutdown()
    return records


if __name__ == "__main__":
    Path(sys.argv[4]).write_text(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))))
