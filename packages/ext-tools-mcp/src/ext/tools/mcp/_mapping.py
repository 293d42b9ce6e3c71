"""Plain functions mapping MCP protocol types to ext-core types and back."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from mcp import types as mt
from pydantic import BaseModel, Field

from ext.core import (
    AssistantMessage,
    AudioResultContent,
    ChatOptions,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    Image,
    ImageResultContent,
    LLMMessage,
    ResourceResultContent,
    ResultContent,
    SystemMessage,
    TextResultContent,
    ToolResult,
    ToolSchema,
    UserMessage,
    normalize_parameters,
)

# --- tools ----------------------------------------------------------------------------------------


def tool_schema(tool: mt.Tool) -> ToolSchema:
    """An MCP tool as core's `ToolSchema` (the input schema normalized for model providers)."""
    return {
        "name": tool.name,
        "description": tool.description or tool.title or "",
        "parameters": normalize_parameters(tool.input_schema),
    }


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        # Some servers send URL-safe or unpadded base64.
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def result_content(block: mt.ContentBlock) -> ResultContent:
    """One MCP content block as a `ToolResult` part."""
    if isinstance(block, mt.TextContent):
        return TextResultContent(content=block.text)
    if isinstance(block, mt.ImageContent):
        data = _b64(block.data)
        mime = block.mime_type if block.mime_type.startswith("image/") else "image/png"
        return ImageResultContent(content=Image(data=data, mime_type=mime))
    if isinstance(block, mt.AudioContent):
        return AudioResultContent(data=_b64(block.data), mime_type=block.mime_type)
    if isinstance(block, mt.EmbeddedResource):
        return resource_content(block.resource)
    return ResourceResultContent(uri=str(block.uri), name=block.name, mime_type=block.mime_type)


def resource_content(contents: mt.TextResourceContents | mt.BlobResourceContents) -> ResourceResultContent:
    """Resource contents (embedded in a result, or read) as a `ResourceResultContent`."""
    if isinstance(contents, mt.TextResourceContents):
        return ResourceResultContent(uri=str(contents.uri), mime_type=contents.mime_type, text=contents.text)
    return ResourceResultContent(uri=str(contents.uri), mime_type=contents.mime_type, data=_b64(contents.blob))


def tool_result(name: str, result: mt.CallToolResult) -> ToolResult:
    """An MCP tool result as a `ToolResult`; `is_error` and structured content are kept.

    Structured content that is not a JSON object (allowed from protocol 2026-07-28) is wrapped as
    `{"result": value}`, the convention MCP servers use for non-object outputs.
    """
    structured = result.structured_content
    if structured is not None and type(structured) is not dict and not isinstance(structured, dict):
        structured = {"result": structured}
    blocks = result.content
    if len(blocks) == 1 and type(blocks[0]) is mt.TextContent:
        # The common single text answer, without the per-block dispatch.
        text = blocks[0].text
        parts: list[ResultContent] = [TextResultContent(content=text)]
    else:
        parts = [result_content(block) for block in blocks]
    return ToolResult(name=name, result=parts, is_error=result.is_error, structured_content=structured)


def error_result(name: str, message: str) -> ToolResult:
    return ToolResult(name=name, result=[TextResultContent(content=message)], is_error=True)


# --- prompts --------------------------------------------------------------------------------------


class PromptResult(BaseModel):
    """A prompt from `get_prompt`, as ext messages ready to send to a model."""

    description: str | None = None
    messages: list[LLMMessage] = Field(default_factory=list)


def _block_as_user_part(block: mt.ContentBlock) -> str | Image:
    part = result_content(block)
    if isinstance(part, ImageResultContent):
        return part.content
    return ToolResult(name="prompt", result=[part]).to_text()


def prompt_result(result: mt.GetPromptResult) -> PromptResult:
    """Prompt messages as ext messages. Images stay images in user turns; audio and binary resources
    become a short text placeholder, text resources their text."""
    messages: list[LLMMessage] = []
    for message in result.messages:
        part = _block_as_user_part(message.content)
        if message.role == "assistant":
            text = part if isinstance(part, str) else "[image]"
            messages.append(AssistantMessage(content=text))
        else:
            messages.append(UserMessage(content=part if isinstance(part, str) else [part]))
    return PromptResult(description=result.description, messages=messages)


# --- sampling -------------------------------------------------------------------------------------


class SamplingMappingError(ValueError):
    """A sampling request holds something an ext model client cannot take."""


_STOP_REASONS = {"stop": "endTurn", "length": "maxTokens", "function_calls": "toolUse"}


