"""OpenTelemetryRuntimeObserver across real processes: a gateway process (or two replicas sharing a real
redis-server, so that each message is forwarded between them) and two worker processes, each exporting its spans
with the SDK's in-memory exporter and dumping them as JSON at exit. The question's spans from the three processes
form one trace with the same parent chain as in one process."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from traced_agents import check_question_trace, script_solver_turns, span_record

from ext.core import AgentId
from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.grpc.testing import GatewayProcess, start_gateway_process
from ext.telemetry.opentelemetry import OpenTelemetryRuntimeObserver
from ext.testing.redis import REDIS_BINARY, RedisServer, start_redis_server
from ext.testing.servers import OpenAIServer

WORKER = Path(__file__).with_name("trace_worker.py")


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    if REDIS_BINARY is None:
        pytest.fail("redis-server is not installed: apt-get install -y redis-server; this test needs a real Redis")
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()


class WorkerProcess:
    def __init__(self, process: asyncio.subprocess.Process, out: Path) -> None:
        self.process = process
        self.out = out

    async def spans(self) -> list[dict[str, object]]:
        """Close its stdin (it stops and dumps its spans) and read what it dumped."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        _, err = await asyncio.wait_for(self.process.communicate(), 30)
        assert self.process.returncode == 0, err.decode()[-2000:]
        records: list[dict[str, object]] = json.loads(self.out.read_text())
        return records


async def start_worker(address: str, role: str, base_url: str, out: Path) -> WorkerProcess:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        address,
        role,
        base_url,
        str(out),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
    except asyncio.TimeoutError:
        line = b""
    if line.strip() != b"ready":
        process.kill()
        _, err = await process.communicate()
        raise RuntimeError(f"the {role} worker did not start: {line!r} {err.decode()[-2000:]}")
    return WorkerProcess(process, out)


@pytest.mark.parametrize("replicas", [1, 2], ids=["one-gateway", "forwarded-between-replicas"])
async def test_one_trace_across_gateway_and_worker_processes(
    replicas: int, model_server: OpenAIServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    gateways: list[GatewayProcess] = []
    workers: list[WorkerProcess] = []
    try:
        if replicas == 1:
            gateways.append(start_gateway_process())
        else:
            redis: RedisServer = request.getfixturevalue("redis_server")
            prefix = f"trace-{uuid.uuid4().hex[:8]}"
            for _ in range(replicas):
                gateways.append(start_gateway_process("--redis-url", redis.url, "--redis-prefix", prefix))
        # With two replicas the caller and `solver` are on one, `front` on the other: the question, the inner RPC
        # and both answers each cross from one gateway to the other.
        caller_at, front_at = gateways[0].address, gateways[-1].address
        script_solver_turns(model_server)
        base_url = model_server.base_url + "/v1"
        workers.append(await start_worker(front_at, "front", base_url, tmp_path / "front.json"))
        workers.append(await start_worker(caller_at, "solver", base_url, tmp_path / "solver.json"))

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        observer = OpenTelemetryRuntimeObserver(tracer_provider=provider)
        async with GrpcAgentRuntime(caller_at, token_env=None, observer=observer) as caller:
            answer = await caller.send_and_await_response("what is 2+3?", AgentId("front", "1"), timeout=30)
        assert answer == "front: 5"
        spans = [span_record(s) for s in exporter.get_finished_spans()]
        front_spans, solver_spans = [await w.spans() for w in workers]
        workers.clear()
    finally:
        for worker in workers:
            worker.process.kill()
            await worker.process.wait()
        for gateway in gateways:
            gateway.kill()
    assert [s["name"] for s in spans] == ["send front"]
    assert sorted(str(s["name"]) for s in front_spans) == ["process front", "send solver"]
    assert len(solver_spans) == 5  # process solver, the tool loop, two model calls, the tool call
    check_question_trace(spans + front_spans + solver_spans)
