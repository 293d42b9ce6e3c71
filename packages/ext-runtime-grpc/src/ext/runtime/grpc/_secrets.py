"""Tokens from secret files: what Kubernetes secret volumes and compose `secrets:` mount."""

from __future__ import annotations

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
