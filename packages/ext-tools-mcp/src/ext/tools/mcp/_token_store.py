"""Where OAuth state (tokens, client registrations) is kept: a file store and the protocol every store follows.

A store holds JSON records under string keys. Each `put` replaces one record whole (a file is renamed into place,
a Redis key is SET), so two processes writing at once leave one complete record, never a mix of both. The OAuth
layer (`_oauth_storage.py`) keeps tokens and the client registration in separate records so that no write needs
to read first.

Records may be encrypted at rest with a Fernet key (AES-128-CBC + HMAC-SHA256, from `cryptography`, which the mcp
SDK already brings through `pyjwt[crypto]`): a store given a key writes only ciphertext and refuses to read a
record it cannot authenticate.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
from cryptography.fernet import Fernet, InvalidToken
from pydantic import SecretStr

from ext.core import ConfigurationError, resolve_secret

DEFAULT_TOKEN_DIR_ENV = "EXT_MCP_TOKEN_DIR"


@runtime_checkable
class TokenStore(Protocol):
    """Keeps JSON records (dicts) under string keys; every method is safe to call from several processes."""

    async def get(self, key: str) -> dict[str, Any] | None:
        """The record under `key`, or None."""
        ...

    async def put(self, key: str, record: dict[str, Any]) -> None:
        """Replace the record under `key` whole."""
        ...

    async def delete(self, key: str) -> None:
        """Remove the record under `key` (no error if there is none)."""
        ...

    def describe(self) -> str:
        """Where the records are, for messages (no secrets)."""
        ...


class RecordCodec:
    """JSON records to bytes and back, encrypted when a Fernet key is given."""

    __slots__ = ("_fernet",)

    def __init__(self, key: SecretStr | None, owner: str) -> None:
        self._fernet: Fernet | None = None
        if key is not None:
            try:
                self._fernet = Fernet(key.get_secret_value().encode("ascii"))
            except (ValueError, UnicodeEncodeError):
                raise ConfigurationError(
                    f"{owner}: the encryption key must be a Fernet key (32 url-safe base64-encoded bytes; "
                    "make one with FileTokenStore.generate_key())"
                ) from None

    @property
    def encrypted(self) -> bool:
        return self._fernet is not None

    def encode(self, record: dict[str, Any]) -> bytes:
        data = json.dumps(record, separators=(",", ":"), sort_keys=True).encode("utf-8")
        return self._fernet.encrypt(data) if self._fernet is not None else data

    def decode(self, data: bytes, where: str) -> dict[str, Any]:
        if self._fernet is not None:
            try:
                data = self._fernet.decrypt(data)
            except InvalidToken:
                raise ConfigurationError(
                    f"token store record {where} cannot be decrypted with the configured key "
                    "(written with another key, without one, or altered)"
                ) from None
        try:
            record = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            hint = "" if self._fernet is not None else " (is it encrypted? give the store its key)"
            raise ConfigurationError(f"token store record {where} is not JSON{hint}") from None
        if not isinstance(record, dict):
            raise ConfigurationError(f"token store record {where} is not a JSON object")
        return record


def resolve_key(key: str | SecretStr | None, key_env: str | None, owner: str) -> SecretStr | None:
    if key is not None and not isinstance(key, (str, SecretStr)):
        raise ConfigurationError(f"{owner}.encryption_key must be a str or SecretStr, got {type(key).__name__}")
    if key_env is not None and (not isinstance(key_env, str) or not key_env):
        raise ConfigurationError(f"{owner}.encryption_key_env must name an environment variable or be None")
    secret, _ = resolve_secret(key, None)
    if secret is None and key_env is not None:
        secret, _ = resolve_secret(None, key_env)
        if secret is None:
            raise ConfigurationError(f"{owner}.encryption_key_env: environment variable {key_env!r} is not set")
    return secret


def default_token_dir() -> Path:
    """`$EXT_MCP_TOKEN_DIR`, else `$XDG_STATE_HOME/ext/mcp-oauth`, else `~/.local/state/ext/mcp-oauth`."""
    explicit = os.environ.get(DEFAULT_TOKEN_DIR_ENV)
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "ext" / "mcp-oauth"


class FileTokenStore:
    """One file per record in `directory` (created 0700), each file 0600, written to a temporary file and renamed
    into place, so a reader sees the old record or the new one, never a part.

    Arguments:
        directory: where the files go (default: `default_token_dir()`).
        encryption_key: a Fernet key (`FileTokenStore.generate_key()`); records are then encrypted at rest.
        encryption_key_env: the environment variable holding the key when `encryption_key` is not given.
    """

    __slots__ = ("_codec", "_directory")

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        encryption_key: str | SecretStr | None = None,
        encryption_key_env: str | None = None,
    ) -> None:
        if directory is not None and not isinstance(directory, (str, os.PathLike)):
            raise ConfigurationError(f"FileTokenStore.directory must be a path, got {type(directory).__name__}")
        self._directory = Path(directory) if directory is not None else default_token_dir()
        self._codec = RecordCodec(resolve_key(encryption_key, encryption_key_env, "FileTokenStore"), "FileTokenStore")

    @staticmethod
    def generate_key() -> str:
        """A new random Fernet key (keep it in a secret manager or an environment variable)."""
        return Fernet.generate_key().decode("ascii")

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def encrypted(self) -> bool:
        return self._codec.encrypted

    def describe(self) -> str:
        return f"{self._directory} ({'encrypted' if self.encrypted else 'plain'} files)"

    def _path(self, key: str) -> Path:
        # Hashed names: a key holds URLs, which are not file names.
        return self._directory / (hashlib.sha256(key.encode("utf-8")).hexdigest()[:40] + ".json")

    async def get(self, key: str) -> dict[str, Any] | None:
        return await anyio.to_thread.run_sync(self._get, key)

    async def put(self, key: str, record: dict[str, Any]) -> None:
        data = self._codec.encode(record)
        await anyio.to_thread.run_sync(self._put, key, data)

    async def delete(self, key: str) -> None:
        await anyio.to_thread.run_sync(self._delete, key)

    def _get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return self._codec.decode(data, str(path))

    def _put(self, key: str, data: bytes) -> None:
        self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._path(key)
        # mkstemp creates the file 0600 before anything is written to it.
        fd, tmp = tempfile.mkstemp(dir=self._directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self._directory)!r}, encrypted={self.encrypted})"
