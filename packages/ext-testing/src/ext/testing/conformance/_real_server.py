"""Conformance cases for a `ChatCompletionClient` against a real model server, with nothing scripted.

`ChatClientConformance` scripts each reply on a loopback server; a real server answers with what its model
generates. These cases ask questions a small instruct model answers at temperature 0 (SmolLM2-135M-Instruct:
"Paris") and check the values it really produces, through the client's whole path: the SDK, the socket, the
server's own request validation, chat template, sampler and stream framing.

Subclass it in a provider package's tests, and provide a `real_server` fixture (usually session-scoped, e.g.
`ext.testing.llama_server.start_llama_server`) whose value `make_client` receives::

    class TestOpenAIOnLlamaServer(RealServerConformance):
        timeout_error = openai.APITimeoutError
        bad_request_error = openai.BadRequestError
        features = frozenset({"tool_choice_named", "tool_choice_none", "json_mode"})
        not_applicable = {"stream_usage": "the server sends no usage in streams", ...}

        def make_client(self, server: LlamaServer, **kwargs: Any) -> ChatCompletionClient:
            return OpenAIChatCompletionClient("smollm2", base_url=server.base_url, api_key="none", **kwargs)

Every feature in :data:`REAL_SERVER_FEATURES` is either declared in `features` or listed in `not_applicable`
with the reason (a case checks this), so a case that cannot apply is skipped saying why, never silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from ext.core import (
    AssistantMessage,
    CancellationToken,
    ChatCompletionClient,
    ChatOptions,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    StreamChunk,
    SystemMessage,
    UserMessage,
    parse_tool_arguments,
)
from ext.testing.conformance._chat import City
from ext.testing.sample_inputs import ADD, MULTIPLY

__all__ = ["REAL_SERVER_FEATURES", "RealServerConformance"]

REAL_SERVER_FEATURES = frozenset(
    {
        "stream_usage",  # a streamed reply ends with the token usage
        "tool_choice_auto",  # with tools and tool_choice="auto" the model calls a tool when asked to
        "tool_choice_required",
        "tool_choice_named",
        "tool_choice_none",
        "tool_results_in_prompt",  # a tool's result reaches the model on the next turn
        "json_mode",  # json_output=True gives a JSON object
        "structured_output",  # json_output=<pydantic model> gives that model
    }
)


class RealServerConformance:
    """Cases for a client against a real, unscripted model server. See the module docstring."""

    timeout_error: ClassVar[type[BaseException] | tuple[type[BaseException], ...]]
    bad_request_error: ClassVar[type[BaseException] | tuple[type[BaseException], ...]]
    """What the client raises when the server refuses a request (here: a prompt longer than its context)."""
    features: ClassVar[frozenset[str]] = frozenset()
    not_applicable: ClassVar[dict[str, str]] = {}
    """Feature -> why it cannot apply to this client on this server."""
    question: ClassVar[str] = "What is the capital of France?"
    answer: ClassVar[str] = "Paris"
    """A word the model's temperature-0 answer to `question` contains."""
    system_fact: ClassVar[tuple[str, str, str]] = ("Your name is Ziggy.", "What is your name?", "Ziggy")
    """(system message, question, a word of the answer that only the system message gives)."""
    json_key: ClassVar[str] = "capital"
    """JSON mode asks `question` for an object like {json_key: "..."} and expects `answer` under the key."""
    max_tokens: ClassVar[int] = 24
    """The cap on each case's completion (a real model on a shared CPU: keep each create short)."""
    context_tokens: ClassVar[int] = 2048
    """The server's context window: a prompt well past it must be refused."""

    # --- what a subclass provides ---------------------------------------------------------------

    def make_client(self, server: Any, **kwargs: Any) -> ChatCompletionClient:
        """A client of `server` (the `real_server` fixture's value); pass `kwargs` (timeout, max_retries) on."""
        raise NotImplementedError

    # --- fixtures and helpers -------------------------------------------------------------------------

    @pytest_asyncio.fixture
    async def client(self, real_server: Any) -> AsyncIterator[ChatCompletionClient]:
        c = self.make_client(real_server, max_retries=0)
        try:
            yield c
        finally:
            await c.close()

    def _need(self, feature: str) -> None:
        if feature not in REAL_SERVER_FEATURES:
            raise AssertionError(f"unknown real-server feature {feature!r}")
        if feature not in self.features:
            why = self.not_applicable.get(feature, "neither declared nor given a reason (see the declaration case)")
            pytest.skip(f"not applicable to {type(self).__name__}: {why}")

    def _options(self, **fields: Any) -> ChatOptions:
        return ChatOptions(**{"temperature": 0.0, "max_tokens": self.max_tokens, "seed": 1, **fields})

    def _ask(self, text: str | None = None) -> list[LLMMessage]:
        return [UserMessage(content=text or self.question)]

    # --- the declaration itself -------------------------------------------------------------------------

    def test_every_feature_is_declared_or_has_a_reason(self) -> None:
        unknown = (self.features | set(self.not_applicable)) - REAL_SERVER_FEATURES
        assert not unknown, f"unknown real-server features {sorted(unknown)}"
        undecided = REAL_SERVER_FEATURES - self.features - set(self.not_applicable)
        assert not undecided, f"declare {sorted(undecided)} in features, or give the reason in not_applicable"
        assert not self.features & set(self.not_applicable), "a feature is either declared or not applicable"
        assert all(reason.strip() for reason in self.not_applicable.values())

    # --- text, usage, finish reasons ------------------------------------------------------------------

    async def test_text_create(self, client: ChatCompletionClient) -> None:
        result = await client.create(self._ask(), options=self._options())
        assert isinstance(result.content, str) and self.answer in result.content
        assert result.finish_reason == "stop"
        assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
        assert result.cached is False
        assert client.actual_usage() == result.usage

    async def test_same_answer_and_usage_each_time(self, client: ChatCompletionClient) -> None:
        first = await client.create(self._ask(), options=self._options())
        second = await client.create(self._ask(), options=self._options())
        assert first.content == second.content  # temperature 0: the same prompt, the same answer
        assert first.usage == second.usage
        total = client.total_usage()
        assert (total.prompt_tokens, total.completion_tokens) == (
            2 * first.usage.prompt_tokens,
            2 * first.usage.completion_tokens,
        )

    async def test_finish_reason_length(self, client: ChatCompletionClient) -> None:
        result = await client.create(self._ask(), options=self._options(max_tokens=2))
        assert result.finish_reason == "length"
        assert result.usage.completion_tokens == 2

    async def test_stop_sequence_ends_the_answer(self, client: ChatCompletionClient) -> None:
        result = await client.create(self._ask(), options=self._options(stop_sequences=[self.answer]))
        assert isinstance(result.content, str) and self.answer not in result.content
        assert result.finish_reason == "stop"

    async def test_system_message_reaches_the_model(self, client: ChatCompletionClient) -> None:
        system, question, word = self.system_fact
        result = await client.create([SystemMessage(content=system), *self._ask(question)], options=self._options())
        assert isinstance(result.content, str) and word in result.content
        without = await client.create(self._ask(question), options=self._options())
        assert isinstance(without.content, str) and word not in without.content

    async def test_prompt_past_the_context_window_is_refused(self, client: ChatCompletionClient) -> None:
        with pytest.raises(self.bad_request_error):
            await client.create(self._ask("word " * (self.context_tokens * 2)), options=self._options())

    # --- streaming ------------------------------------------------------------------------------------

    async def test_stream_text(self, client: ChatCompletionClient) -> None:
        items = [item async for item in client.create_stream(self._ask(), options=self._options())]
        result = items[-1]
        assert isinstance(result, CreateResult)
        chunks = [i for i in items[:-1] if isinstance(i, StreamChunk)]
        assert len(chunks) == len(items) - 1 and len(chunks) >= 2
        assert "".join(c.content for c in chunks) == result.content
        assert isinstance(result.content, str) and self.answer in result.content
        assert result.finish_reason == "stop"
        created = await client.create(self._ask(), options=self._options())
        assert created.content == result.content  # streamed or not, the same answer
        if "stream_usage" in self.features:
            assert result.usage == created.usage
        else:  # declared: the server sends none, and the client does not invent it
            assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (0, 0)

    async def test_cancel_mid_stream(self, client: ChatCompletionClient) -> None:
        token = CancellationToken()
        seen: list[str] = []
        got_text = asyncio.Event()

        async def consume() -> None:
            options = self._options(max_tokens=200)
            async for item in client.create_stream(self._ask("Count from 1 to 100."), token, options=options):
                if isinstance(item, StreamChunk) and item.content:
                    seen.append(item.content)
                    got_text.set()

        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(got_text.wait(), 60)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
        assert seen
        # The server is free again: the next request is answered (it does not wait behind a reply nobody reads).
        result = await asyncio.wait_for(client.create(self._ask(), options=self._options()), 60)
        assert isinstance(result.content, str) and self.answer in result.content

    async def test_timeout(self, real_server: Any) -> None:
        client = self.make_client(real_server, max_retries=0, timeout=0.05)
        try:
            with pytest.raises(self.timeout_error):
                await client.create(self._ask("Count from 1 to 100."), options=self._options(max_tokens=64))
        finally:
            await client.close()

    # --- tools ----------------------------------------------------------------------------------------

    async def _call_add(self, client: ChatCompletionClient, tool_choice: str) -> FunctionCall:
        result = await client.create(
            self._ask("What is 2 plus 3? Use the add tool."),
            tools=[ADD, MULTIPLY],
            tool_choice=tool_choice,
            options=self._options(max_tokens=48),
        )
        assert result.finish_reason == "function_calls"
        assert isinstance(result.content, list) and len(result.content) == 1
        call = result.content[0]
        assert call.name == "add" and call.id
        assert parse_tool_arguments(call.arguments) == {"a": 2, "b": 3}
        return call

    async def test_tool_choice_named(self, client: ChatCompletionClient) -> None:
        self._need("tool_choice_named")
        await self._call_add(client, "add")

    async def test_tool_choice_required(self, client: ChatCompletionClient) -> None:
        self._need("tool_choice_required")
        await self._call_add(client, "required")

    async def test_tool_choice_auto(self, client: ChatCompletionClient) -> None:
        self._need("tool_choice_auto")
        await self._call_add(client, "auto")

    async def test_tool_choice_none_answers_in_text(self, client: ChatCompletionClient) -> None:
        self._need("tool_choice_none")
        result = await client.create(self._ask(), tools=[ADD], tool_choice="none", options=self._options())
        assert isinstance(result.content, str) and self.answer in result.content

    async def test_tool_history_is_accepted(self, client: ChatCompletionClient) -> None:
        """A conversation with a tool call and its result passes the server's own request validation."""
        call = FunctionCall(id="call_1", name="add", arguments='{"a": 2, "b": 3}')
        history: list[LLMMessage] = [
            UserMessage(content="What is 2 plus 3? Use the add tool."),
            AssistantMessage(content=[call]),
            FunctionExecutionResultMessage(
                content=[FunctionExecutionResult(call_id="call_1", name="add", content="5")]
            ),
        ]
        result = await client.create(history, options=self._options())
        assert isinstance(result.content, str) and result.finish_reason in ("stop", "length")
        if "tool_results_in_prompt" in self.features:
            assert "5" in result.content

    # --- JSON -----------------------------------------------------------------------------------------

    async def test_json_mode(self, client: ChatCompletionClient) -> None:
        self._need("json_mode")
        ask = self._ask(f'{self.question} Reply with a JSON object like {{"{self.json_key}": "..."}}.')
        result = await client.create(ask, json_output=True, options=self._options(max_tokens=160))
        assert result.finish_reason == "stop"
        assert isinstance(result.parsed, dict) and result.parsed.get(self.json_key) == self.answer

    async def test_structured_output(self, client: ChatCompletionClient) -> None:
        self._need("structured_output")
        ask = self._ask(f"{self.question} Give its name and population.")
        result = await client.create(ask, json_output=City, options=self._options(max_tokens=48))
        assert isinstance(result.parsed, City) and self.answer in result.parsed.name
