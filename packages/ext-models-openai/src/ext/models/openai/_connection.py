"""How the chat and embedding clients reach the API, declared once for both: the connection fields of their
configs (`OpenAIConnection`, `AzureOpenAIConnection`) and the SDK client built from them (`openai_sdk`, `azure_sdk`).

The SDK's own retries are off (`max_retries=0`): core's `RetryPolicy` retries with backoff and Retry-After, so a
retry is never doubled. Azure: the endpoint and API version come from the arguments, else AZURE_OPENAI_ENDPOINT and
OPENAI_API_VERSION; at most one credential is given; the SDK gets a token provider, else the token or key given,
else a key or token from the environment.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ext.core import (
    ConfigurationError,
    UsageLifecycle,
    check_api_version,
    check_http_url,
    config_from_arguments,
    require_secret,
    resolve_secret,
    resolve_secret_map,
)

if TYPE_CHECKING:
    import openai

__all__ = [
    "AzureOpenAIConnection",
    "OpenAIConnection",
    "SdkOwner",
    "TokenProvider",
    "azure_config",
    "azure_sdk",
    "openai_sdk",
]

TokenProvider = Callable[[], Union[str, Awaitable[str]]]
"""Returns an Entra ID bearer token (sync or async); called by the SDK before each request."""

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3

_AzureConfigT = TypeVar("_AzureConfigT", bound="AzureOpenAIConnection")


class _Connection(BaseModel):
    # Validators are built on first use, not at import (import time counts for every user).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True, defer_build=True)

    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="Seconds before one HTTP attempt fails.")
    max_retries: int = Field(DEFAULT_MAX_RETRIES, ge=0, description="Retries of rate limits and transient errors.")


class OpenAIConnection(_Connection):
    """OpenAI, or any OpenAI-compatible server (`base_url`)."""

    api_key: Optional[SecretStr] = Field(None, description="API key; default from the api_key_env variable.")
    api_key_env: Optional[str] = Field("OPENAI_API_KEY", description="Environment variable holding the key.")
    organization: Optional[str] = Field(None, description="Organization id; default from OPENAI_ORG_ID.")
    project: Optional[str] = Field(None, description="Project id; default from OPENAI_PROJECT_ID.")
    base_url: Optional[str] = Field(None, description="Any OpenAI-compatible endpoint, e.g. http://host:8000/v1.")

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value, "base_url")


class AzureOpenAIConnection(_Connection):
    """An Azure OpenAI deployment: `{azure_endpoint}/openai/deployments/{azure_deployment}/...?api-version=...`."""

    azure_deployment: str = Field(min_length=1, description="Deployment name (the URL's /deployments/<name>).")
    api_version: str = Field(description="API version, YYYY-MM-DD (optionally -preview).")
    azure_endpoint: Optional[str] = Field(
        None, description="https://<resource>.openai.azure.com; default from AZURE_OPENAI_ENDPOINT."
    )
    api_key: Optional[SecretStr] = Field(None, description="API key (api-key header).")
    api_key_env: Optional[str] = Field("AZURE_OPENAI_API_KEY", description="Environment variable holding the key.")
    azure_ad_token: Optional[SecretStr] = Field(None, description="Entra ID token (Authorization: Bearer).")
    azure_ad_token_env: Optional[str] = Field(
        "AZURE_OPENAI_AD_TOKEN", description="Environment variable holding an Entra ID token."
    )

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        return check_api_version(value)

    @field_validator("azure_endpoint")
    @classmethod
    def _azure_endpoint(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value, "azure_endpoint")


class SdkOwner(UsageLifecycle[BaseModel]):
    """What the chat and embedding clients share around the SDK client they hold (`_sdk`, built from `_config`): a
    dump without secrets, in which null ones make every dump the same shape (the loaded client reads them from the
    `*_env` variables); no dump of a client given an HTTP client or a token provider in code; and closing the SDK
    client unless its HTTP client was given."""

    _sdk: openai.AsyncOpenAI
    _config: BaseModel
    _owns_http_client: bool = True
    _has_token_provider: bool = False

    async def _close(self) -> None:
        if self._owns_http_client:
            await self._sdk.close()

    def _undumpable_settings(self) -> dict[str, str]:
        settings = super()._undumpable_settings()
        if not self._owns_http_client:
            settings["http_client"] = "an HTTP client object"
        if self._has_token_provider:
            settings["azure_ad_token_provider"] = "a callable (use azure_ad_token_env for a token from the environment)"
        return settings

    def _to_config(self) -> BaseModel:
        fields = type(self._config).model_fields
        secrets: dict[str, Any] = {name: None for name in ("api_key", "azure_ad_token") if name in fields}
        return self._config.model_copy(update=secrets)


def openai_sdk(
    config: OpenAIConnection,
    http_client: Any,
    owner: str,
    *,
    default_headers: Mapping[str, SecretStr] | None = None,
    default_headers_env: Mapping[str, str] | None = None,
) -> openai.AsyncOpenAI:
    """The SDK client for `config` (the key from `api_key`, else `api_key_env`, else a `ConfigurationError`), sending
    the headers of `default_headers` and `default_headers_env` (a chat config's) with every request."""
    key = require_secret(
        config.api_key, config.api_key_env, owner, hint=" (a local server that needs no key takes any placeholder)"
    )
    headers = resolve_secret_map(default_headers, default_headers_env, "default_headers") or None
    import openai  # deferred: `import ext.models.openai` stays cheap for config loading and listing

    return openai.AsyncOpenAI(
        api_key=key.get_secret_value(),
        organization=config.organization,
        project=config.project,
        base_url=config.base_url,
        timeout=config.timeout,
        max_retries=0,  # one retry owner: core's policy
        default_headers=headers,
        http_client=http_client,
    )


def azure_config(config_cls: type[_AzureConfigT], arguments: Mapping[str, Any], owner: str) -> _AzureConfigT:
    """An Azure client's constructor arguments (`locals()`) as its config: the endpoint and API version from the
    environment when not given, and at most one credential argument (or a `ConfigurationError`)."""
    api_version, azure_endpoint = _azure_target(arguments["api_version"], arguments["azure_endpoint"], owner)
    given = [arguments[name] for name in ("api_key", "azure_ad_token", "azure_ad_token_provider")]
    if sum(value is not None for value in given) > 1:
        raise ConfigurationError(f"{owner}: pass only one of api_key, azure_ad_token, azure_ad_token_provider")
    if given[2] is not None and not callable(given[2]):
        raise ConfigurationError(f"{owner}: azure_ad_token_provider must be a callable returning a token")
    values = {**arguments, "api_version": api_version, "azure_endpoint": azure_endpoint}
    return config_from_arguments(config_cls, values, owner)


def azure_sdk(
    config: AzureOpenAIConnection,
    token_provider: TokenProvider | None,
    http_client: Any,
    owner: str,
    *,
    default_headers: Mapping[str, SecretStr] | None = None,
    default_headers_env: Mapping[str, str] | None = None,
) -> tuple[openai.AsyncAzureOpenAI, str]:
    """The SDK client for `config` (as `openai_sdk`), and the SDK's name of the credential it sends
    (`azure_ad_token_provider`, `azure_ad_token` or `api_key`): how its requests authenticate."""
    _, endpoint = _azure_target(config.api_version, config.azure_endpoint, owner)
    credentials = _azure_credentials(config, token_provider, owner)
    headers = resolve_secret_map(default_headers, default_headers_env, "default_headers") or None
    import openai

    sdk = openai.AsyncAzureOpenAI(
        azure_endpoint=endpoint,
        azure_deployment=config.azure_deployment,
        api_version=config.api_version,
        timeout=config.timeout,
        max_retries=0,
        default_headers=headers,
        http_client=http_client,
        **credentials,
    )
    return sdk, next(iter(credentials))


def _azure_target(api_version: str | None, azure_endpoint: str | None, owner: str) -> tuple[str, str]:
    version = _given_or_env(
        api_version,
        "OPENAI_API_VERSION",
        f"{owner}: api_version is required (YYYY-MM-DD, e.g. 2024-10-21); pass "
        "api_version=... or set the OPENAI_API_VERSION environment variable",
    )
    endpoint = _given_or_env(
        azure_endpoint,
        "AZURE_OPENAI_ENDPOINT",
        f"{owner}: azure_endpoint is required: pass "
        "azure_endpoint='https://<resource>.openai.azure.com' or set the AZURE_OPENAI_ENDPOINT environment variable",
    )
    return version, endpoint


def _given_or_env(value: str | None, variable: str, missing: str) -> str:
    if value is None:
        value = os.environ.get(variable) or None
        if value is None:
            raise ConfigurationError(missing)
    return value


def _azure_credentials(config: AzureOpenAIConnection, provider: TokenProvider | None, owner: str) -> dict[str, Any]:
    """The SDK's credential argument, one entry named as the SDK names it: the provider, else the token or key given,
    else the key from `api_key_env`, else the token from `azure_ad_token_env`."""
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
