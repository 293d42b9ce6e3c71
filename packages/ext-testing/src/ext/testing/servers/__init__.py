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
from ext.testing.servers._embedding_script import EmbeddingScript, embedding_tokens, embedding_vector
from ext.testing.servers.anthropic import AnthropicServer
from ext.testing.servers.azure_ai import AzureAIServer
from ext.testing.servers.bedrock import BedrockServer
from ext.testing.servers.ollama import OllamaServer
from ext.testing.servers.openai import OpenAIServer

__all__ = [
    # The servers
    "AnthropicServer",
    "AzureAIServer",
    "BedrockServer",
    "LoopbackServer",
    "OllamaServer",
    "OpenAIServer",
    # Scripting them (protocol-neutral replies and faults, and what a server decodes)
    "Fault",
    "NeutralMessage",
    "NeutralRequest",
    "NeutralToolResult",
    "Reply",
    "ScriptItem",
    "ToolCallSpec",
    # Their embeddings routes: the script and the values they answer with
    "EmbeddingScript",
    "embedding_tokens",
    "embedding_vector",
    # Requests, responses and routes (a test's own route, a callable script item)
    "Headers",
    "RecordedRequest",
    "Response",
    "Route",
    "StreamResponse",
    "format_seconds",
    "json_response",
    "ndjson_frame",
    "sse_frame",
]
