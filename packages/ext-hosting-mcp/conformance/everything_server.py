"""The "everything" server the MCP conformance suite scores, built with ext-hosting-mcp: its tools are plain ext
tools (`FunctionTool`) that reach the client through `current_context()`; resources and prompts are the
distribution's own classes. The names and contents are the suite's (tools/mcp-conformance, server scenarios).

Run: `python everything_server.py --port 3001 [--redis-url redis://127.0.0.1:6379/0]`; serves /mcp on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import mcp_types as types

from ext.core import (
    AudioResultContent,
    CancellationToken,
    FunctionTool,
    Image,
    ImageResultContent,
    ResourceResultContent,
    TextResultContent,
    ToolResult,
    ToolSchema,
)
from ext.hosting.mcp import (
    McpServer,
    Prompt,
    Resource,
    ResourceTemplate,
    SessionStore,
    current_context,
    serve_http,
    streamable_http_app,
)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


def _context() -> Any:
    context = current_context()
    if context is None:
        raise RuntimeError("not inside a served call")
    return context


async def test_simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


async def test_image_content() -> ToolResult:
    """Tests image content response"""
    return ToolResult(
        name="test_image_content", result=[ImageResultContent(content=Image.from_base64(PNG, "image/png"))]
    )


async def test_audio_content() -> ToolResult:
    """Tests audio content response"""
    return ToolResult(
        name="test_audio_content", result=[AudioResultContent(data=base64.b64decode(WAV), mime_type="audio/wav")]
    )


async def test_embedded_resource() -> ToolResult:
    """Tests embedded resource content response"""
    return ToolResult(
        name="test_embedded_resource",
        result=[
            ResourceResultContent(
                uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
            )
        ],
    )


async def test_multiple_content_types() -> ToolResult:
    """Tests response with multiple content types (text, image, resource)"""
    return ToolResult(
        name="test_multiple_content_types",
        result=[
            TextResultContent(content="Multiple content types test:"),
            ImageResultContent(content=Image.from_base64(PNG, "image/png")),
            ResourceResultContent(
                uri="test://mixed-content-resource", mime_type="application/json", text='{"test": "data", "value": 123}'
            ),
        ],
    )


async def test_tool_with_logging() -> str:
    """Tests tool that emits log messages during execution"""
    context = _context()
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await context.log("info", text)
        await asyncio.sleep(0.02)  # the suite expects the entries spread over the call
    return "Tool with logging executed successfully"


async def test_tool_with_progress() -> str:
    """Tests tool that reports progress notifications"""
    context = _context()
    for step in (0, 50, 100):
        await context.progress(step, 100, f"Completed step {step} of 100")
        await asyncio.sleep(0.02)
    return str(context.progress_token if context.progress_token is not None else 0)


async def test_sampling(prompt: str) -> str:
    """Tests server-initiated sampling (LLM completion request)"""
    result = await _context().sample(prompt, max_tokens=100)
    content = result.content
    return f"LLM response: {content.text if isinstance(content, types.TextContent) else 'No response'}"


async def _elicit(message: str, schema: dict[str, Any]) -> tuple[str, str]:
    result = await _context().elicit(message, schema)
    content = json.dumps(result.content, separators=(",", ":")) if result.action == "accept" else "{}"
    return result.action, content


async def test_elicitation(message: str) -> str:
    """Tests server-initiated elicitation (user input request)"""
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    action, content = await _elicit(message, schema)
    return f"User response: action={action}, content={content}"


async def test_elicitation_sep1034_defaults() -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)"""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
    }
    action, content = await _elicit("Please provide user information", schema)
    return f"Elicitation result: action={action}, content={content}"


async def test_elicitation_sep1330_enums() -> str:
    """Tests elicitation with enum schema variations per SEP-1330"""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Simple enum",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Enum with titled options",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "description": "Legacy enum with enumNames",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Multi-select without titles",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Multi-select with titles",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
    }
    action, content = await _elicit("Please select values using different enum schema types", schema)
    return f"Elicitation completed: action={action}, content={content}"


async def test_error_handling() -> str:
    """Tests error response handling"""
    raise RuntimeError("This tool intentionally returns an error for testing")


