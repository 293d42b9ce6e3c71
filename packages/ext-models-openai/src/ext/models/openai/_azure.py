"""What both Azure OpenAI clients (chat and embeddings) do with their Azure arguments: the endpoint and API version
(arguments, else AZURE_OPENAI_ENDPOINT and OPENAI_API_VERSION), at most one credential given, and the credential
argument for the SDK (a token provider, else a token or key given, else a key or token from the environment)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, Union

from pydantic import SecretStr

from ext.core import ConfigurationError, resolve_secret

__all__ = ["TokenProvider", "azure_credentials", "azure_target", "check_credential_arguments"]

TokenProvider = Callable[[], Union[str, Awaitable[str]]]


class _CredentialConfig(Protocol):
    @property
    def api_key(self) -> SecretStr | None: ...
    @property
    def api_key_env(self) -> str | None: ...
    @property
    def azure_ad_token(self) -> SecretStr | None: ...
    @property
    def azure_ad_token_env(self) -> str | None: ...


def azure_target(api_version: str | None, azure_endpoint: str | None, owner: str) -> tuple[str, str]:
    """`api_version` and `azure_endpoint`, from the arguments or the environment, or a `ConfigurationError`."""
    if api_version is None:
        api_version = os.environ.get("OPENAI_API_VERSION") or None
        if api_version is None:
            raise ConfigurationError(
                f"{owner}: api_version is required (YYYY-MM-DD, e.g. 2024-10-21); pass api_version=... or set "
                "the OPENAI_API_VERSION environment variable"
            )
    if azure_endpoint is None:
        azure_endpoint = os.environ.get("AZURE_OPENAI_ENDPOINT") or None
        if azure_endpoint is None:
            raise ConfigurationError(
                f"{owner}: azure_endpoint is required: pass azure_endpoint='https://<resource>.openai.azure.com' "
                "or set the AZURE_OPENAI_ENDPOINT environment variable"
            )
    return api_version, azure_endpoint


def check_credential_arguments(
    api_key: object, azure_ad_token: object, azure_ad_token_provider: object, owner: str
) -> None:
    """At most one credential argument, and a token provider that can be called."""
    given = [value for value in (api_key, azure_ad_token, azure_ad_token_provider) if value is not None]
    if len(given) > 1:
        raise ConfigurationError(f"{owner}: pass only one of api_key, azure_ad_token, azure_ad_token_provider")
    if azure_ad_token_provider is not None and not callable(azure_ad_token_provider):
        raise ConfigurationError(f"{owner}: azure_ad_token_provider must be a callable returning a token")


def azure_credentials(config: _CredentialConfig, provider: TokenProvider | None, owner: str) -> dict[str, Any]:
    """The SDK's credential argument, one entry named as the SDK names it (`azure_ad_token_provider`,
    `azure_ad_token` or `api_key`): the provider, else the token or key given, else the key from `api_key_env`, else
    the token from `azure_ad_token_env`."""
    if provider is not None:
        return {"azure_ad_token_provider": provider}
    if config.azure_ad_token is not None:
        return {"azure_ad_token": config.azure_ad_token.get_secret_value()}
    key, _ = resolve_secret(config.api_key, config.api_key_env)
    if key is not None:
        return {"api_key": key.get_secret_value()}
    token, _ = resolve_secret(None, config.azure_ad_token_env)
    if token is not None:
        return {"azure_ad_token": token.get_secret_value()}
    envs = " or ".join(e for e in (config.api_key_env, config.azure_ad_token_env) if e)
    where = f", or set {envs}" if envs else ""
    raise ConfigurationError(
        f"{owner}: no credentials: pass api_key=..., azure_ad_token=... or azure_ad_token_provider=...{where}"
    )
