from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr

from ext.core import (
    Component,
    ComponentError,
    ComponentModel,
    ConfigurationError,
    load_component,
    registered_components,
    require_secret,
    resolve_secret,
    resolve_secret_map,
)


class GreeterConfig(BaseModel):
    model_config = ConfigDict(hide_input_in_errors=True)

    greeting: str
    retries: int = 1
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    headers: dict[str, SecretStr] = {}
    headers_env: dict[str, str] = {}


class Greeter(Component[GreeterConfig]):
    component_type = "greeter"
    component_config_schema = GreeterConfig
    component_provider_override = "tests.Greeter"

    def __init__(
        self,
        greeting: str,
        retries: int = 1,
        api_key: str | None = None,
        api_key_env: str | None = None,
        headers: dict[str, str] | None = None,
        headers_env: dict[str, str] | None = None,
    ):
        self.greeting = greeting
        self.retries = retries
        self.api_key, self.api_key_env = resolve_secret(api_key, api_key_env)
        self.headers = {name: SecretStr(value) for name, value in (headers or {}).items()}
        self.headers_env = dict(headers_env or {})
        self.sent_headers = resolve_secret_map(self.headers, self.headers_env, "headers")

    def _to_config(self) -> GreeterConfig:
        return GreeterConfig(
            greeting=self.greeting,
            retries=self.retries,
            api_key=self.api_key,
            api_key_env=self.api_key_env,
            headers=self.headers,
            headers_env=self.headers_env,
        )

    @classmethod
    def _from_config(cls, config: GreeterConfig) -> Greeter:
        key = config.api_key.get_secret_value() if config.api_key else None
        headers = {name: value.get_secret_value() for name, value in config.headers.items()}
        return cls(config.greeting, config.retries, key, config.api_key_env, headers, config.headers_env)


class NotAComponent:
    pass


def test_dump_drops_secrets_and_keeps_env_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREETER_KEY", "sk-from-env-123")
    greeter = Greeter("hi", api_key_env="GREETER_KEY")
    assert greeter.api_key is not None and greeter.api_key.get_secret_value() == "sk-from-env-123"
    dump = greeter.dump_component()
    text = dump.model_dump_json()
    assert "sk-from-env-123" not in text and "hidden" not in text
    assert dump.config == {
        "greeting": "hi",
        "retries": 1,
        "api_key_env": "GREETER_KEY",
        "headers": {},
        "headers_env": {},
    }
    assert (dump.provider, dump.component_type, dump.label) == ("tests.Greeter", "greeter", "Greeter")

    loaded = load_component(dump, Greeter, allow=[Greeter])
    assert loaded.greeting == "hi"
    assert loaded.api_key is not None and loaded.api_key.get_secret_value() == "sk-from-env-123"


def test_explicit_secret_is_omitted() -> None:
    dump = Greeter("hi", api_key="sk-literal-456").dump_component()
    assert "sk-literal-456" not in json.dumps(dump.model_dump())
    assert "api_key" not in dump.config


def test_a_secret_inside_a_mapping_is_refused_not_silently_dropped() -> None:
    """A header's value is a secret a dump leaves out; dropping it (its name with it) would lose the setting."""
    greeter = Greeter("hi", headers={"X-Team": "blue"})
    with pytest.raises(ComponentError, match=r"headers\['X-Team'\] holds a secret value.*headers_env=") as info:
        greeter.dump_component()
    assert "blue" not in str(info.value)


