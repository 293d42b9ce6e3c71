"""`OAuthSettings`: how the client authorizes with an OAuth-protected MCP server (the `auth=` of the HTTP params).

Everything here is checked when the settings are built, before any network call; the protocol itself is the mcp
SDK's (`mcp.client.auth`), which `_oauth.py` configures from these settings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from mcp.client.auth.utils import is_valid_client_metadata_url
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from ext.core import ConfigurationError, resolve_secret

from ._token_store import FileTokenStore, TokenStore

Grant = Literal["authorization_code", "client_credentials"]


class OAuthSettings(BaseModel):
    """OAuth 2.1 for one MCP server over HTTP (streamable HTTP or SSE).

    With no `scopes`, the client asks for what the server's `WWW-Authenticate` challenge and its protected-resource
    metadata name. Without `client_id`, the client registers itself (a client ID metadata document when
    `client_metadata_url` is given and the authorization server supports it, else dynamic registration); the
    registration is kept in the token store.

    Secrets (`client_secret`, the private key) are never dumped: name environment variables in
    `client_secret_env` / `private_key_env`, or a file in `private_key_file`, to keep them out of configs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    type: Literal["OAuthSettings"] = "OAuthSettings"
    grant: Grant = Field(
        default="authorization_code",
        description="'authorization_code' (a person logs in, PKCE) or 'client_credentials' (machine to machine).",
    )
    scopes: list[str] | None = Field(
        default=None, description="Scopes to ask for; None follows the server's challenge and metadata."
    )
    client_id: str | None = Field(default=None, min_length=1, description="A pre-registered client ID.")
    client_secret: SecretStr | None = Field(
        default=None, exclude=True, description="The pre-registered client's secret (never dumped)."
    )
    client_secret_env: str | None = Field(
        default=None, min_length=1, description="Environment variable holding client_secret."
    )
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = Field(
        default=None,
        description="How a pre-registered client authenticates at the token endpoint (default: "
        "client_secret_basic with a secret, none without).",
    )
    private_key_file: str | None = Field(
        default=None, description="PEM private key signing private_key_jwt assertions (client_credentials)."
    )
    private_key_env: str | None = Field(
        default=None, min_length=1, description="Environment variable holding that PEM key instead."
    )
    signing_algorithm: str = Field(default="RS256", description="JWT algorithm for private_key_jwt.")
    issuer: str | None = Field(
        default=None,
        description="The authorization server a pre-registered client belongs to: its credentials are only ever "
        "sent there (for client_credentials the mcp SDK will require it).",
    )
    client_metadata_url: str | None = Field(
        default=None, description="An https URL (with a path) of this client's ID metadata document."
    )
    client_name: str = Field(default="ext", min_length=1, description="The client name shown on consent screens.")
    callback_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Fixed 127.0.0.1 port of the login callback, for redirect URIs registered in advance "
        "(default: the port of the stored registration, else a free one).",
    )
    callback_path: str = Field(default="/callback", description="Path of the login callback URL.")
    token_store: Any = Field(
        default=None,
        exclude=True,
        description="A TokenStore (FileTokenStore, RedisTokenStore...); default: a FileTokenStore in token_dir.",
    )
    token_dir: str | None = Field(
        default=None, description="Directory of the default file store (default: $EXT_MCP_TOKEN_DIR or ~/.local/state)."
    )
    token_encryption_key_env: str | None = Field(
        default=None, min_length=1, description="Environment variable holding the file store's Fernet key."
    )
    login_command: str | None = Field(
        default=None, description="The command a 'needs login' error tells people to run (default: ext mcp login URL)."
    )

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            grant: Grant = "authorization_code",
            scopes: list[str] | None = None,
            client_id: str | None = None,
            client_secret: str | SecretStr | None = None,
            client_secret_env: str | None = None,
            token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = None,
            private_key_file: str | os.PathLike[str] | None = None,
            private_key_env: str | None = None,
            signing_algorithm: str = "RS256",
            issuer: str | None = None,
            client_metadata_url: str | None = None,
            client_name: str = "ext",
            callback_port: int | None = None,
            callback_path: str = "/callback",
            token_store: TokenStore | None = None,
            token_dir: str | os.PathLike[str] | None = None,
            token_encryption_key_env: str | None = None,
            login_command: str | None = None,
        ) -> None: ...

    @field_validator("private_key_file", "token_dir", mode="before")
    @classmethod
    def _path_to_str(cls, value: Any) -> Any:
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("scopes")
    @classmethod
    def _valid_scopes(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            for scope in value:
                if not scope or any(c.isspace() or c in '"\\' for c in scope):
                    raise ValueError(
                        f"each scope must be a non-empty token without spaces, quotes or backslashes, got {scope!r}"
                    )
        return value

    @field_validator("issuer")
    @classmethod
    def _valid_issuer(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
                raise ValueError("issuer must be the authorization server's http(s) issuer URL (no query or fragment)")
        return value

    @field_validator("client_metadata_url")
    @classmethod
    def _valid_cimd(cls, value: str | None) -> str | None:
        if value is not None and not is_valid_client_metadata_url(value):
            raise ValueError("client_metadata_url must be an https:// URL with a path (a client ID metadata document)")
        return value

    @field_validator("callback_path")
    @classmethod
    def _valid_path(cls, value: str) -> str:
        if not value.startswith("/") or any(c in value for c in "?#") or any(c.isspace() for c in value):
            raise ValueError("callback_path must be a URL path starting with '/' (no query, fragment or spaces)")
        return value

    @field_validator("token_store")
    @classmethod
    def _valid_store(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, TokenStore):
            raise ValueError(
                f"token_store must be a TokenStore (FileTokenStore, RedisTokenStore...), got {type(value).__name__}"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> OAuthSettings:
        secret_given = self.client_secret is not None or self.client_secret_env is not None
        key_given = self.private_key_file is not None or self.private_key_env is not None
        if self.client_secret is not None and self.client_secret_env is not None:
            raise ValueError("give client_secret or client_secret_env, not both")
        if self.private_key_file is not None and self.private_key_env is not None:
            raise ValueError("give private_key_file or private_key_env, not both")
        if self.token_store is not None and (self.token_dir is not None or self.token_encryption_key_env is not None):
            raise ValueError(
                "token_dir and token_encryption_key_env configure the default file store: "
                "give them or token_store, not both"
            )
        if secret_given and self.client_id is None:
            raise ValueError("a client secret needs the client_id it belongs to")
        if self.grant == "client_credentials":
            if self.client_id is None:
                raise ValueError("grant='client_credentials' needs client_id")
            if secret_given == key_given:
                raise ValueError(
                    "grant='client_credentials' needs either a client secret (client_secret / client_secret_env) "
                    "or a private key for private_key_jwt (private_key_file / private_key_env)"
                )
            if self.client_metadata_url is not None or self.callback_port is not None:
                raise ValueError("client_metadata_url and callback_port apply to grant='authorization_code' only")
            if self.token_endpoint_auth_method == "none":
                raise ValueError("grant='client_credentials' cannot use token_endpoint_auth_method='none'")
        elif key_given:
            raise ValueError("a private key (private_key_jwt) applies to grant='client_credentials' only")
        if self.private_key_file is not None and not Path(self.private_key_file).is_file():
            raise ValueError(f"private_key_file {self.private_key_file!r} does not exist")
        return self

    # --- resolved values (read when connecting) ------------------------------------------------------

    def secret(self) -> str | None:
        """The client secret, from the field or its environment variable (raises naming an unset variable)."""
        if self.client_secret is not None:
            return self.client_secret.get_secret_value()
        if self.client_secret_env is not None:
            value, _ = resolve_secret(None, self.client_secret_env)
            if value is None:
                raise ConfigurationError(
                    f"OAuthSettings.client_secret_env: environment variable {self.client_secret_env!r} is not set"
                )
            return value.get_secret_value()
        return None

    def private_key(self) -> str | None:
        """The PEM signing key, from its file or environment variable."""
        if self.private_key_file is not None:
            return Path(self.private_key_file).read_text(encoding="utf-8")
        if self.private_key_env is not None:
            value, _ = resolve_secret(None, self.private_key_env)
            if value is None:
                raise ConfigurationError(
                    f"OAuthSettings.private_key_env: environment variable {self.private_key_env!r} is not set"
                )
            return value.get_secret_value()
        return None

    def store(self) -> TokenStore:
        if self.token_store is not None:
            store: TokenStore = self.token_store
            return store
        return FileTokenStore(self.token_dir, encryption_key_env=self.token_encryption_key_env)

    def scope(self) -> str | None:
        return " ".join(self.scopes) if self.scopes else None

    def secret_values(self) -> list[str]:
        """Secret values given inline, for masking."""
        return [self.client_secret.get_secret_value()] if self.client_secret is not None else []


def check_oauth(value: Any) -> Any:
    """`auth=` given as a mapping with type 'OAuthSettings' (a loaded config) becomes `OAuthSettings`."""
    if isinstance(value, dict) and value.get("type") == "OAuthSettings":
        return OAuthSettings.model_validate(value)
    return value
