"""Building clients and pipelines from configuration: what ext-core checks on its own, offline and with no
provider installed (the successful builds of real providers are in tests-integration/test_pipeline_wire.py)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from ext.core import ConfigurationError, ProviderInfo, provider_infos
from ext.pipeline import build_client, check_pipeline, load_pipeline, pipeline_from_config, provider_class

OPTIONS = {"endpoint": "https://api.example.com/v1", "default_model": "m"}
NOWHERE = ProviderInfo(
    name="nowhere",
    client="ext.models.nowhere:NowhereChatCompletionClient",
    distribution="ext-models-nowhere",
    model_parameter="model",
    example_model="m",
    auth="none",
)


def test_a_declared_provider_that_cannot_be_imported_names_the_install_from_a_clone() -> None:
    with pytest.raises(
        ConfigurationError, match=r"pip install -e packages/ext-models-nowhere \(from the root of a clone"
    ):
        provider_class("nowhere", providers={"nowhere": NOWHERE})
    assert NOWHERE.install_hint.startswith("pip install -e packages/ext-models-nowhere ")


def test_an_unknown_provider_says_how_to_install_from_a_clone() -> None:
    # No provider table in core: an unknown name gets the installed ones and the command that works from a clone.
    with pytest.raises(
        ConfigurationError, match=r"unknown provider 'llama_cpp'.*pip install -e packages/ext-models-llama-cpp"
    ):
        provider_class("llama_cpp", providers={})
    with pytest.raises(ConfigurationError, match="non-empty"):
        provider_class("  ")


def test_both_spellings_find_a_declaration() -> None:
    table = {"nowhere-else": NOWHERE.model_copy(update={"name": "nowhere-else"})}
    for spelling in ("nowhere-else", "nowhere_else", "Nowhere_Else"):
        with pytest.raises(ConfigurationError, match="is declared but its client cannot be imported"):
            provider_class(spelling, providers=table)


def test_ext_core_alone_declares_no_provider() -> None:
    if importlib.util.find_spec("ext.models") is None:  # ext-core's own environment
        assert dict(provider_infos()) == {}


# How a provider would be named in code: its distribution or import path, its short name as a string, the
# environment variables it reads. (Core may still mention a wire format or a model family in prose.)
_PROVIDER_NAMES = re.compile(
    r"ext[-.]models[-.][a-z]"
    r"|[\"'](openai|azure[-_]openai|anthropic|bedrock|ollama|llama[-_]cpp|azure[-_]ai)[\"']"
    r"|\b(OPENAI|ANTHROPIC|AZURE|AWS|OLLAMA)_[A-Z_]+",
    re.IGNORECASE,
)


def test_core_source_names_no_provider() -> None:
    # Each provider declares itself (ext.providers entry points); core's source names none of them.
    source = Path(__file__).resolve().parents[1] / "src"
    found = [
        f"{path.relative_to(source)}:{number}: {line.strip()}"
        for path in sorted(source.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _PROVIDER_NAMES.search(line)
    ]
    assert found == []
    assert _PROVIDER_NAMES.search('PROVIDERS = {"llama_cpp": ("ext-models-llama-cpp", ...)}')  # the old table


def test_bad_options_name_the_field() -> None:
    with pytest.raises(ConfigurationError, match=r"options\.endpoint"):
        build_client("ext.core.StaticWorkbench", {"endpoint": "ftp://x", "default_model": "m"})


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"options": {**OPTIONS, "api_key": "sk-in-the-file"}}, "client.options.api_key"),
        ({"args": {"azure_ad_token": "tok"}}, "client.args.azure_ad_token"),
        ({"args": {"aws_secret_key": "k"}}, "client.args.aws_secret_key"),
    ],
)
def test_secrets_in_the_file_are_refused(section: dict[str, object], path: str) -> None:
    config = {"client": {"provider": "openai", **section}}
    with pytest.raises(ConfigurationError, match=path) as caught:
        pipeline_from_config(config)
    assert "_env" in str(caught.value)
    assert "sk-in-the-file" not in str(caught.value)


def test_middleware_entries_are_checked() -> None:
    client = {"provider": "openai", "options": OPTIONS}
    with pytest.raises(ConfigurationError, match=r"middleware\[0\]: unknown middleware 'compress'"):
        pipeline_from_config({"client": client, "middleware": [{"compress": {}}]})
    with pytest.raises(ConfigurationError, match=r"middleware\[1\]\.retry"):
        pipeline_from_config({"client": client, "middleware": ["logging", {"retry": {"max_retries": -1}}]})
    with pytest.raises(ConfigurationError, match=r"middleware\[0\]\.logging"):
        pipeline_from_config({"client": client, "middleware": [{"logging": {"level": "LOUD"}}]})
    with pytest.raises(ConfigurationError, match="unknown keys"):
        pipeline_from_config({"client": client, "extra": 1})


def test_a_missing_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXT_TEST_UNSET_KEY", raising=False)
    config = {"client": {"provider": "openai", "options": {**OPTIONS, "api_key_env": "EXT_TEST_UNSET_KEY"}}}
    with pytest.raises(ConfigurationError, match="EXT_TEST_UNSET_KEY is not set"):
        pipeline_from_config(config)


def test_json_files_are_read_and_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "pipeline.json"
    bad.write_text('{"client": ')
    with pytest.raises(ConfigurationError, match=r"pipeline\.json: not valid JSON"):
        load_pipeline(bad)
    with pytest.raises(ConfigurationError, match="cannot read config file"):
        load_pipeline(tmp_path / "missing.json")
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([1, 2]))
    with pytest.raises(ConfigurationError, match="mapping at the top level"):
        load_pipeline(listed)


def test_yaml_without_pyyaml_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import yaml` raise ImportError, as where PyYAML is not installed (ext-core's own
    # environment has no PyYAML; the whole workspace's has it).
    monkeypatch.setitem(sys.modules, "yaml", None)
    path = tmp_path / "pipeline.yaml"
    path.write_text("client: {provider: openai}\n")
    with pytest.raises(ConfigurationError, match="pip install pyyaml"):
        load_pipeline(path)


# --- malformed files and secrets: every error names the file and the field, before anything is built ----------


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"client": {"provider": "openai", "config": [1, 2]}}, "client.config must be a mapping"),
        ({"client": {"provider": "openai", "options": "text"}}, "client.options must be a mapping"),
        ({"client": {"provider": "openai", "args": 3}}, "client.args must be a mapping"),
        (
            {"client": {"provider": "openai"}, "middleware": [{"logging": True}]},
            r"middleware\[0\]\.logging must be a mapping",
        ),
        ({"client": {"provider": "openai"}, "middleware": [7]}, r"middleware\[0\] must be a mapping"),
        ({"client": {"provider": "openai"}, "middleware": {"logging": {}}}, "middleware must be a list"),
        ({"client": ["openai"]}, "client must be a mapping"),
    ],
)
def test_malformed_pipeline_files_name_the_file_and_the_field(
    tmp_path: Path, document: dict[str, object], field: str
) -> None:
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    for check in (check_pipeline, load_pipeline):
        with pytest.raises(ConfigurationError, match=rf"^{re.escape(str(path))}: {field}"):
            check(path)


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.json"
    path.write_bytes(b'{"client": {"provider": "op\xffenai"}}')
    with pytest.raises(ConfigurationError, match=rf"^{re.escape(str(path))}: not UTF-8 text \(byte 27"):
        check_pipeline(path)


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"credential": "literal-key"}, "client.args.credential"),
        ({"headers": {"Authorization": "Bearer literal"}}, "client.args.headers.Authorization"),
        ({"default_headers": {"authorization": "Bearer literal"}}, "client.args.default_headers.authorization"),
        (
            {"extra": {"deep": [{"Proxy-Authorization": "Basic literal"}]}},
            r"client.args.extra.deep\[0\].Proxy-Authorization",
        ),
        ({"http": {"x-api-key": "literal"}}, "client.args.http.x-api-key"),
    ],
)
def test_secret_values_are_refused_by_name_at_any_depth(args: dict[str, object], path: str) -> None:
    # Refused before the provider is even looked up (none is installed in ext-core's own environment).
    with pytest.raises(ConfigurationError, match=rf"^{path}: a secret is not read from config files") as caught:
        pipeline_from_config({"client": {"provider": "openai", "args": args}})
    assert "literal" not in str(caught.value)


def test_secret_typed_fields_are_refused_at_any_depth() -> None:
    from pydantic import BaseModel, SecretStr

    from ext.pipeline._config_secrets import refuse_literal_secrets

    class Inner(BaseModel):
        passphrase: SecretStr | None = None
        labels: dict[str, str] = {}

    class Config(BaseModel):
        signing: Inner | None = None
        custom_headers: dict[str, SecretStr] | None = None
        keys: list[SecretStr] = []
        region: str = "x"

    refuse_literal_secrets({"signing": {"labels": {"team": "a"}}, "region": "eu"}, "client.config", Config)
    cases = {
        "client.config.signing.passphrase": {"signing": {"passphrase": "literal"}},
        "client.config.custom_headers.X-Trace": {"custom_headers": {"X-Trace": "literal"}},
        r"client.config.keys\[1\]": {"keys": [None, "literal"]},
    }
    for where, value in cases.items():
        with pytest.raises(ConfigurationError, match=rf"^{where}: a secret"):
            refuse_literal_secrets(value, "client.config", Config)
    with pytest.raises(ConfigurationError, match=r"^client.args.token_source: a secret"):
        refuse_literal_secrets({"token_source": "x"}, "client.args", Config, secret_fields=("token_source",))


def test_server_addresses_from_a_declaration() -> None:
    from ext.core import ServerAddress, address_from_url

    assert address_from_url("https://user:sk-in-the-url@api.example.com/v1") == ServerAddress("api.example.com", 443)
    assert address_from_url("http://10.0.0.5:8080") == ServerAddress("10.0.0.5", 8080)
    assert address_from_url("127.0.0.1:11434") == ServerAddress("127.0.0.1", 11434)  # Ollama's host form
    assert address_from_url("http://host:99999/v1") is None  # a port out of range
    assert address_from_url("") is None and address_from_url(None) is None

    class Client:
        base_url = "http://10.0.0.5:8080/v1"

    by_attribute = NOWHERE.model_copy(update={"server_url_attribute": "base_url"})
    assert by_attribute.address_of(Client()) == ServerAddress("10.0.0.5", 8080)
    assert NOWHERE.address_of(Client()) is None  # declares no address: in process
