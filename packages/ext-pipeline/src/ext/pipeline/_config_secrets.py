"""Refusing secrets written in configuration files.

A value is a secret when the component that reads it says so: a `SecretStr` field of its config schema, at any
depth (a key, a header map of `dict[str, SecretStr]`, a nested config), or an argument its provider declaration
lists as secret. Whatever the schema says, the value of an `Authorization`-like header (any mapping key that
names a credential header) and a field named like a credential (`api_key`, `*_token`, ...) are secrets too.
A secret in a file must come from the environment instead (`<field>_env`).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Collection, Mapping
from typing import Any, Union

from pydantic import BaseModel, SecretStr

from ext.core import ConfigurationError

_SECRET_NAMES = frozenset({"api_key", "password", "secret", "token", "credential", "access_key", "secret_key"})
_SECRET_SUFFIXES = ("_api_key", "_secret", "_token", "_password", "_access_key", "_secret_key", "_credential")
# Header names whose value authenticates the caller (RFC 9110 Authorization / Proxy-Authorization, the API-key
# headers of the hosted APIs, cookies).
_CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-auth-token",
        "ocp-apim-subscription-key",
        "cookie",
    }
)


def is_secret_name(key: str) -> bool:
    """A field or header name that holds a credential whatever its type says."""
    lowered = key.strip().lower()
    if lowered.endswith("_env"):
        return False
    if lowered.replace("_", "-") in _CREDENTIAL_HEADERS or "authorization" in lowered:
        return True
    return lowered in _SECRET_NAMES or lowered.endswith(_SECRET_SUFFIXES)


def _members(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (Optional included), else the annotation alone; Annotated unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return tuple(m for arg in typing.get_args(annotation) for m in _members(arg))
    return (annotation,)


def _is_secret_type(annotation: Any) -> bool:
    return any(member is SecretStr for member in _members(annotation))


def _mapping_value_type(annotation: Any) -> Any:
    for member in _members(annotation):
        origin = typing.get_origin(member)
        if isinstance(origin, type) and issubclass(origin, Mapping):
            args = typing.get_args(member)
            return args[1] if len(args) == 2 else None
    return None


def _item_type(annotation: Any) -> Any:
    for member in _members(annotation):
        origin = typing.get_origin(member)
        if origin in (list, tuple, set, frozenset) or (
            isinstance(origin, type) and issubclass(origin, Collection) and not issubclass(origin, Mapping)
        ):
            args = typing.get_args(member)
            return args[0] if args else None
    return None


def _model_type(annotation: Any) -> type[BaseModel] | None:
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def _refuse(path: str, key: str) -> None:
    raise ConfigurationError(
        f"{path}: a secret is not read from config files; give it through the environment instead "
        f"(the {key}_env field naming the variable that holds it, where the component has one)"
    )


def _literal(value: Any) -> bool:
    return value is not None and value != "" and not isinstance(value, (Mapping, list, tuple))


def refuse_literal_secrets(
    value: Any,
    path: str,
    schema: type[BaseModel] | None = None,
    *,
    secret_fields: Collection[str] = (),
    component_schema: Any = None,
) -> None:
    """Raise `ConfigurationError` naming the path of the first secret written literally in `value`.

    `schema` is the config model `value` is read as (its `SecretStr` fields are secret at any depth);
    `secret_fields` are further top-level names the component marks as secret; `component_schema(provider)`
    gives the config model of a nested component dump (`{provider: ..., config: {...}}`), or None.
    """
    _walk(value, path, schema, frozenset(secret_fields), component_schema)


def _walk(value: Any, path: str, annotation: Any, extra: frozenset[str], component_schema: Any) -> None:
    if isinstance(value, Mapping):
        model = _model_type(annotation)
        value_type = _mapping_value_type(annotation)
        nested_dump = (
            model is None
            and isinstance(value.get("provider"), str)
            and isinstance(value.get("config"), Mapping)
            and component_schema is not None
        )
        for key, item in value.items():
            name = str(key)
            where = f"{path}.{name}" if path else name
            if model is not None:
                field = model.model_fields.get(name)
                item_type = field.annotation if field is not None else None
            elif nested_dump and name == "config":
                item_type = component_schema(value["provider"])
            else:
                item_type = value_type
            secret = name in extra or is_secret_name(name) or _is_secret_type(item_type)
            if secret and _literal(item):
                _refuse(where, name)
            _walk(item, where, item_type, frozenset(), component_schema)
    elif isinstance(value, (list, tuple)):
        item_type = _item_type(annotation)
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            if _is_secret_type(item_type) and _literal(item):
                _refuse(where, path.rsplit(".", 1)[-1])
            _walk(item, where, item_type, frozenset(), component_schema)
