from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from ext.core import (
    AIClientOptions,
    ChatMessage,
    ChatOptions,
    VectorStoreOptions,
    check_http_url,
    check_stop_sequences,
)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", -0.1),
        ("temperature", 2.1),
        ("top_p", 1.5),
        ("frequency_penalty", -2.5),
        ("presence_penalty", 2.5),
        ("max_tokens", 0),
        ("top_k", 0),
        ("model_id", ""),
        ("stop_sequences", [""]),
    ],
)
def test_chat_options_out_of_range_names_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        ChatOptions(**{field: value})  # type: ignore[arg-type]
    assert info.value.errors()[0]["loc"] == (field,)


def test_chat_options_bounds_are_inclusive_and_typos_fail() -> None:
    options = ChatOptions(temperature=2.0, frequency_penalty=-2.0, presence_penalty=2.0, top_p=0.0)
    assert options.set_fields() == {
        "temperature": 2.0,
        "frequency_penalty": -2.0,
        "presence_penalty": 2.0,
        "top_p": 0.0,
    }
    with pytest.raises(ValidationError, match="temprature"):
        ChatOptions(temprature=1)  # type: ignore[call-arg]


def test_merged_over_defaults() -> None:
    base = ChatOptions(temperature=0.2, max_tokens=100)
    merged = ChatOptions(max_tokens=5, stop_sequences=["x"]).merged_over(base)
    assert merged.set_fields() == {"temperature": 0.2, "max_tokens": 5, "stop_sequences": ["x"]}
    assert ChatOptions(seed=1).merged_over(None).seed == 1


def test_chat_message_roles() -> None:
    assert ChatMessage(role="tool", content="x").role == "tool"
    with pytest.raises(ValidationError, match="role"):
        ChatMessage(role="robot", content="x")  # type: ignore[arg-type]


def test_ai_client_options_hide_key_and_validate() -> None:
    options = AIClientOptions(
        endpoint="https://h", api_key=SecretStr("sk-secret-123"), default_model="m", timeout=3, max_retries=0
    )
    assert "sk-secret-123" not in repr(options)
    assert "sk-secret-123" not in options.model_dump_json()
    assert options.api_key is not None and options.api_key.get_secret_value() == "sk-secret-123"
    with pytest.raises(ValidationError, match="endpoint"):
        AIClientOptions(endpoint="ftp://h", default_model="m")
    with pytest.raises(ValidationError, match="timeout"):
        AIClientOptions(endpoint="http://h", default_model="m", timeout=0)
    with pytest.raises(ValidationError) as info:
        AIClientOptions(endpoint="http://h", default_model="m", max_retries=-1, api_key=SecretStr("sk-secret-123"))
    assert "sk-secret-123" not in str(info.value)


def test_ai_client_options_from_env() -> None:
    env = {"X_ENDPOINT": "http://127.0.0.1:1", "X_API_KEY": "k", "X_DEFAULT_MODEL": "m", "X_TIMEOUT": "2.5"}
    options = AIClientOptions.from_env("X_", env)
    assert (options.endpoint, options.default_model, options.timeout, options.max_retries) == (
        "http://127.0.0.1:1",
        "m",
        2.5,
        None,
    )
    with pytest.raises(ValidationError, match="default_model"):
        AIClientOptions.from_env("X_", {"X_ENDPOINT": "http://h"})


def test_vector_store_options() -> None:
    options = VectorStoreOptions(endpoint="http://h", collection_name="docs", vector_size=384, api_key=SecretStr("k"))
    assert options.vector_size == 384 and "k'" not in repr(options)
    with pytest.raises(ValidationError, match="vector_size"):
        VectorStoreOptions(endpoint="http://h", collection_name="docs", vector_size=0)
    with pytest.raises(ValidationError, match="collection_name"):
        VectorStoreOptions(endpoint="http://h", collection_name="", vector_size=3)


def test_merge_default_options() -> None:
    from ext.core import ConfigurationError, merge_default_options

    assert merge_default_options(None, temperature=None) is None
    assert merge_default_options({"seed": 3}) == ChatOptions(seed=3)
    merged = merge_default_options({"temperature": 0.2, "seed": 3}, temperature=0.7, top_p=None)
    assert merged == ChatOptions(temperature=0.7, seed=3)
    with pytest.raises(ConfigurationError, match=r"default_options\.temperature"):
        merge_default_options({"temperature": 9})


def test_check_stop_sequences_names_the_field() -> None:
    assert check_stop_sequences(None) is None
    assert check_stop_sequences(["\n\n", "END"]) == ["\n\n", "END"]
    with pytest.raises(ValueError, match=r"^stop_sequences must not contain empty strings$"):
        check_stop_sequences(["END", ""])
    with pytest.raises(ValueError, match=r"^stop must not contain empty strings$"):
        check_stop_sequences([""], "stop")
    with pytest.raises(ValidationError, match="stop_sequences must not contain empty strings"):
        ChatOptions(stop_sequences=[""])


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "https://example.com"])
def test_check_http_url_accepts(url: str) -> None:
    assert check_http_url(url, "base_url") == url


@pytest.mark.parametrize(
    "url", ["", "example.com", "HTTPS://x", "ftp://example.com", "http://", "https:// host", "http:///path"]
)
def test_check_http_url_rejects_naming_the_field(url: str) -> None:
    with pytest.raises(ValueError, match=r"^endpoint must be an http:// or https:// URL$"):
        check_http_url(url, "endpoint")
