"""The dump/load round trip every component must survive without losing a setting.

`assert_dump_round_trip(component)` dumps a component, loads the JSON text back, and checks that nothing was
lost: the loaded component dumps to the same thing, and its full config equals the original's (secret fields of
their own aside: dumps leave those out by design and an `*_env` field names where they come from). Set the
environment variables the dump refers to before calling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from pydantic import SecretStr

from ext.core import Component, ComponentError, ComponentModel, load_component

__all__ = ["assert_dump_round_trip", "plain_config"]

_C = TypeVar("_C", bound=Component[Any])


def plain_config(component: Component[Any]) -> Any:
    """A component's full config as plain data for comparing (never for printing): secret values inside mappings
    unwrapped; secret fields of their own left out, as dumps leave them out (an `*_env` field, or the provider's
    own credential chain, finds them again)."""
    config = component._to_config().model_dump()
    return {name: _unwrap(value) for name, value in config.items() if not isinstance(value, SecretStr)}


def _unwrap(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return ("secret", value.get_secret_value())
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unwrap(v) for v in value]
    return value


def _secrets(value: Any) -> list[str]:
    if isinstance(value, SecretStr):
        return [value.get_secret_value()]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _secrets(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _secrets(v)]
    return []


def assert_dump_round_trip(component: _C) -> _C:
    """Dump `component`, load it back from JSON text, and assert that no setting was lost and no secret written.

    Returns the loaded component (close it if it holds resources).
    """
    dump = component.dump_component()
    text = dump.model_dump_json()
    for secret in _secrets(component._to_config().model_dump()):
        assert secret not in text, f"a secret value of {type(component).__name__} is in its dump"
    loaded = load_component(text, type(component), allow=[type(component)])
    again = loaded.dump_component()
    # A secret field left out shows as absent in one dump and as None in the other: the same thing.
    first, second = (
        {**d.model_dump(), "config": {k: v for k, v in d.config.items() if v is not None}}
        for d in (ComponentModel.model_validate_json(text), again)
    )
    assert first == second, f"dump -> load -> dump changed:\n{first}\n{second}"
    before, after = plain_config(component), plain_config(loaded)
    lost = {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert not lost, f"settings lost or changed by dump -> load (field: (before, after)): {lost}"
    return loaded


def load_dumped_client(
    client: _C, environment: Callable[[_C], dict[str, str]], secret: str, monkeypatch: pytest.MonkeyPatch
) -> _C | None:
    """`client` through `assert_dump_round_trip`, with the environment variables its dump refers to
    (`environment(client)`) set; None when it refuses to be dumped. Refusing is right for a client built with
    objects a config cannot hold, if the refusal says why and does not show `secret`."""
    try:
        variables = environment(client)
    except ComponentError as exc:
        refusal = str(exc)
        assert "cannot be dumped" in refusal and secret not in refusal
        return None
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return assert_dump_round_trip(client)
