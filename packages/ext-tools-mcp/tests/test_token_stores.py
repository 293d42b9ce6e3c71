"""Token stores: file (0600, encrypted at rest with a key) and Redis; whole-record writes, two writers in two
processes; records keyed by authorization server and resource."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ext.core import ConfigurationError
from ext.redis import RedisConnection
from ext.testing.redis import RedisServer, start_redis_server
from ext.tools.mcp import FileTokenStore, RedisTokenStore, TokenStore
from ext.tools.mcp._oauth_records import OAuthRecords

TOKEN = "access-token-value-that-must-not-leak"


def files_in(directory: Path) -> list[Path]:
    """The directory's entries (a plain function: the async tests call it between awaits)."""
    return sorted(directory.iterdir())


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


def read(path: Path) -> bytes:
    return path.read_bytes()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()


async def test_file_store_permissions_and_plain_round_trip(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "tokens")
    assert await store.get("k") is None
    await store.put("k", {"a": 1})
    assert await store.get("k") == {"a": 1}
    (path,) = files_in(tmp_path / "tokens")
    assert mode_of(path) == 0o600
    assert mode_of(tmp_path / "tokens") == 0o700
    await store.delete("k")
    await store.delete("k")
    assert await store.get("k") is None


async def test_file_store_encrypts_at_rest(tmp_path: Path) -> None:
    key = FileTokenStore.generate_key()
    store = FileTokenStore(tmp_path, encryption_key=key)
    await store.put("k", {"token": TOKEN})
    (path,) = files_in(tmp_path)
    assert TOKEN.encode() not in read(path)
    assert await store.get("k") == {"token": TOKEN}
    with pytest.raises(ConfigurationError, match="cannot be decrypted with the configured key"):
        await FileTokenStore(tmp_path, encryption_key=FileTokenStore.generate_key()).get("k")
    with pytest.raises(ConfigurationError, match="is not JSON \\(is it encrypted"):
        await FileTokenStore(tmp_path).get("k")
    assert key not in repr(store)


def test_bad_keys_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="must be a Fernet key"):
        FileTokenStore("/tmp/x", encryption_key="not a key")
    monkeypatch.delenv("EXT_TEST_NO_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="'EXT_TEST_NO_KEY' is not set"):
        FileTokenStore("/tmp/x", encryption_key_env="EXT_TEST_NO_KEY")
    with pytest.raises(ConfigurationError, match=r"must be an ext\.redis\.RedisConnection"):
        RedisTokenStore("redis://127.0.0.1")  # type: ignore[arg-type]


async def test_redis_store_round_trip_encrypted(redis_server: RedisServer) -> None:
    store = RedisTokenStore(
        RedisConnection(redis_server.url), prefix="t1:", encryption_key=FileTokenStore.generate_key()
    )
    try:
        assert isinstance(store, TokenStore)
        await store.put("k", {"token": TOKEN})
        assert await store.get("k") == {"token": TOKEN}
        raw = await store._redis().keys("t1:*")
        assert len(raw) == 1 and TOKEN.encode() not in await store._redis().get(raw[0])
        await store.delete("k")
        assert await store.get("k") is None
    finally:
        await store.aclose()


_WRITER = """
import asyncio, json, sys
from ext.tools.mcp import FileTokenStore, RedisTokenStore
from ext.redis import RedisConnection

async def main(kind, where, key, name, count):
    store = FileTokenStore(where, encryption_key=key) if kind == "file" else RedisTokenStore(
        RedisConnection(where), encryption_key=key)
    seen = []
    for i in range(count):
        # A record whose parts must agree: a torn write would break the check below.
        await store.put("shared", {"writer": name, "i": i, "check": f"{name}-{i}" * 50})
        record = await store.get("shared")
        assert record["check"] == f"{record['writer']}-{record['i']}" * 50, record
        seen.append(record["writer"])
    print(json.dumps(sorted(set(seen))))

asyncio.run(main(*sys.argv[1:5], int(sys.argv[5])))
"""


def _two_writers(kind: str, where: str, key: str) -> list[list[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, kind, where, key, name, "300"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]
        outs.append(json.loads(out))
    return outs


@pytest.mark.parametrize("kind", ["file", "redis"])
async def test_two_writers_in_two_processes(kind: str, tmp_path: Path, redis_server: RedisServer) -> None:
    key = FileTokenStore.generate_key()
    where = str(tmp_path) if kind == "file" else redis_server.url
    outs = _two_writers(kind, where, key)
    # Every read saw a whole record from one writer; each writer saw its own records at least.
    assert all(set(seen) <= {"a", "b"} and seen for seen in outs)
    store = (
        FileTokenStore(where, encryption_key=key)
        if kind == "file"
        else RedisTokenStore(RedisConnection(where), encryption_key=key)
    )
    final = await store.get("shared")
    assert final is not None and final["i"] == 299 and final["check"] == f"{final['writer']}-299" * 50
    if kind == "file":
        assert [p.name for p in files_in(tmp_path) if p.name.startswith(".tmp-")] == []  # no leftovers
    else:
        assert isinstance(store, RedisTokenStore)
        await store.aclose()


async def test_records_are_keyed_by_authorization_server_and_resource(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path)
    resource = "https://mcp.example.com/mcp"
    first = OAuthRecords(store, resource, None)
    first.issuer_now = lambda: "https://as-one.example.com"
    await first.set_client_info(OAuthClientInformationFull(client_id="one", issuer="https://as-one.example.com"))
    await first.set_tokens(OAuthToken(access_token="t1", refresh_token="r1", expires_in=60))
    # The same resource moves to another authorization server: its records are separate.
    second = OAuthRecords(store, resource, None)
    await second.load()
    assert second.issuer == "https://as-one.example.com"
    second.issuer_now = lambda: "https://as-two.example.com"
    await second.set_tokens(OAuthToken(access_token="t2"))
    assert second.issuer == "https://as-two.example.com"
    assert await second.get_client_info() is None  # the first server's registration is not offered here
    assert (await second.get_tokens()) == OAuthToken(access_token="t2")
    # Another resource on the same authorization server shares nothing either.
    other = OAuthRecords(store, "https://other.example.com/mcp", None)
    stored = await other.load()
    assert (stored.token, stored.client) == (None, None)
    # A reader that last saw the first server still reads only its own records.
    back = OAuthRecords(store, resource, None)
    back.issuer = "https://as-one.example.com"
    client = await back.get_client_info()
    assert client is not None and client.client_id == "one"
    token, expires_at = await back.token_record()
    assert token is not None and token.access_token == "t1" and expires_at is not None
    assert await back.forget_all() is True
    assert [p for p in files_in(tmp_path) if not p.name.startswith(".")] == []
    assert os.listdir(tmp_path) == []
