"""The conformance suite every `ChatCompletionClient` implementation passes.

Subclass it in a provider package's tests (the class name must start with `Test`)::

    class TestMyClient(ChatClientConformance):
        rate_limit_error = mysdk.RateLimitError
        server_error = mysdk.InternalServerError
        connection_error = mysdk.APIConnectionError
        timeout_error = mysdk.APITimeoutError
        secret = "sk-conformance-secret"
        features = frozenset({"vision", "json_mode", "structured_output", ...})

        def make_server(self) -> LoopbackServer:
            return MyProtocolServer()

        def make_client(self, server: LoopbackServer, **kwargs: Any) -> ChatCompletionClient:
            return MyClient(model="m", base_url=server.base_url, api_key=self.secret, **kwargs)

`make_client` receives `max_retries`, `timeout` and `model_info` keyword arguments and must pass them
on. Each case scripts the server with protocol-neutral `Reply` / `Fault` items and checks both the
client's result and what reached the wire (`server.decode(request)`).

An in-process model (no server) returns an `ext.testing.inprocess.ScriptedModel` from `make_server` instead: the
same scripting surface, applied at the model runtime's extension point so the model really generates the
scripted reply. The peer says what it can do, and the suite reads it rather than the client's name:
`peer.fault_kinds` (the `Fault` kinds it can produce: a loopback server all, an in-process model only `hang`;
cases that need another kind, such as HTTP 429/500 or a dropped connection, are skipped with that reason) and
`peer.scripted_usage` (False: usage is the model's real token count, checked for consistency instead of
equality). A client whose `create` streams internally (so a cancel can stop generation between tokens) sets
`create_streams_internally = True`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Union

import pytest
import pytest_asyncio
from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    CancellationToken,
    ChatCompletionClient,
    ChatOptions,
    Component,
    ComponentError,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    Image,
    LLMMessage,
    OutputParseError,
    StreamChunk,
    SystemMessage,
    UnsupportedOptionError,
    UserMessage,
    parse_tool_arguments,
)
from ext.testing.conformance._component import load_dumped_client
from ext.testing.inprocess import ScriptedModel
from ext.testing.sample_inputs import ADD, MULTIPLY, PNG_1PX
from ext.testing.script import Fault, NeutralRequest, Reply, ToolCallSpec
from ext.testing.servers import LoopbackServer

Peer = Union[LoopbackServer, ScriptedModel]
"""What a conformance case scripts: a loopback server, or an in-process model's scripted peer."""

FEATURES = frozenset(
    {
        "vision",  # accepts images in user messages
        "json_mode",  # json_output=True
        "structured_output",  # json_output=<pydantic model>
        "parallel_tool_calls",  # several tool calls in one reply
        "tool_choice_none",
        "tool_choice_required",
        "tool_choice_named",
        "tool_result_is_error",  # the wire format carries is_error on tool results
        "thought",  # returns the model's reasoning as CreateResult.thought
        "model_id_on_wire",  # ChatOptions.model_id shows up as the request's model
        "content_filter",  # a content-filter stop maps to finish_reason="content_filter"
    }
)

HELLO: list[LLMMessage] = [UserMessage(content="Hi")]


class City(BaseModel):
    name: str
    population: int


async def _collect(stream: AsyncIterator[StreamChunk | CreateResult]) -> list[StreamChunk | CreateResult]:
    return [item async for item in stream]


