"""Worker and gateway tokens: checked for the wire, read from secret files (what Kubernetes secret volumes and
compose `secrets:` mount), or from the environment."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import SecretStr


def read_token_file(path: str | Path, name: str = "token_file") -> SecretStr:
    """The token in `path`, without its trailing newline (`echo` and editors add one; secret volumes keep it).

    Raises `ValueError` naming `name` and the file when it cannot be read, is not UTF-8 or holds no token; the
    message never contains the file's content.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{name} {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{name} {str(path)!r} is not UTF-8 text") from None
    token = text.rstrip("\r\n")
    if not token.strip():
        raise ValueError(f"{name} {str(path)!r} is empty: it must hold the token")
    if "\n" in token or "\r" in token:
        raise ValueError(f"{name} {str(path)!r} holds several lines: it must hold the token alone")
    return SecretStr(token)


def check_token(token: SecretStr) -> None:
    """Raise `ValueError` unless `token` can travel as an HTTP/2 header value (grpc fails every call with
    "Invalid metadata" otherwise). The message never contains the token."""
    value = token.get_secret_value()
    if not value:
        raise ValueError("token must not be empty")
    if not all(" " < c <= "~" for c in value):
        raise ValueError("token must be printable ASCII without spaces or newlines (it is sent as a header)")


def resolve_token(
    token: str | SecretStr | None, token_file: str | Path | None, token_env: str | None
) -> SecretStr | None:
    """A worker's token: `token`, else `token_file`, else the `token_env` variable, else the file named by the
    `<token_env>_FILE` variable; None when none is set. Checked with `check_token`."""
    if token is not None and token_file is not None:
        raise ValueError("give token or token_file, not both")
    if token_file is not None:
        token = read_token_file(token_file)
    elif token is None and token_env:
        env_value = os.environ.get(token_env)
        file_value = os.environ.get(f"{token_env}_FILE")
        if env_value and file_value:
            raise ValueError(f"both {token_env} and {token_env}_FILE are set: set one")
        if env_value:
            token = SecretStr(env_value)
        elif file_value:
            token = read_token_file(file_value, f"{token_env}_FILE")
    elif isinstance(token, str):
        token = SecretStr(token)
    if token is not None:
        check_token(token)
    return token
