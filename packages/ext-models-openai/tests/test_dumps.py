"""Dumps of the four clients keep their shape: each config dict is compared with one captured from the code before
the chat and embedding clients shared their connection settings (issue 34). A field moved, renamed, dropped or
given another default shows here, before a saved config stops loading."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ext.core import Component, load_component
from ext.models.openai import (
    AzureOpenAIChatCompletionClient,
    AzureOpenAIEmbeddingClient,
    OpenAIChatCompletionClient,
    OpenAIEmbeddingClient,
)

AZURE = "https://r.openai.azure.com"

CASES: dict[str, Callable[[], Component[Any]]] = {
    "openai_chat_default": lambda: OpenAIChatCompletionClient("gpt-4o", api_key="sk-test"),
    "openai_chat_full": lambda: OpenAIChatCompletionClient(
        "gpt-4o-mini",
        api_key="sk-test",
        api_key_env="MY_KEY",
        organization="org-1",
        project="proj-1",
        base_url="http://127.0.0.1:9/v1",
        timeout=12.5,
        max_retries=1,
        temperature=0.5,
        top_p=0.9,
        max_tokens=20,
        frequency_penalty=0.1,
        presence_penalty=0.2,
        seed=7,
        stop="END",
        user="u1",
        reasoning_effort="low",
        parallel_tool_calls=False,
        tool_calling="prompt",
        include_usage=False,
        system_role="developer",
        default_headers_env={"X-Trace": "TRACE_VAR"},
        extra_body={"a": 1},
        model_info={"vision": True},
        token_limit=1000,
        default_options={"temperature": 0.3},
        tiktoken_cache_dir="/tmp/tk",
        bundled_encodings=False,
        allow_encoding_download=True,
    ),
    "azure_chat_key": lambda: AzureOpenAIChatCompletionClient(
        azure_deployment="dep", api_version="2024-10-21", azure_endpoint=AZURE, api_key="k"
    ),
    "azure_chat_token": lambda: AzureOpenAIChatCompletionClient(
        azure_deployment="dep",
        api_version="2024-10-21-preview",
        azure_endpoint=AZURE,
        model="gpt-4o",
        azure_ad_token="tok",
        azure_ad_token_env=None,
        api_key_env="AK",
        timeout=5,
        max_retries=0,
        temperature=0.0,
        stop=["x", "y"],
        default_headers_env={"H": "V"},
    ),
    "openai_embed_default": lambda: OpenAIEmbeddingClient(api_key="sk-test"),
    "openai_embed_full": lambda: OpenAIEmbeddingClient(
        "text-embedding-3-large",
        api_key="sk",
        api_key_env=None,
        organization="o",
        project="p",
        base_url="http://127.0.0.1:9/v1",
        dimensions=256,
        batch_size=100,
        user="u",
        timeout=3.0,
        max_retries=5,
    ),
    "azure_embed_key": lambda: AzureOpenAIEmbeddingClient(
        azure_deployment="emb", api_version="2024-10-21", azure_endpoint=AZURE, api_key="k"
    ),
    "azure_embed_token": lambda: AzureOpenAIEmbeddingClient(
        azure_deployment="emb",
        api_version="2024-10-21",
        azure_endpoint=AZURE,
        model="text-embedding-3-small",
        azure_ad_token="t",
        dimensions=64,
        batch_size=10,
        user="u",
        timeout=9,
        max_retries=2,
    ),
}

# The chat settings every chat case holds at their defaults unless it says otherwise.
CHAT_DEFAULTS: dict[str, Any] = {
    "timeout": 60.0,
    "max_retries": 3,
    "temperature": None,
    "top_p": None,
    "max_tokens": None,
    "frequency_penalty": None,
    "presence_penalty": None,
    "seed": None,
    "stop": None,
    "user": None,
    "reasoning_effort": None,
    "parallel_tool_calls": None,
    "tool_calling": None,
    "include_usage": True,
    "system_role": "auto",
    "default_headers": None,
    "default_headers_env": None,
    "extra_body": None,
    "model_info": None,
    "token_limit": None,
    "default_options": None,
    "tiktoken_cache_dir": None,
    "bundled_encodings": True,
    "allow_encoding_download": False,
}

GOLDEN: dict[str, tuple[str, dict[str, Any]]] = {
    "openai_chat_default": (
        "ext.models.openai.OpenAIChatCompletionClient",
        {
            **CHAT_DEFAULTS,
            "model": "gpt-4o",
            "api_key": None,
            "api_key_env": "OPENAI_API_KEY",
            "organization": None,
            "project": None,
            "base_url": None,
        },
    ),
    "openai_chat_full": (
        "ext.models.openai.OpenAIChatCompletionClient",
        {
            "timeout": 12.5,
            "max_retries": 1,
            "temperature": 0.5,
            "top_p": 0.9,
            "max_tokens": 20,
            "frequency_penalty": 0.1,
            "presence_penalty": 0.2,
            "seed": 7,
            "stop": ["END"],
            "user": "u1",
            "reasoning_effort": "low",
            "parallel_tool_calls": False,
            "tool_calling": "prompt",
            "include_usage": False,
            "system_role": "developer",
            "default_headers": None,
            "default_headers_env": {"X-Trace": "TRACE_VAR"},
            "extra_body": {"a": 1},
            "model_info": {"vision": True},
            "token_limit": 1000,
            "default_options": {"temperature": 0.3},
            "tiktoken_cache_dir": "/tmp/tk",
            "bundled_encodings": False,
            "allow_encoding_download": True,
            "model": "gpt-4o-mini",
            "api_key": None,
            "api_key_env": "MY_KEY",
            "organization": "org-1",
            "project": "proj-1",
            "base_url": "http://127.0.0.1:9/v1",
        },
    ),
    "azure_chat_key": (
        "ext.models.openai.AzureOpenAIChatCompletionClient",
        {
            **CHAT_DEFAULTS,
            "azure_deployment": "dep",
            "api_version": "2024-10-21",
            "azure_endpoint": "https://r.openai.azure.com",
            "model": None,
            "api_key": None,
            "api_key_env": "AZURE_OPENAI_API_KEY",
            "azure_ad_token": None,
            "azure_ad_token_env": "AZURE_OPENAI_AD_TOKEN",
        },
    ),
    "azure_chat_token": (
        "ext.models.openai.AzureOpenAIChatCompletionClient",
        {
            **CHAT_DEFAULTS,
            "timeout": 5.0,
            "max_retries": 0,
            "temperature": 0.0,
            "stop": ["x", "y"],
            "default_headers_env": {"H": "V"},
            "azure_deployment": "dep",
            "api_version": "2024-10-21-preview",
            "azure_endpoint": "https://r.openai.azure.com",
            "model": "gpt-4o",
            "api_key": None,
            "api_key_env": "AK",
            "azure_ad_token": None,
            "azure_ad_token_env": None,
        },
    ),
    "openai_embed_default": (
        "ext.models.openai.OpenAIEmbeddingClient",
        {
            "dimensions": None,
            "batch_size": None,
            "user": None,
            "timeout": 60.0,
            "max_retries": 3,
            "model": "text-embedding-3-small",
            "api_key": None,
            "api_key_env": "OPENAI_API_KEY",
            "organization": None,
            "project": None,
            "base_url": None,
        },
    ),
    "openai_embed_full": (
        "ext.models.openai.OpenAIEmbeddingClient",
        {
            "dimensions": 256,
            "batch_size": 100,
            "user": "u",
            "timeout": 3.0,
            "max_retries": 5,
            "model": "text-embedding-3-large",
            "api_key": None,
            "api_key_env": None,
            "organization": "o",
            "project": "p",
            "base_url": "http://127.0.0.1:9/v1",
        },
    ),
    "azure_embed_key": (
        "ext.models.openai.AzureOpenAIEmbeddingClient",
        {
            "dimensions": None,
            "batch_size": None,
            "user": None,
            "timeout": 60.0,
            "max_retries": 3,
            "azure_deployment": "emb",
            "api_version": "2024-10-21",
            "azure_endpoint": "https://r.openai.azure.com",
            "model": None,
            "api_key": None,
            "api_key_env": "AZURE_OPENAI_API_KEY",
            "azure_ad_token": None,
            "azure_ad_token_env": "AZURE_OPENAI_AD_TOKEN",
        },
    ),
    "azure_embed_token": (
        "ext.models.openai.AzureOpenAIEmbeddingClient",
        {
            "dimensions": 64,
            "batch_size": 10,
            "user": "u",
            "timeout": 9.0,
            "max_retries": 2,
            "azure_deployment": "emb",
            "api_version": "2024-10-21",
            "azure_endpoint": "https://r.openai.azure.com",
            "model": "text-embedding-3-small",
            "api_key": None,
            "api_key_env": "AZURE_OPENAI_API_KEY",
            "azure_ad_token": None,
            "azure_ad_token_env": "AZURE_OPENAI_AD_TOKEN",
        },
    ),
}


@pytest.fixture(autouse=True)
def header_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACE_VAR", "t")
    monkeypatch.setenv("V", "v")


@pytest.mark.parametrize("case", list(CASES))
async def test_dump_is_the_captured_one(case: str) -> None:
    provider, config = GOLDEN[case]
    client: Any = CASES[case]()
    dump = client.dump_component()
    await client.close()
    assert dump.provider == provider
    assert dump.config == config


# openai_embed_full names no key variable (api_key_env=None): its dump cannot load without a key, by design.
@pytest.mark.parametrize("case", [case for case in CASES if case != "openai_embed_full"])
async def test_a_loaded_client_dumps_the_same(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The dump holds no secret: the loaded client reads them from the variables the dump names.
    for name in ("OPENAI_API_KEY", "MY_KEY", "AZURE_OPENAI_API_KEY", "AK"):
        monkeypatch.setenv(name, "from-env")
    client: Any = CASES[case]()
    loaded: Any = load_component(client.dump_component())
    await client.close()
    assert type(loaded) is type(client)
    assert loaded.dump_component().config == GOLDEN[case][1]
    await loaded.close()
