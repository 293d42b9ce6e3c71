"""The gateway as a process: CLI, token auth, TLS, message size limit, graceful shutdown, reconnect after a
restart, a worker that dies mid-RPC, and replicas sharing Redis losing a dead gateway's workers."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ext_runtime_grpc_support import eventually, read_line, worker

from ext.core import AgentId, AgentNotFoundError, UndeliverableError
from ext.runtime.grpc import AuthenticationError, GrpcAgentRuntime
from ext.runtime.grpc.testing import GatewayProcess, start_gateway_process
from ext.testing.redis import RedisServer
from ext.testing.runtime_agents import EchoAgent, Journal, Ping, Pong, Slow

HERE = Path(__file__).parent


async def host_echo(runtime: GrpcAgentRuntime, agent_type: str = "echo") -> Journal:
    journal = Journal()
    await runtime.register_agent_factory(agent_type, lambda aid, rt: EchoAgent(aid, rt, journal))
    return journal


@pytest.fixture
def gateway() -> Iterator[GatewayProcess]:
    process = start_gateway_process()
    try:
        yield process
    finally:
        process.kill()


async def test_cli_gateway_serves_two_workers(gateway: GatewayProcess) -> None:
    async with worker(gateway.address) as host, worker(gateway.address) as caller:
        await host_echo(host)
        reply = await asyncio.wait_for(caller.send_and_await_response(Ping(text="hi"), AgentId("echo", "a")), 10)
        assert isinstance(reply, Pong) and reply.agent == "echo/a"
        assert await caller.list_agents() == [AgentId("echo", "a")]
        assert host.worker_id != caller.worker_id


async def test_several_workers_host_one_type_with_consistent_placement(gateway: GatewayProcess) -> None:
    async with worker(gateway.address) as w1, worker(gateway.address) as w2, worker(gateway.address) as caller:
        j1, j2 = await host_echo(w1), await host_echo(w2)
        keys = [f"k{i}" for i in range(24)]
        for _ in range(2):
            for key in keys:
                await asyncio.wait_for(caller.send_and_await_response(Ping(text=key), AgentId("echo", key)), 10)
        placed1 = {a.key for a in j1.created}
        placed2 = {a.key for a in j2.created}
        # Each agent was created exactly once, on one worker, and both workers got some.
        assert placed1 | placed2 == set(keys)
        assert not placed1 & placed2
        assert placed1 and placed2
        assert {a.key for a in await w1.local_agents()} == placed1


async def test_token_authentication() -> None:
    process = start_gateway_process(env={"EXT_GRPC_GATEWAY_TOKEN": "s3cret-token"})
    try:
        with pytest.raises(AuthenticationError, match="rejected") as info:
            await worker(process.address).start()
        assert "s3cret" not in str(info.value)
        with pytest.raises(AuthenticationError):
            await worker(process.address, token="wrong").start()
        async with worker(process.address, token="s3cret-token") as good:
            await host_echo(good)
            reply = await asyncio.wait_for(good.send_and_await_response(Ping(text="ok"), AgentId("echo", "t")), 10)
            assert reply.text == "ok"
            assert "s3cret" not in repr(good)
    finally:
        process.kill()


async def test_token_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    process = start_gateway_process(env={"EXT_GRPC_GATEWAY_TOKEN": "from-env"})
    try:
        monkeypatch.setenv("EXT_GRPC_TOKEN", "from-env")
        runtime = GrpcAgentRuntime(process.address, connect_timeout=5)
        async with runtime:
            assert runtime.connected
    finally:
        process.kill()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    result = subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"openssl cannot make a test certificate (apt-get install -y openssl): {result.stderr.decode()[-300:]}"
        )
    return cert, key


async def test_tls(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    process = start_gateway_process("--tls-cert", str(cert), "--tls-key", str(key))
    try:
        async with worker(process.address, root_certificates=cert.read_bytes()) as secure:
            await host_echo(secure)
            reply = await asyncio.wait_for(secure.send_and_await_response(Ping(text="tls"), AgentId("echo", "s")), 10)
            assert reply.text == "tls"
        # A plaintext worker cannot talk to a TLS gateway, and says so promptly.
        with pytest.raises(UndeliverableError, match="gateway"):
            await asyncio.wait_for(worker(process.address, connect_timeout=2).start(), 15)
    finally:
        process.kill()


async def test_message_size_limit() -> None:
    process = start_gateway_process("--max-message-bytes", "65536")
    try:
        async with worker(process.address, max_message_bytes=65536) as runtime:
            await host_echo(runtime)
            with pytest.raises(ValueError, match="max_message_bytes=65536"):
                await runtime.send_and_await_response(Ping(text="x" * 70_000), AgentId("echo", "big"))
            # The stream survived: a message under the limit still goes through.
            reply = await asyncio.wait_for(
                runtime.send_and_await_response(Ping(text="small"), AgentId("echo", "b")), 10
            )
            assert reply.text == "small"
        # A worker allowing more than the gateway does: the gateway refuses the oversized message, the worker
        # sees its stream fail and its RPC answered with an error instead of hanging.
        async with worker(process.address, max_message_bytes=1 << 20, reconnect_backoff=0.05) as loose:
            await host_echo(loose)
            with pytest.raises(UndeliverableError):
                await asyncio.wait_for(
                    loose.send_and_await_response(Ping(text="y" * 100_000), AgentId("echo", "c")), 10
                )
    finally:
        process.kill()


async def test_graceful_shutdown_on_sigterm() -> None:
    process = start_gateway_process("--shutdown-grace", "5")
    runtime = worker(process.address, reconnect_backoff=5)
    try:
        await runtime.start()
        journal = await host_echo(runtime)
        call = asyncio.ensure_future(runtime.send_and_await_response(Slow(seconds=0.5), AgentId("echo", "slow")))
        await asyncio.wait_for(journal.slow_started.wait(), 10)
        process.process.send_signal(signal.SIGTERM)
        reply = await asyncio.wait_for(call, 10)  # the in-flight RPC finished during the grace period
        assert reply.text == "slow"
        assert await asyncio.to_thread(process.process.wait, 15) == 0
    finally:
        await runtime.stop()
        process.kill()


def _gateway_command() -> str:
    """The `ext-grpc-gateway` console script installed beside this interpreter (or on PATH)."""
    beside = Path(sys.executable).with_name("ext-grpc-gateway")
    found = str(beside) if beside.exists() else shutil.which("ext-grpc-gateway")
    if found is None:
        pytest.fail("the ext-grpc-gateway command is not installed: install ext-runtime-grpc (pip install -e ...)")
    return found


async def test_sigterm_with_a_worker_connected_logs_no_error() -> None:
    """The drain is graceful: exit code 0 and nothing logged at ERROR, no traceback. It used to race (grpc logged
    "Exception not handled by _handle_exceptions" with CancelledError tracebacks in about half the runs), so
    it runs several times."""
    command = _gateway_command()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXT_GRPC")}
    for attempt in range(10):
        process = await asyncio.create_subprocess_exec(
            *(command, "--port", "0", "--log-level", "INFO", "--shutdown-grace", "1"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        assert process.stdout is not None and process.stderr is not None
        errors = asyncio.ensure_future(process.stderr.read())
        try:
            port = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().strip()
            assert port.isdigit(), f"the gateway printed {port!r}, not its port"
            runtime = worker(f"127.0.0.1:{port}", reconnect_backoff=30)
            try:
                await runtime.start()
                await host_echo(runtime)
                process.send_signal(signal.SIGTERM)
                code = await asyncio.wait_for(process.wait(), 20)
            finally:
                await runtime.stop()
            stderr = (await asyncio.wait_for(errors, 10)).decode()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert code == 0, f"run {attempt}: exit code {code}\n{stderr}"
        assert "gateway" in stderr and "stopped" in stderr, f"run {attempt}: no shutdown logged\n{stderr}"
        assert " ERROR " not in stderr and "Traceback" not in stderr, f"run {attempt}:\n{stderr}"


async def test_reconnect_and_re_register_after_gateway_restart() -> None:
    first = start_gateway_process()
    port = first.port
    runtime = worker(first.address, reconnect_backoff=0.05, reconnect_max_backoff=0.2)
    caller = worker(first.address, reconnect_backoff=0.05, reconnect_max_backoff=0.2)
    second: GatewayProcess | None = None
    try:
        await runtime.start()
        await caller.start()
        await host_echo(runtime)
        assert (await caller.send_and_await_response(Ping(text="1"), AgentId("echo", "r"))).text == "1"
        first.kill()
        await eventually(lambda: _false_when_disconnected(caller))
        with pytest.raises(UndeliverableError, match="not connected"):
            await caller.send_and_await_response(Ping(text="down"), AgentId("echo", "r"))
        second = start_gateway_process(port=port)
        await eventually(lambda: _connected(runtime, caller), timeout=20)

        async def answered() -> bool:
            try:
                reply = await caller.send_and_await_response(Ping(text="2"), AgentId("echo", "r"), 5)
            except AgentNotFoundError:
                return False  # the host has reconnected but not yet re-registered
            return bool(reply.text == "2")

        await eventually(answered, timeout=20)
    finally:
        await runtime.stop()
        await caller.stop()
        first.kill()
        if second is not None:
            second.kill()


async def _false_when_disconnected(runtime: GrpcAgentRuntime) -> bool:
    return not runtime.connected


async def _connected(*runtimes: GrpcAgentRuntime) -> bool:
    return all(r.connected for r in runtimes)


@pytest.fixture
def far_worker(gateway: GatewayProcess) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "worker_process.py"), gateway.address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = read_line(process, 30)
        if line != "ready":
            process.kill()
            raise RuntimeError(f"worker process did not start: {line!r} {process.communicate(timeout=10)[1][-2000:]}")
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


async def test_dead_worker_answers_the_caller_at_once(
    gateway: GatewayProcess, far_worker: subprocess.Popen[str]
) -> None:
    async with worker(gateway.address) as caller:
        assert (await caller.send_and_await_response(Ping(text="up"), AgentId("far", "x"), 10)).text == "up"
        call = asyncio.ensure_future(caller.send_and_await_response(Slow(seconds=30), AgentId("far", "x"), 30))
        assert await asyncio.to_thread(read_line, far_worker, 10) == "slow started"
        started = time.monotonic()
        far_worker.kill()
        with pytest.raises(UndeliverableError, match="far/x"):
            await asyncio.wait_for(call, 10)
        assert time.monotonic() - started < 5
        # Its type is gone with it: a new message fails at once instead of waiting for a deadline.
        with pytest.raises(AgentNotFoundError, match="far"):
            await asyncio.wait_for(caller.send_and_await_response(Ping(text="?"), AgentId("far", "x"), 10), 5)


async def test_replicas_share_the_registry_and_a_dead_gateway_loses_only_its_workers(
    redis_server: RedisServer,
) -> None:
    args = ("--redis-url", redis_server.url, "--redis-prefix", "replica-test", "--lease-seconds", "1")
    a = start_gateway_process(*args)
    b = start_gateway_process(*args)
    try:
        async with worker(a.address) as on_a, worker(b.address) as on_b:
            journal_a = await host_echo(on_a, "svc")
            journal_b = await host_echo(on_b, "svc")
            await host_echo(on_b, "only-b")
            # A message from a worker on gateway A reaches an agent hosted behind gateway B, and back.
            reply = await asyncio.wait_for(on_a.send_and_await_response(Ping(text="ab"), AgentId("only-b", "z")), 10)
            assert reply.agent == "only-b/z"
            keys = [f"k{i}" for i in range(16)]
            for key in keys:
                await asyncio.wait_for(on_a.send_and_await_response(Ping(text=key), AgentId("svc", key)), 10)
            on_a_keys = {x.key for x in journal_a.created}
            on_b_keys = {x.key for x in journal_b.created}
            assert on_a_keys | on_b_keys == set(keys) and on_a_keys and on_b_keys
            listed = await on_a.list_agents()
            assert AgentId("only-b", "z") in listed and len(listed) == 17

            b.kill()  # no goodbye: only its lease running out tells the others

            async def b_forgotten() -> bool:
                agents = await on_a.list_agents()
                return {x.key for x in agents if x.type == "svc"} == on_a_keys and AgentId("only-b", "z") not in agents

            await eventually(b_forgotten, timeout=10)
            with pytest.raises(AgentNotFoundError):
                await asyncio.wait_for(on_a.send_and_await_response(Ping(text="?"), AgentId("only-b", "z")), 5)
            # A's own registrations survive: B's agents are placed on A now.
            for key in sorted(on_b_keys):
                reply = await asyncio.wait_for(on_a.send_and_await_response(Ping(text=key), AgentId("svc", key)), 10)
                assert reply.count == 1
            assert {x.key for x in journal_a.created} == set(keys)
    finally:
        a.kill()
        b.kill()
