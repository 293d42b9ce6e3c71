"""Database URLs without their secrets: the password and libpq's other secret parameters are split off into
`SecretStr`s, so the URL a store keeps, prints, logs and dumps holds none of them; and a URL libpq would refuse
(an unknown option, a malformed part) is refused when the store is made, before any connection.

libpq's secret parameters (PostgreSQL 18, "Parameter Key Words",
https://www.postgresql.org/docs/18/libpq-connect.html#LIBPQ-PARAMKEYWORDS; libpq marks the first three as
password fields, dispchar "*", in `PQconninfoOptions`, src/interfaces/libpq/fe-connect.c):

- `password`: the user's password;
- `sslpassword`: the password of the client certificate's key (`sslkey`);
- `oauth_client_secret`: the OAuth client's secret (PostgreSQL 18);
- `scram_client_key`, `scram_server_key`: SCRAM keys for pass-through authentication (PostgreSQL 18); they
  authenticate as the user, like the password they are derived from.

Any further parameter the installed libpq marks as a password field (`PQconndefaults`, dispchar "*") is treated
the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from pydantic import SecretStr

from ext.core import ConfigurationError

_SCHEMES = ("postgresql", "postgres")
_DOCUMENTED_SECRETS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")
_KEYWORDS_URL = "https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS"


def secret_parameters() -> frozenset[str]:
    """libpq's secret parameters: the documented ones and whatever the installed libpq marks as a password."""
    marked = {
        option.keyword.decode()
        for option in psycopg.pq.Conninfo.get_defaults()
        if option.keyword is not None and option.dispchar == b"*"
    }
    return frozenset(_DOCUMENTED_SECRETS) | marked


def split_secrets(url: str) -> tuple[str, dict[str, SecretStr]]:
    """`url` without any secret parameter (the password in its userinfo or any of `secret_parameters()` in its
    query), and those secrets by parameter name. Raises `ConfigurationError` for a URL libpq would refuse, naming
    the part (never echoing a secret)."""
    if not isinstance(url, str) or not url:
        raise ConfigurationError("PgVectorStore: url must be a postgresql:// URL, got an empty value")
    parts = urlsplit(url)
    if parts.scheme not in _SCHEMES:
        raise ConfigurationError(
            f"PgVectorStore: url must start with postgresql:// or postgres://, got scheme {parts.scheme!r}"
        )
    secrets: dict[str, SecretStr] = {}
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, secret = userinfo.partition(":")
        if sep and secret:
            secrets["password"] = SecretStr(unquote(secret))
        netloc = f"{user}@{hostport}" if user else hostport
    hidden = secret_parameters()
    query = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in hidden:
            if key in secrets:
                raise ConfigurationError(f"PgVectorStore: url gives {key} twice; give it once")
            if value:
                secrets[key] = SecretStr(value)
        else:
            query.append((key, value))
    clean = urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, quote_via=quote), parts.fragment))
    _check_options(clean, (key for key, _ in query))
    return clean, secrets


def _check_options(clean: str, keys: Iterable[str]) -> None:
    known = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults() if option.keyword is not None}
    for key in keys:
        # libpq's URI parser also takes `ssl=true` (sslmode=require, for JDBC URLs); it checks the value itself.
        if key not in known and key != "ssl":
            raise ConfigurationError(
                f"PgVectorStore: url has the unknown connection option {key!r}; libpq's options are listed at "
                f"{_KEYWORDS_URL}"
            )
    try:
        # libpq's own parser (the one connect() uses), on the URL without secrets: its message can name no secret.
        conninfo_to_dict(clean)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(f"PgVectorStore: url is not a valid libpq URL: {str(exc).strip()}") from None


def check_secret_names(names: Iterable[str]) -> None:
    """Raise `ConfigurationError` unless each of `names` is one of libpq's secret parameters."""
    allowed = secret_parameters() - {"password"}
    for name in names:
        if name not in allowed:
            raise ConfigurationError(
                f"PgVectorStore: secrets takes libpq's secret parameters other than the password "
                f"({', '.join(sorted(allowed))}), got {name!r}"
            )


def scrub(text: str, secrets: Mapping[str, SecretStr]) -> str:
    """`text` with each secret (as given and URL-quoted) replaced by '***'."""
    for secret in secrets.values():
        value = secret.get_secret_value()
        for form in sorted({value, quote(value, safe="")}, key=len, reverse=True):
            if form:
                text = text.replace(form, "***")
    return text
