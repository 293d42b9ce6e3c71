"""Scriptable loopback HTTP servers that speak LLM providers' wire protocols (127.0.0.1, ephemeral ports).

Example::

    async with OpenAIServer() as server:
        server.enqueue(Reply(text="hi"))
        client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        ...
"""

from ext.testing.script import Fault, NeutralMessage, NeutralRequest, NeutralToolResult, Reply, ToolCallSpec
from ext.testing.servers._base import (
    Headers,
    LoopbackServer,
    RecordedRequest,
    Response,
    Route,
    ScriptItem,
    StreamResponse,
    format_seconds,
    json_response,
    ndjson_frame,
    sse_frame,
)
from ext.testing.servers._embeddings import EmbeddingScript, embedding_tokens, embedding_vector
from ext.testing.servers.anthropic import AnthropicServer
from ext.testing.servers.azure_ai import AzureAIServer
from ext.testing.servers.bedrock import BedrockServer
from ext.testing.servers.ollama import OllamaServer
from ext.testing.servers.openai import OpenAIServer

__all__ = [
    "AzureAIServer",
    "AnthropicServer",
    "BedrockServer",
    "EmbeddingScript",
    "embedding_tokens",
    "embedding_vector",
    "Fault",
    "Headers",
    "LoopbackServer",
    "NeutralMessage",
    "NeutralRequest",
    "NeutralToolResult",
    "OpenAIServer",
    "OllamaServer",
    "RecordedRequest",
    "Reply",
    "Response",
    "Route",
    "ScriptItem",
    "StreamResponse",
    "ToolCallSpec",
    "format_seconds",
    "json_response",
    "ndjson_frame",
    "sse_frame",
]
