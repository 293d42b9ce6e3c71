"""Package shape: public names, entry points, the mapping without a network."""

from __future__ import annotations

import ext.models.ollama as package
from ext.core import ChatRequest, CreateResult, StreamChunk, UserMessage
from ext.models.ollama import OllamaWireSettings, StreamState, map_request, map_response


def test_public_names() -> None:
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_mapping_reads_ollama_dicts() -> None:
    request = ChatRequest(messages=[UserMessage(content="Hi")], model="m")
    body = map_request(request, OllamaWireSettings(options={"num_ctx": 512}, keep_alive="1m"), stream=True)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "options": {"num_ctx": 512},
        "keep_alive": "1m",
    }
    reply = {
        "message": {"role": "assistant", "content": "Hello"},
        "done": True,
        "done_reason": "length",
        "eval_count": 2,
    }
    result = map_response(reply)
    assert (result.content, result.finish_reason, result.usage.prompt_tokens, result.usage.completion_tokens) == (
        "Hello",
        "length",
        0,
        2,
    )


def test_stream_state_keeps_thinking_apart() -> None:
    state = StreamState()
    parts = [
        {"message": {"role": "assistant", "content": "", "thinking": "hm"}, "done": False},
        {"message": {"role": "assistant", "content": "ok"}, "done": False},
        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop", "prompt_eval_count": 3},
    ]
    chunks = [state.handle(p) for p in parts]
    assert [(c.content, c.thought) if isinstance(c, StreamChunk) else None for c in chunks] == [
        ("", "hm"),
        ("ok", ""),
        None,
    ]
    result = state.result()
    assert isinstance(result, CreateResult)
    assert (result.content, result.thought, result.usage.prompt_tokens) == ("ok", "hm", 3)
