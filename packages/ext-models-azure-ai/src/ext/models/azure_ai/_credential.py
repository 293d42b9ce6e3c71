"""What the chat and embedding clients hand azure-ai-inference: the credential, the SDK client's options and the
per-call options. Both clients take the same `credential` / `api_key` / `api_key_env` arguments."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Union
from urllib.parse import urlsplit

from pydantic import SecretStr

from ext.core import ConfigurationError, require_secret

if TYPE_CHECKING:
    from azure.core.credentials import AzureKeyCredential
    from azure.core.credentials_async import AsyncTokenCredential

Credential = Union[str, SecretStr, "AzureKeyCredential", "AsyncTokenCredential"]
"""A key (string, `SecretStr` or `AzureKeyCredential`) or an async token credential (`azure.identity.aio`)."""

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def split_credential(
    credential: Credential | None, api_key: str | SecretStr | None, owner: str
) -> tuple[Any, str | SecretStr | None, bool]:
    """`(credential, api_key, is_token)`: a key given as `credential` moves to `api_key` (so the config holds it
    as a secret); anything else must be an `AzureKeyCredential` or an async token credential. Checked before
    the configuration is built, so a wrong credential type is the first error named."""
    from azure.core.credentials import AzureKeyCredential  # deferred: importing ext stays cheap

    if credential is not None and api_key is not None:
        raise ConfigurationError(f"{owner}: pass credential or api_key, not both")
    if credential is None or isinstance(credential, AzureKeyCredential):
        return credential, api_key, False
    if isinstance(credential, (str, SecretStr)):
        return None, credential, False
    if inspect.iscoroutinefunction(getattr(credential, "get_token", None)):
        return credential, None, True
    raise ConfigurationError(
        f"{owner}: credential must be a key (str, SecretStr or AzureKeyCredential) or an async token "
        f"credential (an object with an async get_token, e.g. azure.identity.aio), got "
        f"{type(credential).__name__}"
    )


def sdk_credential(credential: Any, api_key: SecretStr | None, api_key_env: str | None, owner: str) -> Any:
    """The credential object the SDK takes: `credential` as `split_credential` left it, else a key credential
    from `api_key` / the `api_key_env` variable (ConfigurationError when there is none)."""
    from azure.core.credentials import AzureKeyCredential

    if isinstance(credential, AzureKeyCredential):
        if not credential.key:
            raise ConfigurationError(f"{owner}: credential: the AzureKeyCredential holds an empty key")
        return credential
    if credential is not None:
        return credential
    key = require_secret(
        api_key,
        api_key_env,
        owner,
        what="credential",
        argument="credential=<key, AzureKeyCredential or async token credential>",
    )
    return AzureKeyCredential(key.get_secret_value())


def sdk_options(timeout: float, api_version: str | None) -> dict[str, Any]:
    """Keyword arguments for an azure-ai-inference client. Its own retries are off: core's policy retries,
    so a retry is never doubled."""
    options: dict[str, Any] = {"retry_total": 0, "connection_timeout": timeout, "read_timeout": timeout}
    if api_version is not None:
        options["api_version"] = api_version
    return options


def call_options(endpoint: str, is_token: bool) -> dict[str, Any]:
    """Keyword arguments for each SDK call. azure-core refuses bearer tokens over plain http; a loopback
    endpoint keeps them on this machine, so there it may."""
    split = urlsplit(endpoint)
    if is_token and split.scheme == "http" and split.hostname in _LOOPBACK_HOSTS:
        return {"enforce_https": False}
    return {}
