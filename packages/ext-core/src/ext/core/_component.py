"""Components: dump a client or tool to a plain config and build it again.

A dump is `ComponentModel(provider, config, ...)`, where `provider` is the public import path of the
class. Loading only accepts providers that an installed distribution registered under the
`ext.components` entry-point group (or that the caller allows explicitly), so a config file cannot
make ext import arbitrary code. Core never imports a provider until a config names it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import import_module
from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic_core import to_jsonable_python

from ._errors import ComponentError, ConfigurationError

ConfigT = TypeVar("ConfigT", bound=BaseModel)
T = TypeVar("T")


class ComponentModel(BaseModel):
    """A component as plain data: which class (`provider`) and its `config`."""

    model_config = ConfigDict(defer_build=True)

    provider: str = Field(min_length=1)
    component_type: str | None = None
    version: int = 1
    label: str | None = None
    description: str | None = None
    config: dict[str, Any]


class Component(Generic[ConfigT]):
    """Mixin for classes that can be dumped and loaded.

    A subclass sets `component_type`, `component_config_schema` (a pydantic model whose secret fields
    are `SecretStr`) and `component_provider_override` (its public path). Its constructor takes the config's
    fields as keywords, validates them as its config (`config_from_arguments(Config, locals(), owner)`) and keeps
    that object as `self._config`: then the default `_to_config` and `_from_config` are all it needs (override
    them to change what a dump holds, or for a component built from other components). Secrets are dropped from
    dumps: keep an `*_env` field naming the environment variable a secret came from so the loaded component
    finds it again.
    """

    component_type: ClassVar[str] = "component"
    component_config_schema: ClassVar[type[BaseModel]]
    component_provider_override: ClassVar[str | None] = None
    component_version: ClassVar[int] = 1
    component_label: ClassVar[str | None] = None

    def _to_config(self) -> ConfigT:
        """The config a dump holds: the one the component was built from (`self._config`)."""
        config = getattr(self, "_config", None)
        if not isinstance(config, BaseModel):
            raise ComponentError(
                f"{type(self).__name__} cannot be dumped to a config (it keeps none as _config and implements no "
                "_to_config)"
            )
        return cast("ConfigT", config)

    @classmethod
    def _from_config(cls, config: Any) -> Any:
        """The component `config` describes: the constructor called with the config's fields as keywords."""
        return cls(**config.model_dump())

    def _undumpable_settings(self) -> dict[str, str]:
        """Settings given in code that a config cannot hold (objects, callables), each with why; a dump of a
        component that has any is refused rather than silently losing them. Subclasses add theirs."""
        return {}

    def dump_component(self) -> ComponentModel:
        """This component as plain data, with every secret left out.

        Raises `ComponentError` when the dump would silently lose a setting: a secret inside a mapping (give
        it as an environment reference, e.g. `headers_env`) or an object given in code (`_undumpable_settings`).
        """
        undumpable = self._undumpable_settings()
        if undumpable:
            reasons = "; ".join(f"{name}: {why}" for name, why in undumpable.items())
            raise ComponentError(
                f"{type(self).__name__} cannot be dumped without losing settings given in code ({reasons}); "
                "build it in code instead"
            )
        config = self._to_config()
        provider = self.component_provider_override or f"{type(self).__module__}.{type(self).__qualname__}"
        return ComponentModel(
            provider=provider,
            component_type=self.component_type,
            version=self.component_version,
            label=self.component_label or type(self).__name__,
            config=cast("dict[str, Any]", to_jsonable_python(_drop_secrets(config.model_dump(), type(self).__name__))),
        )

    @classmethod
    def load_component(cls: type[T], model: ComponentModel | Mapping[str, Any] | str, **kwargs: Any) -> T:
        """Build an instance of this class (or a registered subclass) from a dump."""
        return load_component(model, cls, **kwargs)


def _drop_secrets(config: dict[str, Any], owner: str) -> dict[str, Any]:
    """`config` without its secret fields: a secret field of its own (top level, or one with an `*_env` sibling
    in a nested config) is left out, and the `*_env` field names where a loaded component finds it.

    A secret inside a mapping or a list (header values, environment variables of a subprocess) has no field of
    its own to leave out: dropping it would silently lose the setting, names included, so that is refused.
    """
    return cast("dict[str, Any]", _strip(config, "", owner, None, top=True))


def _strip(value: Any, path: str, owner: str, parent: Mapping[str, Any] | None, *, top: bool = False) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            where = f"{path}[{key!r}]" if path else str(key)
            if isinstance(item, SecretStr):
                if top or f"{key}_env" in value:
                    continue
                _refuse(where, owner, parent)
            out[key] = _strip(item, where, owner, value) if isinstance(item, (dict, list, tuple)) else item
        return out
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if isinstance(item, SecretStr):
                _refuse(f"{path}[{index}]", owner, parent)
        return [_strip(item, f"{path}[{index}]", owner, parent) for index, item in enumerate(value)]
    return value


def _refuse(path: str, owner: str, parent: Mapping[str, Any] | None) -> None:
    # The field holding the mapping: the last name before the final [key].
    field = path.rsplit("[", 1)[0].rsplit("[", 1)[-1].strip("'\"]")
    hint = (
        f"give it as an environment reference instead ({field}_env={{name: 'ENV_VAR'}})"
        if parent is not None and f"{field}_env" in parent
        else "set it in code after loading, or keep it out of the component"
    )
    raise ComponentError(
        f"{owner} cannot be dumped: {path} holds a secret value, which a dump leaves out, and leaving it out "
        f"would silently lose the setting; {hint}"
    )