def _tool_result_text(block: mt.ToolResultContent) -> str:
    return ToolResult(name="tool", result=[result_content(c) for c in block.content]).to_text()


def sampling_messages(params: mt.CreateMessageRequestParams) -> list[LLMMessage]:
    """The messages of a sampling request as ext messages (system prompt first)."""
    out: list[LLMMessage] = []
    if params.system_prompt:
        out.append(SystemMessage(content=params.system_prompt))
    tool_names: dict[str, str] = {}
    for index, message in enumerate(params.messages):
        blocks = message.content if isinstance(message.content, list) else [message.content]
        if message.role == "assistant":
            calls = [b for b in blocks if isinstance(b, mt.ToolUseContent)]
            if calls:
                for call in calls:
                    tool_names[call.id] = call.name
                out.append(
                    AssistantMessage(
                        content=[
                            FunctionCall(id=c.id, name=c.name, arguments=json.dumps(c.input, ensure_ascii=False))
                            for c in calls
                        ]
                    )
                )
                continue
            texts = [b.text for b in blocks if isinstance(b, mt.TextContent)]
            if len(texts) != len(blocks):
                raise SamplingMappingError(f"messages[{index}]: assistant messages may hold only text or tool use")
            out.append(AssistantMessage(content="".join(texts)))
            continue
        results = [b for b in blocks if isinstance(b, mt.ToolResultContent)]
        if results:
            out.append(
                FunctionExecutionResultMessage(
                    content=[
                        FunctionExecutionResult(
                            call_id=r.tool_use_id,
                            name=tool_names.get(r.tool_use_id, ""),
                            content=_tool_result_text(r),
                            is_error=bool(r.is_error),
                        )
                        for r in results
                    ]
                )
            )
            blocks = [b for b in blocks if not isinstance(b, mt.ToolResultContent)]
            if not blocks:
                continue
        parts: list[str | Image] = []
        for block in blocks:
            if isinstance(block, mt.TextContent):
                parts.append(block.text)
            elif isinstance(block, mt.ImageContent):
                parts.append(Image(data=_b64(block.data), mime_type=block.mime_type))
            else:
                raise SamplingMappingError(f"messages[{index}]: {block.type} content is not supported by ext clients")
        if len(parts) == 1 and isinstance(parts[0], str):
            out.append(UserMessage(content=parts[0]))
        else:
            out.append(UserMessage(content=parts))
    return out


def sampling_tools(params: mt.CreateMessageRequestParams) -> list[ToolSchema]:
    return [tool_schema(tool) for tool in params.tools or []]


def sampling_tool_choice(params: mt.CreateMessageRequestParams) -> str:
    choice = params.tool_choice
    if choice is None or not params.tools:
        return "auto"
    mode = getattr(choice, "mode", None) or "auto"
    return str(mode)


def sampling_options(params: mt.CreateMessageRequestParams) -> ChatOptions:
    """max_tokens, temperature and stop sequences as `ChatOptions` (validated: out of range raises)."""
    return ChatOptions(
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        stop_sequences=list(params.stop_sequences) if params.stop_sequences else None,
    )


def sampling_result(
    result: CreateResult, model: str, *, with_tools: bool
) -> mt.CreateMessageResult | mt.CreateMessageResultWithTools:
    """A model's answer as the sampling result the server expects."""
    stop = _STOP_REASONS.get(result.finish_reason, result.finish_reason)
    if isinstance(result.content, str):
        if with_tools:
            return mt.CreateMessageResultWithTools(
                role="assistant", content=mt.TextContent(text=result.content), model=model, stop_reason=stop
            )
        return mt.CreateMessageResult(
            role="assistant", content=mt.TextContent(text=result.content), model=model, stop_reason=stop
        )
    if not with_tools:
        raise SamplingMappingError("the model asked for tool calls, but the sampling request offered no tools")
    blocks: list[mt.SamplingMessageContentBlock] = []
    for call in result.content:
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError:
            arguments = {}
        if not isinstance(arguments, dict):
            arguments = {"value": arguments}
        blocks.append(mt.ToolUseContent(id=call.id, name=call.name, input=arguments))
    return mt.CreateMessageResultWithTools(role="assistant", content=blocks, model=model, stop_reason="toolUse")


def model_name(client: Any) -> str:
    name = getattr(client, "model", None)
    return name if isinstance(name, str) and name else type(client).__name__


def roots_of(values: Sequence[mt.Root | str]) -> list[mt.Root]:
    out: list[mt.Root] = []
    for value in values:
        if isinstance(value, mt.Root):
            out.append(value)
        else:
            out.append(mt.Root(uri=value))  # type: ignore[arg-type]  # pydantic validates the file:// URL
    return out
