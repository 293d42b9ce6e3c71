"""Provider declarations: what each model provider's own distribution says about itself.

A provider distribution publishes one `ProviderInfo` per client under the `ext.providers` entry-point group
(`<name> = "<module>:<DECLARATION>"`). Building clients from configuration, the `ext` command and
telemetry read these declarations, so each fact (short name, install command, which argument takes the model,
the endpoint and its environment variable, where requests go) is written once, by its owner, and core names
no provider.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from ._errors import ConfigurationError

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ext.providers"


class ServerAddress(NamedTuple):
    """Where a client's requests go: host name and port (None when the port is not known)."""

    host: str
    port: int | None


class ProviderInfo(BaseModel):
    """One model provider, declared by the distribution that ships its client."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$", description="Short name, hyphenated: `azure-ai`.")
    client: str = Field(pattern=r"^[\w.]+:\w+$", description="The client class, `module:Class`.")
    distribution: str = Field(min_length=1, description="The distribution that ships the client.")
    model_parameter: str = Field(description="The constructor argument the model name goes to.")
    example_model: str = Field(description="An example MODEL for `-m NAME:MODEL`.")
    auth: str = Field(description="How the provider authenticates, in a few words (environment variables).")
    endpoint_parameter: str | None = Field(default=None, description="The constructor argument for the endpoint.")
    endpoint_env: str | None = Field(default=None, description="The environment variable the endpoint comes from.")
    key_env: str | None = Field(default=None, description="The environment variable the key comes from.")
    secret_arguments: tuple[str, ...] = Field(
        default=(),
        description="Constructor arguments that hold a secret although their type does not say so (a credential "
        "object or key): a config file must not give them literally.",
    )
    required_arguments: Mapping[str, Any] = Field(
        default_factory=dict,
        description="Arguments the client requires that a command line rarely gives, with a sensible value.",
    )
    server_url_attribute: str | None = Field(
        default=None,
        description="The attribute of a client instance holding the URL it sends to (`base_url`, `host`, ...).",
    )
    server_address: Callable[[Any], ServerAddress | None] | None = Field(
        default=None,
        exclude=True,
        description="Host and port a client instance sends to, where one attribute does not say it; with neither, "
        "the provider runs in process.",
    )

    def address_of(self, client: object) -> ServerAddress | None:
        """Host and port `client` (an instance of this provider's client) sends to; None in process."""
        if self.server_address is not None:
            return self.server_address(client)
        if self.server_url_attribute is not None:
            url = getattr(client, self.server_url_attribute, None)
            return address_from_url(url if isinstance(url, str) else None)
        return None

    @property
    def install_hint(self) -> str:
        """The command that installs this provider. The distributions are not on the package index yet, so it
        installs from a clone of the repository."""
        return (
            f"pip install -e packages/{self.distribution} (from the root of a clone of the ext repository; "
            "the distributions are not on the package index yet)"
        )

    def load_client_class(self) -> type[Any]:
        """The client class (imports the provider's SDK)."""
        from ._component import import_object

        try:
            cls = import_object(self.client)
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError(
                f"provider {self.name!r} is declared but its client cannot be imported ({exc}); reinstall it: "
                f"{self.install_hint}"
            ) from exc
        if not isinstance(cls, type):
            raise ConfigurationError(f"provider {self.name!r} declares {self.client}, which is not a class")
        return cls


def normalize_provider_name(name: str) -> str:
    """`llama_cpp`, `Llama-CPP` -> `llama-cpp`: both spellings are accepted everywhere, hyphens are canonical."""
    return name.strip().lower().replace("_", "-")


@lru_cache(maxsize=1)
def provider_infos() -> Mapping[str, ProviderInfo]:
    """Every installed provider's declaration, by short name. A declaration that cannot be loaded is logged and
    left out (its distribution is broken, which `provider_info` then reports as not installed)."""
    from importlib.metadata import entry_points  # only when asked: keeps importing ext.core fast

    found: dict[str, ProviderInfo] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            info = ep.load()
        except Exception as exc:  # a broken distribution must not hide the others
            logger.warning("the provider declaration %s (%s) cannot be loaded: %s", ep.name, ep.value, exc)
            continue
        if not isinstance(info, ProviderInfo):
            logger.warning("the provider declaration %s (%s) is not a ProviderInfo", ep.name, ep.value)
            continue
        found.setdefault(info.name, info)
    return dict(sorted(found.items()))


def provider_info(name: str, *, providers: Mapping[str, ProviderInfo] | None = None) -> ProviderInfo:
    """The declaration of the provider `name` (either spelling), or a `ConfigurationError` listing the installed
    ones and how to install another."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError("provider must be a non-empty provider name (`ext models` lists the installed ones)")
    table = provider_infos() if providers is None else providers
    info = table.get(normalize_provider_name(name))
    if info is None:
        raise ConfigurationError(unknown_provider_message(name, table))
    return info


def unknown_provider_message(name: str, providers: Mapping[str, ProviderInfo]) -> str:
    installed = ", ".join(providers) or "none"
    guess = normalize_provider_name(name)
    return (
        f"unknown provider {name.strip()!r} (installed: {installed}). A provider comes with its distribution, "
        f"which is not on the package index yet: from the root of a clone of the ext repository, pip install -e "
        f"packages/ext-models-{guess} (the usual name; the README's distribution table lists each provider's). "
        "A client registered under the 'ext.components' entry points can also be given by its path"
    )


def provider_of_client(client: object, *, providers: Mapping[str, ProviderInfo] | None = None) -> ProviderInfo | None:
    """The declaration whose client class `client` is an instance of (the most specific one), if any."""
    return provider_of_class(type(client), providers=providers)


def provider_of_class(cls: type[Any], *, providers: Mapping[str, ProviderInfo] | None = None) -> ProviderInfo | None:
    """The declaration of `cls` or of its nearest declared base class, if any. Only classes already imported are
    compared (an instance's class has been), so asking imports no provider."""
    table = provider_infos() if providers is None else providers
    depth = {base: index for index, base in enumerate(cls.__mro__)}
    best: tuple[int, ProviderInfo] | None = None
    for info in table.values():
        module, _, attr = info.client.partition(":")
        declared = getattr(sys.modules.get(module), attr, None)
        index = depth.get(declared) if isinstance(declared, type) else None
        if index is not None and (best is None or index < best[0]):
            best = (index, info)
    return best[1] if best is not None else None


def server_address(client: object, *, providers: Mapping[str, ProviderInfo] | None = None) -> ServerAddress | None:
    """Host and port `client` sends its requests to, as its provider declares; None when it runs in process or
    its provider is not declared."""
    info = provider_of_client(client, providers=providers)
    return info.address_of(client) if info is not None else None


def address_from_url(url: str | None) -> ServerAddress | None:
    """`https://user@host:8443/v1` -> ServerAddress('host', 8443); the scheme's port when none is written; never
    userinfo. None for text that is not a URL with a host."""
    from urllib.parse import urlsplit

    if not url:
        return None
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return ServerAddress(parts.hostname, port)


__all__ = [
    "ENTRY_POINT_GROUP",
    "ProviderInfo",
    "ServerAddress",
    "address_from_url",
    "normalize_provider_name",
    "provider_info",
    "provider_infos",
    "provider_of_class",
    "provider_of_client",
    "server_address",
    "unknown_provider_message",
]