class ChatClientConformance:
    """Provider-neutral cases for a `ChatCompletionClient`. See the module docstring."""

    rate_limit_error: ClassVar[type[BaseException] | tuple[type[BaseException], ...]]
    server_error: ClassVar[type[BaseException] | tuple[type[BaseException], ...]]
    connection_error: ClassVar[type[BaseException] | tuple[type[BaseException], ...]]
    timeout_error: ClassVar[type[BaseException] | tuple[type[BaseException], ...]]
    secret: ClassVar[str] = "sk-conformance-secret-0000"
    features: ClassVar[frozenset[str]] = frozenset()
    unsupported_options: ClassVar[list[tuple[dict[str, Any], str]]] = []
    """ChatOptions fields the provider rejects, with a regex the error message must match."""
    client_timeout: ClassVar[float] = 0.5
    """The timeout used by the timeout case (seconds)."""
    wire_call_ids: ClassVar[bool] = True
    """False when the provider's wire has no tool-call ids (Ollama pairs results with calls by tool name and
    position): the tool cases then check that each result is paired with the right call on the wire, not ids."""
    create_streams_internally: ClassVar[bool] = False
    """True when `create` sends a streaming request too (an in-process model reads its tokens one by one so a
    cancel stops generation): the wire's stream flag is then True for `create` as well."""

    # --- what a subclass provides ---------------------------------------------------------------

    def make_server(self) -> Peer:
        raise NotImplementedError

    def make_client(self, server: Any, **kwargs: Any) -> ChatCompletionClient:
        """A client talking to `server` (the `make_server` peer; typed `Any` so subclasses can narrow it)."""
        raise NotImplementedError

    # --- fixtures ---------------------------------------------------------------------------------

    @pytest_asyncio.fixture
    async def server(self) -> AsyncIterator[Peer]:
        srv = self.make_server()
        await srv.start()
        try:
            yield srv
        finally:
            await srv.stop()

    @pytest_asyncio.fixture
    async def client(self, server: Peer) -> AsyncIterator[ChatCompletionClient]:
        c = self.make_client(server, max_retries=0)
        try:
            yield c
        finally:
            await c.close()

    def _need(self, feature: str) -> None:
        if feature not in FEATURES:
            raise AssertionError(f"unknown conformance feature {feature!r}")
        if feature not in self.features:
            pytest.skip(f"{type(self).__name__} does not declare feature {feature!r}")

    @staticmethod
    def _wire(server: Peer, index: int = -1) -> NeutralRequest:
        return server.decode(server.requests[index])  # type: ignore[arg-type]

    @staticmethod
    def _need_fault(server: Peer, kind: str) -> None:
        if kind not in server.fault_kinds:
            pytest.skip(f"{type(server).__name__} cannot produce Fault({kind!r}) (it has no network peer)")

    @staticmethod
    def _check_usage(server: Peer, result: CreateResult, prompt_tokens: int, completion_tokens: int) -> None:
        """The scripted usage from a peer that reports it; else the model's real, positive counts."""
        usage = result.usage
        if server.scripted_usage:
            assert (usage.prompt_tokens, usage.completion_tokens) == (prompt_tokens, completion_tokens)
        else:
            assert usage.prompt_tokens > 0 and usage.completion_tokens > 0

    # --- text, usage, finish reasons ------------------------------------------------------------------

    async def test_text_create(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Reply(text="Hello there", prompt_tokens=11, completion_tokens=7))
        result = await client.create(HELLO)
        assert result.content == "Hello there"
        assert result.finish_reason == "stop"
        self._check_usage(server, result, 11, 7)
        assert result.cached is False
        wire = self._wire(server)
        assert wire.last_user_text == "Hi"
        assert wire.stream is self.create_streams_internally

    async def test_usage_is_accounted(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(
            Reply(text="a", prompt_tokens=3, completion_tokens=2), Reply(text="b", prompt_tokens=5, completion_tokens=1)
        )
        first = await client.create(HELLO)
        second = await client.create(HELLO)
        self._check_usage(server, first, 3, 2)
        self._check_usage(server, second, 5, 1)
        assert client.actual_usage() == second.usage
        total = client.total_usage()
        assert (total.prompt_tokens, total.completion_tokens) == (
            first.usage.prompt_tokens + second.usage.prompt_tokens,
            first.usage.completion_tokens + second.usage.completion_tokens,
        )

    async def test_finish_reason_length(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Reply(text="cut", finish_reason="length"))
        assert (await client.create(HELLO)).finish_reason == "length"

    async def test_finish_reason_content_filter(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need("content_filter")
        server.enqueue(Reply(text="", finish_reason="content_filter"))
        assert (await client.create(HELLO)).finish_reason == "content_filter"

    async def test_system_messages_anywhere(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Reply(text="ok"))
        messages: list[LLMMessage] = [
            SystemMessage(content="RULE-ONE"),
            UserMessage(content="first"),
            AssistantMessage(content="reply"),
            SystemMessage(content="RULE-TWO"),
            UserMessage(content="second"),
        ]
        result = await client.create(messages)
        assert result.content == "ok"
        wire = self._wire(server)
        seen = " ".join([*wire.system, *(m.text for m in wire.messages)])
        assert "RULE-ONE" in seen and "RULE-TWO" in seen
        assert seen.index("RULE-ONE") < seen.index("RULE-TWO") or "RULE-TWO" in " ".join(wire.system)
        assert [m.text for m in wire.messages if m.role == "user"][-1].endswith("second")

    # --- tools ----------------------------------------------------------------------------------------

    async def test_tool_call_round_trip(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Reply(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3}, id="call_add_1")]), Reply(text="5"))
        first = await client.create(HELLO, tools=[ADD])
        assert first.finish_reason == "function_calls"
        assert isinstance(first.content, list) and len(first.content) == 1
        call = first.content[0]
        assert isinstance(call, FunctionCall)
        assert call.name == "add" and call.id
        assert parse_tool_arguments(call.arguments) == {"a": 2, "b": 3}
        wire1 = self._wire(server)
        assert wire1.tools == ["add"]
        assert set(wire1.tool_schemas["add"].get("properties", {})) == {"a", "b"}

        history: list[LLMMessage] = [
            *HELLO,
            first.to_assistant_message(),
            FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id=call.id, name="add", content="5")]),
        ]
        second = await client.create(history, tools=[ADD])
        assert second.content == "5"
        wire2 = self._wire(server)
        assistant = [m for m in wire2.messages if m.tool_calls]
        assert assistant and assistant[0].tool_calls[0].name == "add"
        wire_id = assistant[0].tool_calls[0].call_id
        if self.wire_call_ids:
            assert wire_id == call.id
        results = [r for m in wire2.messages for r in m.tool_results]
        assert [(r.call_id, r.content) for r in results] == [(wire_id, "5")]

    async def test_tool_result_error_reaches_the_model(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Reply(text="sorry"))
        history: list[LLMMessage] = [
            *HELLO,
            AssistantMessage(content=[FunctionCall(id="call_9", name="add", arguments='{"a": 1, "b": "x"}')]),
            FunctionExecutionResultMessage(
                content=[
                    FunctionExecutionResult(
                        call_id="call_9", name="add", content="boom: b is not an int", is_error=True
                    )
                ]
            ),
        ]
        await client.create(history, tools=[ADD])
        wire = self._wire(server)
        results = [r for m in wire.messages for r in m.tool_results]
        wire_id = "call_9" if self.wire_call_ids else next(c for m in wire.messages for c in m.tool_calls).call_id
        assert len(results) == 1 and results[0].call_id == wire_id
        assert "boom: b is not an int" in results[0].content
        if "tool_result_is_error" in self.features:
            assert results[0].is_error is True

    async def test_parallel_tool_calls(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need("parallel_tool_calls")
        server.enqueue(
            Reply(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2}), ToolCallSpec("multiply", {"a": 3, "b": 4})])
        )
        result = await client.create(HELLO, tools=[ADD, MULTIPLY])
        assert isinstance(result.content, list)
        assert [(c.name, parse_tool_arguments(c.arguments)) for c in result.content] == [
            ("add", {"a": 1, "b": 2}),
            ("multiply", {"a": 3, "b": 4}),
        ]
        assert len({c.id for c in result.content}) == 2

    @pytest.mark.parametrize("choice", ["auto", "none", "required", "add"])
    async def test_tool_choice(self, server: Peer, client: ChatCompletionClient, choice: str) -> None:
        feature = {"none": "tool_choice_none", "required": "tool_choice_required", "add": "tool_choice_named"}.get(
            choice
        )
        if feature:
            self._need(feature)
        server.enqueue(Reply(text="ok"))
        await client.create(HELLO, tools=[ADD, MULTIPLY], tool_choice=choice)
        wire = self._wire(server)
        if choice == "auto":
            assert wire.tool_choice in ("auto", None)
        elif choice == "none":
            assert wire.tool_choice == "none" or wire.tools == []
        else:
            assert wire.tool_choice == choice

    async def test_tool_choice_unknown_is_rejected_before_request(
        self, server: Peer, client: ChatCompletionClient
    ) -> None:
        with pytest.raises(ConfigurationError, match="not among the tools"):
            await client.create(HELLO, tools=[ADD], tool_choice="divide")
        assert server.requests == []

    # --- JSON and structured output -------------------------------------------------------------------

    async def test_json_mode(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need("json_mode")
        server.enqueue(Reply(text='{"answer": 42}'))
        result = await client.create(HELLO, json_output=True)
        assert result.parsed == {"answer": 42}
        wire = self._wire(server)
        assert wire.json_mode or wire.json_schema is not None

    async def test_structured_output(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need("structured_output")
        server.enqueue(Reply(text='{"name": "Oslo", "population": 709000}'))
        result = await client.create(HELLO, json_output=City)
        assert result.parsed == City(name="Oslo", population=709000)
        schema = self._wire(server).json_schema
        assert schema is not None
        assert set(schema.get("properties", {})) == {"name", "population"}

    async def test_invalid_json_output_is_a_clear_error(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need("json_mode")
        server.enqueue(Reply(text="certainly! here it is"))
        with pytest.raises(OutputParseError, match="not valid JSON"):
            await client.create(HELLO, json_output=True)

    # --- images ---------------------------------------------------------------------------------------

    async def test_images(self, server: Peer) -> None:
        self._need("vision")
        client = self.make_client(server, max_retries=0, model_info={"vision": True})
        try:
            server.enqueue(Reply(text="a dot"))
            result = await client.create([UserMessage(content=["what is this?", Image.from_bytes(PNG_1PX)])])
            assert result.content == "a dot"
            user = [m for m in self._wire(server).messages if m.role == "user"][-1]
            assert user.images == 1 and "what is this?" in user.text
        finally:
            await client.close()

    async def test_images_rejected_without_vision(self, server: Peer) -> None:
        client = self.make_client(server, max_retries=0, model_info={"vision": False})
        try:
            with pytest.raises(UnsupportedOptionError, match="images"):
                await client.create([UserMessage(content=["x", Image.from_bytes(PNG_1PX)])])
            assert server.requests == []
        finally:
            await client.close()

    # --- streaming ------------------------------------------------------------------------------------

    async def test_stream_text(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Reply(text="one two three four", prompt_tokens=9, completion_tokens=4))
        items = await _collect(client.create_stream(HELLO))
        results = [i for i in items if isinstance(i, CreateResult)]
        assert len(results) == 1 and items[-1] is results[0]
        chunks = [i for i in items[:-1] if isinstance(i, StreamChunk)]
        assert len(chunks) == len(items) - 1 and len(chunks) >= 2
        assert "".join(c.content for c in chunks) == "one two three four" == results[0].content
        self._check_usage(server, results[0], 9, 4)
        assert results[0].finish_reason == "stop"
        assert self._wire(server).stream is True
        assert client.actual_usage() == results[0].usage

    async def test_stream_tool_calls(self, server: Peer, client: ChatCompletionClient) -> None:
        calls = [ToolCallSpec("add", {"a": 10, "b": 20})]
        if "parallel_tool_calls" in self.features:
            calls.append(ToolCallSpec("multiply", {"a": 6, "b": 7}))
        server.enqueue(Reply(tool_calls=calls))
        items = await _collect(client.create_stream(HELLO, tools=[ADD, MULTIPLY]))
        result = items[-1]
        assert isinstance(result, CreateResult)
        assert result.finish_reason == "function_calls"
        assert isinstance(result.content, list)
        assert [(c.name, parse_tool_arguments(c.arguments)) for c in result.content] == [
            (c.name, c.arguments_dict) for c in calls
        ]

    async def test_stream_json_output(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need("json_mode")
        server.enqueue(Reply(text='{"answer": 42}', chunks=['{"ans', 'wer": ', "42}"]))
        items = await _collect(client.create_stream(HELLO, json_output=True))
        result = items[-1]
        assert isinstance(result, CreateResult) and result.parsed == {"answer": 42}

    async def test_thought_is_returned(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need("thought")
        server.enqueue(Reply(text="4", thought="2 plus 2 is 4", thought_signature="sig-abc"))
        result = await client.create(HELLO)
        assert result.content == "4"
        assert result.thought is not None and "2 plus 2 is 4" in result.thought

    # --- cancellation and timeouts --------------------------------------------------------------------

    async def test_cancel_mid_request_closes_the_connection(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Fault("hang"))
        token = CancellationToken()
        task = asyncio.ensure_future(client.create(HELLO, token))
        (request,) = await server.wait_for_requests(1)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        await asyncio.wait_for(request.disconnected.wait(), 10)
        assert not request.completed  # stopped by the cancel, not run to its end

    async def test_cancel_mid_stream_closes_the_connection(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Reply(text="alpha beta gamma delta epsilon", stall_after_chunks=3))
        token = CancellationToken()
        got_text = asyncio.Event()
        seen: list[str] = []

        async def consume() -> None:
            async for item in client.create_stream(HELLO, token):
                if isinstance(item, StreamChunk) and item.content:
                    seen.append(item.content)
                    got_text.set()

        task = asyncio.ensure_future(consume())
        await asyncio.wait_for(got_text.wait(), 10)
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        await asyncio.wait_for(server.requests[0].disconnected.wait(), 10)
        assert not server.requests[0].completed  # stopped by the cancel, not run to its end
        assert seen and "epsilon" not in "".join(seen)

    async def test_timeout(self, server: Peer) -> None:
        client = self.make_client(server, max_retries=0, timeout=self.client_timeout)
        try:
            server.enqueue(Fault("hang"))
            with pytest.raises(self.timeout_error):
                await asyncio.wait_for(client.create(HELLO), 30)
        finally:
            await client.close()

    # --- errors and retries ---------------------------------------------------------------------------

    async def test_rate_limit_with_retry_after_is_retried(self, server: Peer) -> None:
        self._need_fault(server, "rate_limit")
        client = self.make_client(server, max_retries=2)
        try:
            server.enqueue(Fault("rate_limit", retry_after=0.01), Reply(text="after the wait"))
            result = await client.create(HELLO)
            assert result.content == "after the wait"
            assert len(server.requests) == 2
        finally:
            await client.close()

    async def test_rate_limit_forever_raises_the_provider_error(self, server: Peer) -> None:
        self._need_fault(server, "rate_limit")
        client = self.make_client(server, max_retries=2)
        try:
            for _ in range(3):
                server.enqueue(Fault("rate_limit", retry_after=0.01))
            with pytest.raises(self.rate_limit_error):
                await client.create(HELLO)
            assert len(server.requests) == 3
        finally:
            await client.close()

    async def test_server_error(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need_fault(server, "server_error")
        server.enqueue(Fault("server_error"))
        with pytest.raises(self.server_error):
            await client.create(HELLO)

    async def test_server_error_is_retried(self, server: Peer) -> None:
        self._need_fault(server, "server_error")
        client = self.make_client(server, max_retries=1)
        try:
            server.enqueue(Fault("server_error", retry_after=0.01), Reply(text="recovered"))
            assert (await client.create(HELLO)).content == "recovered"
        finally:
            await client.close()

    async def test_dropped_connection(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need_fault(server, "drop")
        server.enqueue(Fault("drop"))
        with pytest.raises(self.connection_error):
            await client.create(HELLO)

    # --- options and bad input ------------------------------------------------------------------------

    async def test_options_are_mapped(self, server: Peer, client: ChatCompletionClient) -> None:
        server.enqueue(Reply(text="ok"))
        options = ChatOptions(temperature=0.5, max_tokens=77, top_p=0.9, stop_sequences=["END"])
        await client.create(HELLO, options=options)
        wire = self._wire(server)
        assert wire.options.get("temperature") == 0.5
        assert wire.options.get("max_tokens") == 77
        assert wire.options.get("top_p") == 0.9
        assert wire.options.get("stop") == ["END"]

    async def test_model_id_option_overrides_model(self, server: Peer, client: ChatCompletionClient) -> None:
        self._need("model_id_on_wire")
        server.enqueue(Reply(text="ok"))
        await client.create(HELLO, options=ChatOptions(model_id="another-model"))
        assert self._wire(server).model == "another-model"

    async def test_unsupported_options_are_rejected_before_request(
        self, server: Peer, client: ChatCompletionClient
    ) -> None:
        if not self.unsupported_options:
            pytest.skip("the provider honours every ChatOptions field")
        for fields, match in self.unsupported_options:
            with pytest.raises(UnsupportedOptionError, match=match):
                await client.create(HELLO, options=ChatOptions(**fields))
        assert server.requests == []

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"messages": []}, "messages"),
            ({"tool_choice": "required"}, "needs tools"),
            ({"json_output": "yes"}, "json_output"),
            ({"options": {"temperature": 5}}, "temperature"),
        ],
    )
    async def test_bad_arguments_fail_before_any_request(
        self, server: Peer, client: ChatCompletionClient, kwargs: dict[str, Any], match: str
    ) -> None:
        arguments = dict(kwargs)  # parametrize shares the dict between subclasses: never mutate it
        messages = arguments.pop("messages", HELLO)
        with pytest.raises(ValueError, match=match):
            await client.create(messages, **arguments)
        assert server.requests == []

    async def test_no_secret_in_repr_errors_or_dump(self, server: Peer, client: ChatCompletionClient) -> None:
        assert self.secret not in repr(client)
        if "auth" in server.fault_kinds:
            server.enqueue(Fault("auth"))
            with pytest.raises(Exception) as info:
                await client.create(HELLO)
            assert self.secret not in str(info.value) and self.secret not in repr(info.value)
        if isinstance(client, Component):
            try:
                text = client.dump_component().model_dump_json()
            except ComponentError as exc:  # a client with settings a dump cannot hold refuses to be dumped
                text = str(exc)
            assert self.secret not in text

    def dump_environment(self, client: ChatCompletionClient) -> dict[str, str]:
        """Environment variables a client loaded from `client`'s dump needs (default: its `api_key_env` holding
        `secret`). Override for other credentials."""
        if not isinstance(client, Component):
            return {}
        names = _find_values(client.dump_component().config, "api_key_env")  # nested: a pipeline holds its client
        return dict.fromkeys(names, self.secret)

    async def test_dump_round_trip_loses_nothing(
        self, server: LoopbackServer, client: ChatCompletionClient, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        if not isinstance(client, Component):
            pytest.skip(f"{type(client).__name__} is not a Component")
        loaded = load_dumped_client(client, self.dump_environment, self.secret, monkeypatch)
        if loaded is None:
            return
        try:
            server.enqueue(Reply(text="from the loaded client"))
            assert (await loaded.create(HELLO)).content == "from the loaded client"
        finally:
            await loaded.close()

    # --- tokens, lifecycle ----------------------------------------------------------------------------

    async def test_count_and_remaining_tokens(self, server: Peer, client: ChatCompletionClient) -> None:
        short = client.count_tokens(HELLO)
        long = client.count_tokens([UserMessage(content="word " * 200)])
        assert 0 < short < long
        with_tools = client.count_tokens(HELLO, tools=[ADD])
        assert with_tools > short
        assert client.remaining_tokens(HELLO) == client.capabilities.context_window - short
        assert server.requests == []

    async def test_close_and_context_manager(self, server: Peer) -> None:
        server.enqueue(Reply(text="inside"))
        client = self.make_client(server, max_retries=0)
        async with client as entered:  # type: ignore[attr-defined]
            assert (await entered.create(HELLO)).content == "inside"
        await client.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            await client.create(HELLO)
        assert len(server.requests) == 1

    async def test_capabilities(self, client: ChatCompletionClient) -> None:
        info = client.capabilities
        assert isinstance(info.vision, bool) and isinstance(info.function_calling, bool)
        assert isinstance(info.json_output, bool) and info.context_window > 0


def _find_values(value: Any, key: str) -> list[str]:
    """Every string stored under `key` anywhere in a dumped config (mappings and lists, depth first)."""
    found: list[str] = []
    if isinstance(value, dict):
        for name, item in value.items():
            if name == key and isinstance(item, str) and item:
                found.append(item)
            else:
                found.extend(_find_values(item, key))
    elif isinstance(value, list):
        for item in value:
            found.extend(_find_values(item, key))
    return found
