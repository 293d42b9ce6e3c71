"""Database URLs without their password: the password is split off into a `SecretStr`, so the URL a store keeps,
prints, logs and dumps never holds it."""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from pydantic import SecretStr

from ext.core import ConfigurationError

_SCHEMES = ("postgresql", "postgres")
_SECRET_PARAMS = ("password",)


def split_password(url: str) -> tuple[str, SecretStr | None]:
    """`url` without any password (userinfo or `?password=`), and that password."""
    if not isinstance(url, str) or not url:
        raise ConfigurationError("PgVectorStore: url must be a postgresql:// URL, got an empty value")
    parts = urlsplit(url)
    if parts.scheme not in _SCHEMES:
        raise ConfigurationError(
            f"PgVectorStore: url must start with postgresql:// or postgres://, got scheme {parts.scheme!r}"
        )
    password: str | None = None
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, secret = userinfo.partition(":")
        if sep:
            password = unquote(secret)
        netloc = f"{user}@{hostport}" if user else hostport
    query = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _SECRET_PARAMS:
            password = value
        else:
            query.append((key, value))
    clean = urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, quote_via=quote), parts.fragment))
    return clean, (SecretStr(password) if password else None)


def scrub(text: str, secret: SecretStr | None) -> str:
    """`text` with the secret (as given and URL-quoted) replaced by '***'."""
    if secret is None:
        return text
    value = secret.get_secret_value()
    for form in {value, quote(value, safe="")}:
        if form:
            text = text.replace(form, "***")
    return text
