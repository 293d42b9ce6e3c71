"""End-to-end demo: a tool-calling exchange through OpenAIChatCompletionClient.

The model is ext-testing's OpenAI-protocol server on 127.0.0.1, scripted to ask for a tool call and
then to answer with whatever the tool returned, as read back from the request the client sent. No
network and no API key are needed. Run: `hatch run dev:python tools/demo.py`.
"""

from __future__ import annotations

import asyncio
import json

from ext.core import (
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    FunctionTool,
    LLMMessage,
    StaticWorkbench,
    SystemMessage,
    UserMessage,
)
from ext.models.openai import OpenAIChatCompletionClient
from ext.testing.servers import OpenAIServer, RecordedRequest, Reply, ToolCallSpec


def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city."""
    return f"{city}: 7 degrees {unit}, light rain"


def answer_from_tool_result(request: RecordedRequest) -> Reply:
    # The scripted "model" reads the tool result the client put on the wire and answers with it.
    body = request.json if isinstance(request.json, dict) else {}
    tool_messages = [m for m in body.get("messages", []) if m.get("role") == "tool"]
    return Reply(text=f"According to the weather tool: {tool_messages[-1]['content']}.")


async def main() -> None:
    workbench = StaticWorkbench([FunctionTool(get_weather)])
    async with OpenAIServer() as server:
        server.enqueue(
            Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})], prompt_tokens=52, completion_tokens=9),
            answer_from_tool_result,
        )
        client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=f"{server.base_url}/v1", api_key="sk-demo")
        async with client, workbench:
            messages: list[LLMMessage] = [
                SystemMessage(content="You answer weather questions with the get_weather tool."),
                UserMessage(content="What's the weather in Oslo?"),
            ]
            tools = await workbench.list_tools()
            print(f"user      > {messages[-1].content}")
            while True:
                result = await client.create(messages, tools=tools)
                if isinstance(result.content, str):
                    print(f"assistant > {result.content}")
                    break
                messages.append(result.to_assistant_message())
                outcomes = []
                for call in result.content:
                    print(f"tool call > {call.name}({call.arguments})")
                    out = await workbench.call_tool(call.name, json.loads(call.arguments))
                    print(f"tool      > {out.to_text()}")
                    outcomes.append(
                        FunctionExecutionResult(
                            call_id=call.id, name=call.name, content=out.to_text(), is_error=out.is_error
                        )
                    )
                messages.append(FunctionExecutionResultMessage(content=outcomes))
            usage = client.total_usage()
            print(f"usage     > {usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens")
            print(f"wire      > {len(server.requests)} requests to {server.base_url}{server.requests[0].path}")


if __name__ == "__main__":
    asyncio.run(main())