async def test_reconnection() -> str:
    """Tests SSE polling by closing stream mid-call (SEP-1699)"""
    context = _context()
    await context.log("info", "Before disconnect")
    await context.close_stream()
    await asyncio.sleep(0.2)  # the client reconnects with Last-Event-ID meanwhile
    await context.log("info", "After reconnect")
    return "Reconnection test completed"


class JsonSchemaTool:
    """A tool whose argument schema uses JSON Schema 2020-12 keywords, listed as written (SEP-1613)."""

    name = "json_schema_2020_12_tool"
    description = "Tool with JSON Schema 2020-12 features"
    schema: ClassVar[ToolSchema] = {
        "name": name,
        "description": description,
        "parameters": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    }

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken | None = None, call_id: str | None = None
    ) -> Any:
        return json.dumps(dict(args))

    def return_value_as_string(self, value: Any) -> str:
        return str(value)


TOOLS: list[Callable[..., Any]] = [
    test_simple_text,
    test_image_content,
    test_audio_content,
    test_embedded_resource,
    test_multiple_content_types,
    test_tool_with_logging,
    test_tool_with_progress,
    test_sampling,
    test_elicitation,
    test_elicitation_sep1034_defaults,
    test_elicitation_sep1330_enums,
    test_error_handling,
    test_reconnection,
]


async def _template(variables: dict[str, str]) -> str:
    item = variables["id"]
    return json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})


def _embedded(arguments: dict[str, str]) -> list[str | types.PromptMessage]:
    return [
        types.PromptMessage(
            role="user",
            content=types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=arguments["resourceUri"], mime_type="text/plain", text="Embedded resource content for testing."
                ),
            ),
        ),
        "Please process the embedded resource above.",
    ]


def _image(_arguments: dict[str, str]) -> list[str | types.PromptMessage]:
    return [
        types.PromptMessage(role="user", content=types.ImageContent(type="image", data=PNG, mime_type="image/png")),
        "Please analyze the image above.",
    ]


def build_server() -> McpServer:
    return McpServer(
        [*(FunctionTool(f, description=f.__doc__) for f in TOOLS), JsonSchemaTool()],
        name="ext-everything-server",
        resources=[
            Resource(
                "test://static-text",
                "static-text",
                "This is the content of the static text resource.",
                description="A static text resource for testing",
                mime_type="text/plain",
            ),
            Resource(
                "test://static-binary",
                "static-binary",
                base64.b64decode(PNG),
                description="A static binary resource (image) for testing",
                mime_type="image/png",
            ),
            Resource(
                "test://watched-resource",
                "watched-resource",
                "Watched resource content",
                description="A resource that can be subscribed to for updates",
                mime_type="text/plain",
            ),
        ],
        resource_templates=[
            ResourceTemplate(
                "test://template/{id}/data",
                "template",
                _template,
                description="A resource template with parameter substitution",
                mime_type="application/json",
            ),
        ],
        prompts=[
            Prompt(
                "test_simple_prompt",
                lambda _a: ["This is a simple prompt for testing."],
                description="A simple prompt without arguments",
            ),
            Prompt(
                "test_prompt_with_arguments",
                lambda a: [f"Prompt with arguments: arg1='{a['arg1']}', arg2='{a['arg2']}'"],
                description="A prompt with required arguments",
                arguments=[
                    types.PromptArgument(name="arg1", description="First test argument", required=True),
                    types.PromptArgument(name="arg2", description="Second test argument", required=True),
                ],
            ),
            Prompt(
                "test_prompt_with_embedded_resource",
                _embedded,
                description="A prompt that includes an embedded resource",
                arguments=[
                    types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)
                ],
            ),
            Prompt("test_prompt_with_image", _image, description="A prompt that includes image content"),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=3001)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--stdio", action="store_true", help="serve one client over stdin/stdout instead")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.stdio:
        asyncio.run(build_server().run_stdio())
        return
    sessions: SessionStore | None = None
    if args.redis_url:
        from ext.hosting.mcp.redis import RedisSessionStore
        from ext.redis import RedisConnection

        sessions = RedisSessionStore(RedisConnection(args.redis_url))
    app = streamable_http_app(build_server(), sessions=sessions, retry_interval=100)
    asyncio.run(serve_http(app, port=args.port))  # SIGTERM/SIGINT: uvicorn's graceful shutdown


if __name__ == "__main__":
    main()
