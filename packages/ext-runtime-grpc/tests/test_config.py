"""Bad configuration fails at construction with an error naming the argument; nothing is sent."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from pydantic import SecretStr

from ext.core import AgentId
from ext.runtime.grpc import (
    AuthenticationError,
    ConnectionOptions,
    Gateway,
    GrpcAgentRuntime,
    LocalCluster,
    RedisRegistry,
)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"port": 70000}, "port"),
        ({"port": True}, "port"),
        ({"host": ""}, "host"),
        ({"max_message_bytes": 10}, "max_message_bytes"),
        ({"tls_cert_file": "c.pem"}, "tls_cert_file and tls_key_file"),
        ({"shutdown_grace": -1}, "shutdown_grace"),
        ({"token": ""}, "token"),
    ],
)
def test_gateway_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Gateway(**kwargs)  # type: ignore[arg-type]


def test_gateway_repr_hides_the_token() -> None:
    gateway = Gateway(token=SecretStr("hunter2"))
    assert "hunter2" not in repr(gateway)
    assert "127.0.0.1:0" in repr(gateway)


@pytest.mark.parametrize(
    ("address", "kwargs", "error", "match"),
    [
        ("nohost", {}, ValueError, "host:port"),
        ("localhost:abc", {}, ValueError, "host:port"),
        (42, {}, TypeError, "address"),
        ("127.0.0.1:1", {"max_message_bytes": 0}, ValueError, "max_message_bytes"),
        ("127.0.0.1:1", {"connect_timeout": 0}, ValueError, "connect_timeout"),
        ("127.0.0.1:1", {"reconnect_backoff": -1}, ValueError, "reconnect_backoff"),
        ("127.0.0.1:1", {"root_certificates": "pem"}, TypeError, "root_certificates"),
    ],
)
def test_worker_arguments(address: object, kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        GrpcAgentRuntime(address, **kwargs)  # type: ignore[arg-type]


async def test_worker_must_be_started_and_a_dead_address_fails_promptly() -> None:
    runtime = GrpcAgentRuntime("127.0.0.1:1", token_env=None, connect_timeout=1)
    with pytest.raises(RuntimeError, match="not started"):
        await runtime.send_message("x", AgentId("a", "b"))
    with pytest.raises(Exception, match="gateway"):
        await runtime.start()
    await runtime.stop()
    assert "127.0.0.1:1" in repr(runtime)


def test_worker_token_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_GRPC_TOKEN", "env-secret")
    runtime = GrpcAgentRuntime("127.0.0.1:1")
    assert "env-secret" not in repr(runtime)


def test_redis_registry_arguments() -> None:
    with pytest.raises(ValueError, match="url"):
        RedisRegistry("http://localhost")
    with pytest.raises(ValueError, match="lease_seconds"):
        RedisRegistry("redis://127.0.0.1:1", lease_seconds=0)
    # The password comes from REDIS_PASSWORD (ext-redis's RedisConnection), never in the URL, which is refused
    # without being repeated.
    with pytest.raises(ValueError, match="must not carry a password") as info:
        RedisRegistry("redis://:hunter2@127.0.0.1:1/0")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="must not carry a password"):
        LocalCluster(2, redis_url="redis://127.0.0.1:1/0?password=hunter2")


def test_cli_usage_and_argument_errors() -> None:
    usage = subprocess.run([sys.executable, "-m", "ext.runtime.grpc"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "gateway" in usage.stderr
    tls = subprocess.run(
        [sys.executable, "-m", "ext.runtime.grpc", "gateway", "--tls-cert", "c.pem"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tls.returncode == 2 and "--tls-key" in tls.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "ext.runtime.grpc", "gateway", "--help"], capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0 and "--redis-url" in helped.stdout


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"tls": "yes"}, TypeError, "tls must be a bool"),
        ({"token_env": 3}, TypeError, "token_env"),
        ({"tls_server_name": b"gw"}, TypeError, "tls_server_name"),
        ({"reconnect_max_backoff": 0}, ValueError, "reconnect_max_backoff"),
        ({"tokn": "x"}, TypeError, "unexpected keyword argument 'tokn'"),
    ],
)
def test_connection_options_name_the_bad_field(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ConnectionOptions("127.0.0.1:1", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        GrpcAgentRuntime("127.0.0.1:1", **kwargs)  # type: ignore[arg-type]


def test_connection_options_keep_secrets_out_of_repr_and_lists_as_tuples() -> None:
    options = ConnectionOptions(["127.0.0.1:1", "127.0.0.1:2"], token="hunter2", root_certificates=b"PEM")
    assert options.address == ("127.0.0.1:1", "127.0.0.1:2")
    assert isinstance(options.token, SecretStr) and options.token.get_secret_value() == "hunter2"
    assert "hunter2" not in repr(options) and "PEM" not in repr(options)
    assert (options.connect_timeout, options.reconnect_backoff) == (10.0, 0.1)


def test_the_runtime_takes_the_options_value_or_the_keywords_not_both() -> None:
    options = ConnectionOptions("127.0.0.1:1", token_env=None, connect_timeout=1)
    assert repr(GrpcAgentRuntime(options)) == repr(GrpcAgentRuntime("127.0.0.1:1", token_env=None, connect_timeout=1))
    with pytest.raises(TypeError, match="not both: connect_timeout, tls"):
        GrpcAgentRuntime(options, tls=True, connect_timeout=2)


async def test_a_worker_built_from_options_connects_with_their_token() -> None:
    gateway = Gateway(token="opt-token")
    port = await gateway.start()
    try:
        options = ConnectionOptions(f"127.0.0.1:{port}", token="opt-token", token_env=None, connect_timeout=5)
        async with GrpcAgentRuntime(options) as runtime:
            assert runtime.connected and runtime.address == f"127.0.0.1:{port}"
        refused = GrpcAgentRuntime(dataclasses.replace(options, token="wrong-token"))
        with pytest.raises(AuthenticationError):
            await refused.start()
        await refused.stop()
    finally:
        await gateway.stop(grace=0)