def resolve_secret_map(
    values: Mapping[str, SecretStr] | None,
    env_refs: Mapping[str, str] | None,
    field: str,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Plain values of a mapping of secrets (`field`, e.g. headers) merged with those named by `env_refs`
    (`field_env`: name -> environment variable). A variable that is unset or empty is a `ConfigurationError`
    naming it; a name in both is refused (set it once)."""
    out = {name: value.get_secret_value() for name, value in (values or {}).items()}
    if not env_refs:
        return out
    env = os.environ if environ is None else environ
    for name, var in env_refs.items():
        if name in out:
            raise ConfigurationError(f"{field} and {field}_env both set {name!r}; set it once")
        if not isinstance(var, str) or not var:
            raise ConfigurationError(f"{field}_env[{name!r}] must name an environment variable, got {var!r}")
        found = env.get(var)
        if not found:
            raise ConfigurationError(f"{field}_env[{name!r}]: environment variable {var!r} is not set or empty")
        out[name] = found
    return out


def _dotted(value: str) -> str:
    return value.replace(":", ".")


@lru_cache(maxsize=1)
def registered_components() -> Mapping[str, str]:
    """Every provider path installed distributions registered: alias and dotted path -> `module:attr`."""
    from importlib.metadata import entry_points  # only when a config is loaded: keeps import fast

    found: dict[str, str] = {}
    for ep in entry_points(group="ext.components"):
        found[_dotted(ep.value)] = ep.value
        found.setdefault(ep.name, ep.value)
    return found


def import_object(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not attr:
        module_name, _, attr = target.rpartition(".")
    module = import_module(module_name)
    return getattr(module, attr)


def load_component(
    model: ComponentModel | Mapping[str, Any] | str,
    expected: type[T] | None = None,
    *,
    allow: Iterable[type[Any]] = (),
) -> T:
    """Build a component from a dump (a `ComponentModel`, a mapping, or JSON text).

    `provider` must be registered by an installed distribution, or be one of the classes in `allow`.
    With `expected`, the result must be an instance of it.
    """
    if isinstance(model, str):
        try:
            model = json.loads(model)
        except json.JSONDecodeError as exc:
            raise ComponentError(f"component config is not valid JSON: {exc.msg}") from None
    if not isinstance(model, ComponentModel):
        try:
            model = ComponentModel.model_validate(model)
        except ValidationError as exc:
            raise ComponentError(f"component config is malformed: {_errors_text(exc)}") from None

    provider = model.provider
    allowed = {f"{c.__module__}.{c.__qualname__}": c for c in allow}
    allowed.update({getattr(c, "component_provider_override", None) or "": c for c in allow})
    cls: Any
    if provider in allowed and provider:
        cls = allowed[provider]
    else:
        registry = registered_components()
        target = registry.get(provider) or registry.get(_dotted(provider))
        if target is None:
            raise ComponentError(
                f"provider {provider!r} is not a registered ext component; install the distribution that "
                "provides it (it registers under the 'ext.components' entry point group) or pass it in allow="
            )
        try:
            cls = import_object(target)
        except (ImportError, AttributeError) as exc:
            raise ComponentError(f"provider {provider!r} is registered but cannot be imported: {exc}") from exc

    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise ComponentError(f"provider {provider!r} is not a Component class")
    if expected is not None and not issubclass(cls, expected):
        raise ComponentError(f"provider {provider!r} is not a {expected.__name__}")
    if model.version > cls.component_version:
        raise ComponentError(
            f"config version {model.version} of {provider!r} is newer than this install understands "
            f"({cls.component_version}); upgrade the distribution"
        )
    try:
        config = cls.component_config_schema.model_validate(model.config)
    except ValidationError as exc:
        raise ComponentError(f"invalid config for {provider!r}: {_errors_text(exc)}") from None
    return cast("T", cls._from_config(config))


def validate_config(config_cls: type[ConfigT], values: Mapping[str, Any], owner: str) -> ConfigT:
    """`values` validated as `config_cls`; the first problem becomes a `ConfigurationError` naming
    `owner` and the field, never echoing the input (it may be a secret)."""
    try:
        return config_cls.model_validate(dict(values))
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigurationError(f"{owner}: {loc}: {msg}" if loc else f"{owner}: {msg}") from None


def _errors_text(exc: ValidationError) -> str:
    # Never echo input values: a misplaced secret would end up in the message.
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors(include_input=False, include_url=False)
    )


def resolve_secret(
    value: str | SecretStr | None,
    env_var: str | None,
    environ: Mapping[str, str] | None = None,
) -> tuple[SecretStr | None, str | None]:
    """A secret given as an argument, else read from `env_var`.

    Returns the secret and the name of the environment variable it came from (None when it was
    passed in), so a dump can refer to the variable instead of holding the value.
    """
    if value is not None:
        return (value if isinstance(value, SecretStr) else SecretStr(value)), None
    if env_var:
        env = os.environ if environ is None else environ
        found = env.get(env_var)
        if found:
            return SecretStr(found), env_var
    return None, None


def require_secret(
    value: str | SecretStr | None,
    env_var: str | None,
    owner: str,
    *,
    what: str = "API key",
    argument: str = "api_key=...",
    hint: str = "",
) -> SecretStr:
    """The non-empty secret `resolve_secret` finds, else a `ConfigurationError` before any request, saying what
    to pass and which environment variable to set: `"{owner}: no {what}: pass {argument} or set the {env_var}
    environment variable{hint}"` (no variable part when `env_var` is None)."""
    secret, _ = resolve_secret(value, env_var)
    if secret is None or not secret.get_secret_value():
        where = f" or set the {env_var} environment variable" if env_var else ""
        raise ConfigurationError(f"{owner}: no {what}: pass {argument}{where}{hint}")
    return secret