def test_secret_mapping_entries_survive_as_environment_references(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_HEADER", "blue")
    greeter = Greeter("hi", headers_env={"X-Team": "TEAM_HEADER"})
    assert greeter.sent_headers == {"X-Team": "blue"}
    dump = greeter.dump_component()
    assert dump.config["headers_env"] == {"X-Team": "TEAM_HEADER"}
    assert "blue" not in dump.model_dump_json()
    loaded = load_component(dump.model_dump_json(), Greeter, allow=[Greeter])
    assert loaded.sent_headers == {"X-Team": "blue"}


def test_resolve_secret_map() -> None:
    env = {"A": "from-env", "EMPTY": ""}
    assert resolve_secret_map({"X": SecretStr("v")}, {"Y": "A"}, "headers", env) == {"X": "v", "Y": "from-env"}
    assert resolve_secret_map(None, None, "headers", env) == {}
    with pytest.raises(ConfigurationError, match=r"headers_env\['Y'\]: environment variable 'EMPTY' is not set"):
        resolve_secret_map(None, {"Y": "EMPTY"}, "headers", env)
    with pytest.raises(ConfigurationError, match="headers and headers_env both set 'X'"):
        resolve_secret_map({"X": SecretStr("v")}, {"X": "A"}, "headers", env)


def test_unregistered_provider_is_refused_with_a_clear_error() -> None:
    dump = Greeter("hi").dump_component()
    with pytest.raises(ComponentError, match=r"'tests\.Greeter' is not a registered ext component"):
        load_component(dump)
    with pytest.raises(ComponentError, match="not a registered"):
        load_component({"provider": "os.system", "config": {}})


def test_load_from_json_text_and_mapping() -> None:
    dump = Greeter("yo", retries=4).dump_component()
    assert load_component(dump.model_dump_json(), Greeter, allow=[Greeter]).retries == 4
    assert Greeter.load_component(dump.model_dump(), allow=[Greeter]).greeting == "yo"


def test_bad_configs_name_the_problem_without_values() -> None:
    with pytest.raises(ComponentError, match="not valid JSON"):
        load_component("{nope")
    with pytest.raises(ComponentError, match="provider"):
        load_component({"config": {}})
    bad = {"provider": "tests.Greeter", "config": {"retries": "many", "api_key": ["sk-leak-789"]}}
    with pytest.raises(ComponentError) as info:
        load_component(bad, allow=[Greeter])
    message = str(info.value)
    assert "greeting: Field required" in message and "retries" in message
    assert "sk-leak-789" not in message


def test_type_and_version_checks() -> None:
    class Other(Component[GreeterConfig]):
        component_config_schema = GreeterConfig

    dump = Greeter("x").dump_component()
    with pytest.raises(ComponentError, match="is not a Other"):
        load_component(dump, Other, allow=[Greeter])
    newer = dump.model_copy(update={"version": 9})
    with pytest.raises(ComponentError, match="newer"):
        load_component(newer, allow=[Greeter])
    with pytest.raises(ComponentError, match="not a Component"):
        load_component(ComponentModel(provider=f"{__name__}.NotAComponent", config={}), allow=[NotAComponent])


def test_registered_components_is_a_mapping() -> None:
    registry = registered_components()
    assert all(":" in target for target in registry.values())


def test_resolve_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_secret(None, None) == (None, None)
    assert resolve_secret(None, "NOPE_NOT_SET_X") == (None, None)
    secret, env = resolve_secret(None, "K", {"K": "v"})
    assert secret is not None and secret.get_secret_value() == "v" and env == "K"
    secret, env = resolve_secret(SecretStr("given"), "K", {"K": "v"})
    assert secret is not None and secret.get_secret_value() == "given" and env is None


def test_validate_config_names_owner_and_field_without_the_value() -> None:
    from ext.core import ConfigurationError, validate_config

    assert validate_config(GreeterConfig, {"greeting": "hi"}, "Greeter").greeting == "hi"
    with pytest.raises(ConfigurationError, match=r"^Greeter: retries: ") as info:
        validate_config(GreeterConfig, {"greeting": "hi", "retries": "sk-leak-000"}, "Greeter")
    assert "sk-leak-000" not in str(info.value)


def test_require_secret_returns_the_secret_or_says_what_to_pass() -> None:
    assert require_secret("k-1", None, "Owner").get_secret_value() == "k-1"
    with pytest.raises(ConfigurationError, match=r"^Owner: no API key: pass api_key=\.\.\.$"):
        require_secret(None, None, "Owner")
    with pytest.raises(ConfigurationError, match=r"^Owner: no API key: pass api_key=\.\.\. \(local\)$"):
        require_secret("", None, "Owner", hint=" (local)")  # an empty key is no key


def test_require_secret_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXT_TEST_REQUIRED_KEY", "from-env")
    assert require_secret(None, "EXT_TEST_REQUIRED_KEY", "Owner").get_secret_value() == "from-env"
    monkeypatch.setenv("EXT_TEST_REQUIRED_KEY", "")
    expected = r"^Owner: no credential: pass credential=<k> or set the EXT_TEST_REQUIRED_KEY environment variable$"
    with pytest.raises(ConfigurationError, match=expected):
        require_secret(None, "EXT_TEST_REQUIRED_KEY", "Owner", what="credential", argument="credential=<k>")
