"""Building clients and pipelines from configuration: what ext-core checks on its own, offline and with no
provider installed (the successful builds of real providers are in tests-integration/test_pipeline_wire.py)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from ext.core import (
    PROVIDERS,
    AIClientOptions,
    ConfigurationError,
    build_client,
    load_pipeline,
    pipeline_from_config,
    provider_class,
)

OPTIONS = {"endpoint": "https://api.example.com/v1", "default_model": "m"}


def test_a_missing_provider_names_the_pip_install() -> None:
    table = {"nowhere": ("ext-models-nowhere", "ext.models.nowhere.NowhereChatCompletionClient")}
    with pytest.raises(
        ConfigurationError, match=r"needs the ext-models-nowhere distribution.*pip install ext-models-nowhere"
    ):
        provider_class("nowhere", providers=table)
    assert PROVIDERS["openai"][0] == "ext-models-openai"


def test_every_uninstalled_provider_names_its_pip_install() -> None:
    # In ext-core's own environment none is installed; in the whole workspace's, only those not yet written.
    missing = 0
    for name, (distribution, _) in PROVIDERS.items():
        try:
            importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            missing += 1
            with pytest.raises(ConfigurationError, match=f"pip install {distribution}$"):
                build_client(name, AIClientOptions.model_validate(OPTIONS))
    if importlib.util.find_spec("ext.models") is None:  # ext-core's own environment: every provider is missing
        assert missing == len(PROVIDERS)


def test_an_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown provider 'nope'.*anthropic.*openai"):
        provider_class("nope")
    with pytest.raises(ConfigurationError, match="non-empty"):
        provider_class("  ")


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
    with pytest.raises(ConfigurationError, match=r"pipeline\.json is not valid JSON"):
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
