"""Every provider distribution declares itself (`ext.providers` entry points) and what it declares is true: the
declaration resolves to its client class, names the argument that takes the model, and gives the address a real
client sends to. Each client runs one call against ext-testing's loopback server for its provider, through
`OpenTelemetryMiddleware`, whose span must carry that address (telemetry reads the declarations; it imports no
provider). llama.cpp runs in process: it declares no address."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ext.core import (
    ConfigurationError,
    ServerAddress,
    UserMessage,
    provider_info,
    provider_infos,
    provider_of_client,
    server_address,
)
from ext.pipeline import ChatClientBuilder, build_client, check_pipeline, load_pipeline
from ext.telemetry.opentelemetry import OpenTelemetryMiddleware
from ext.testing.script import Reply
from ext.testing.servers import AnthropicServer, AzureAIServer, BedrockServer, OllamaServer, OpenAIServer

ALL = {"openai", "azure-openai", "anthropic", "bedrock", "ollama", "llama-cpp", "azure-ai"}


def test_every_provider_declares_itself_once() -> None:
    declared = provider_infos()
    assert set(declared) == ALL
    for name, info in declared.items():
        cls = info.load_client_class()
        assert info.model_parameter in inspect.signature(cls).parameters, name
        if info.endpoint_parameter is not None:
            assert info.endpoint_parameter in inspect.signature(cls).parameters, name
        assert info.install_hint.startswith(f"pip install -e packages/{info.distribution} ")
        # Both spellings find it.
        assert provider_info(name.replace("-", "_")) is info
    assert declared["llama-cpp"].server_address is None  # in process


# provider -> (server factory, constructor arguments for that server)
Case = tuple[Callable[[], AbstractAsyncContextManager[Any]], Callable[[Any], dict[str, Any]]]
CASES: dict[str, Case] = {
    "openai": (
        lambda: OpenAIServer(api_key="k"),
        lambda s: {"model": "gpt-4o-mini", "api_key": "k", "base_url": s.base_url + "/v1"},
    ),
    "azure_openai": (
        lambda: OpenAIServer(api_key="k"),
        lambda s: {"azure_deployment": "d", "azure_endpoint": s.base_url, "api_key": "k", "api_version": "2024-10-21"},
    ),
    "anthropic": (
        lambda: AnthropicServer(api_key="k"),
        lambda s: {"model": "claude-sonnet-4-5", "api_key": "k", "base_url": s.base_url, "max_tokens": 20},
    ),
    "bedrock": (
        lambda: BedrockServer(),
        lambda s: {
            "model": "anthropic.claude-sonnet-4-5-v1:0",
            "max_tokens": 20,
            "endpoint_url": s.base_url,
            "aws_region": s.region,
            "aws_access_key": s.access_key,
            "aws_secret_key": s.secret_key,
        },
    ),
    "ollama": (lambda: OllamaServer(), lambda s: {"model": "llama3.2", "host": s.base_url}),
    "azure-ai": (
        lambda: AzureAIServer(api_key="k"),
        lambda s: {"model": "m", "endpoint": s.base_url + "/models", "credential": "k"},
    ),
}


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.mark.parametrize("provider", list(CASES))
async def test_server_address_of_every_provider_over_the_wire(
    provider: str, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tracer_provider, exporter = spans
    make_server, arguments = CASES[provider]
    async with make_server() as server:
        server.enqueue(Reply(text="ok"))
        client = build_client(provider, None, **arguments(server))
        assert provider_of_client(client) is provider_info(provider)
        assert server_address(client) == ServerAddress("127.0.0.1", server.port)
        pipeline = ChatClientBuilder(client).use(OpenTelemetryMiddleware(tracer_provider=tracer_provider)).build()
        async with pipeline:
            result = await pipeline.create([UserMessage(content="Hi", source="user")])
        assert result.content == "ok"
        assert len(server.requests) == 1  # the call went to that address
    [span] = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert (attributes["server.address"], attributes["server.port"]) == ("127.0.0.1", server.port)


def test_llama_cpp_has_no_server_address() -> None:
    from ext.models.llama_cpp import LlamaCppChatCompletionClient

    info = provider_info("llama_cpp")
    assert info.load_client_class() is LlamaCppChatCompletionClient
    assert info.model_parameter == "model_path"
    assert info.server_address is None and info.server_url_attribute is None and info.endpoint_parameter is None


def test_config_check_builds_nothing_for_an_in_process_model(tmp_path: Path) -> None:
    # A llama.cpp config naming a GGUF file that does not exist: valid in shape (the check reads the declaration
    # and the constructor's signature; it opens no file), while building it fails on the missing file.
    path = tmp_path / "pipeline.json"
    missing = tmp_path / "no-such-model.gguf"
    path.write_text(json.dumps({"client": {"provider": "llama_cpp", "args": {"model_path": str(missing)}}}))
    found = check_pipeline(path)
    assert (found.provider, found.client, found.model) == ("llama-cpp", "LlamaCppChatCompletionClient", str(missing))
    with pytest.raises(ConfigurationError, match=r"no-such-model\.gguf"):
        load_pipeline(path)
