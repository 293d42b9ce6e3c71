"""The token from a secret file (Kubernetes secret volumes, compose `secrets:`): `--token-file` for the gateway,
`token_file` / `EXT_GRPC_TOKEN_FILE` for workers. Real gateway processes; the secret never shows in errors."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from ext_runtime_grpc_support import worker

from ext.core import AgentId
from ext.runtime.grpc import AuthenticationError, Gateway, GrpcAgentRuntime
from ext.runtime.grpc._secrets import read_token_file
from ext.runtime.grpc.testing import start_gateway_process
from ext.testing.runtime_agents import EchoAgent, Journal, Ping

SECRET = "file-s3cret-7f2a"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(SECRET + "\n")  # as `echo` and most editors write it
    return path


def test_read_token_file_drops_the_trailing_newline(tmp_path: Path) -> None:
    for text in (SECRET, SECRET + "\n", SECRET + "\r\n"):
        (tmp_path / "t").write_text(text, newline="")
        assert read_token_file(tmp_path / "t").get_secret_value() == SECRET


@pytest.mark.parametrize(
    ("content", "match"),
    [("", "is empty"), ("\n", "is empty"), ("  \n", "is empty"), (f"{SECRET}\nsecond\n", "several lines")],
)
def test_read_token_file_refuses_bad_content(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "t"
    path.write_text(content)
    with pytest.raises(ValueError, match=match) as info:
        read_token_file(path)
    assert str(path) in str(info.value) and "token_file" in str(info.value)
    assert SECRET not in str(info.value)


def test_read_token_file_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"token_file '.*/absent' cannot be read: No such file"):
        read_token_file(tmp_path / "absent")


async def test_gateway_and_worker_share_a_token_file(token_file: Path) -> None:
    process = start_gateway_process("--token-file", str(token_file))
    try:
        with pytest.raises(AuthenticationError, match="rejected"):
            await worker(process.address).start()
        with pytest.raises(AuthenticationError):
            await worker(process.address, token=SECRET + "x").start()
        async with worker(process.address, token_file=token_file) as runtime:
            journal = Journal()
            await runtime.register_agent_factory("echo", lambda aid, rt: EchoAgent(aid, rt, journal))
            reply = await asyncio.wait_for(runtime.send_and_await_response(Ping(text="f"), AgentId("echo", "1")), 10)
            assert reply.text == "f"
            assert SECRET not in repr(runtime)
    finally:
        process.kill()
    _, stderr = process.process.communicate(timeout=10)
    assert SECRET not in stderr


async def test_worker_reads_the_file_named_by_ext_grpc_token_file(
    token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process = start_gateway_process("--token-file", str(token_file))
    try:
        monkeypatch.delenv("EXT_GRPC_TOKEN", raising=False)
        monkeypatch.setenv("EXT_GRPC_TOKEN_FILE", str(token_file))
        async with GrpcAgentRuntime(process.address, connect_timeout=5) as runtime:
            assert runtime.connected
    finally:
        process.kill()


def test_worker_token_arguments(token_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="token must be printable ASCII") as info:
        GrpcAgentRuntime("127.0.0.1:1", token=SECRET + "\n")
    assert SECRET not in str(info.value)
    with pytest.raises(ValueError, match="token or token_file, not both"):
        GrpcAgentRuntime("127.0.0.1:1", token="x", token_file=token_file)
    with pytest.raises(ValueError, match=r"token_file .*absent.* cannot be read"):
        GrpcAgentRuntime("127.0.0.1:1", token_file=tmp_path / "absent")
    monkeypatch.setenv("EXT_GRPC_TOKEN", "a")
    monkeypatch.setenv("EXT_GRPC_TOKEN_FILE", str(token_file))
    with pytest.raises(ValueError, match="both EXT_GRPC_TOKEN and EXT_GRPC_TOKEN_FILE are set"):
        GrpcAgentRuntime("127.0.0.1:1")
    monkeypatch.delenv("EXT_GRPC_TOKEN")
    monkeypatch.setenv("EXT_GRPC_TOKEN_FILE", str(tmp_path / "gone"))
    with pytest.raises(ValueError, match=r"EXT_GRPC_TOKEN_FILE .*gone.* cannot be read"):
        GrpcAgentRuntime("127.0.0.1:1")


def run_gateway(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ext.runtime.grpc", "gateway", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**({} if env is None else env), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_gateway_refuses_an_unreadable_empty_or_doubled_token(tmp_path: Path, token_file: Path) -> None:
    missing = run_gateway("--token-file", str(tmp_path / "absent"))
    assert missing.returncode == 1
    assert f"--token-file '{tmp_path / 'absent'}' cannot be read" in missing.stderr
    (tmp_path / "empty").write_text("\n")
    empty = run_gateway("--token-file", str(tmp_path / "empty"))
    assert empty.returncode == 1 and "is empty" in empty.stderr
    both = run_gateway("--token-file", str(token_file), env={"EXT_GRPC_GATEWAY_TOKEN": "other"})
    assert both.returncode == 1
    assert "both --token-file and the EXT_GRPC_GATEWAY_TOKEN variable are set" in both.stderr
    for ran in (missing, empty, both):
        assert ran.stdout == "" and SECRET not in ran.stderr


@pytest.mark.parametrize("token", [SECRET + "\n", "two words", "t\u00f6ken", ""])
def test_tokens_that_cannot_travel_as_a_header_are_refused_at_construction(token: str) -> None:
    for build in (lambda: Gateway(token=token), lambda: GrpcAgentRuntime("127.0.0.1:1", token=token)):
        with pytest.raises(ValueError, match="token must") as info:
            build()
        assert token.strip() == "" or token.strip() not in str(info.value)
