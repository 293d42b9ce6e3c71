from __future__ import annotations

import pytest

from ext.core import (
    DEFAULT_MODEL_INFO,
    DEFAULT_TOKEN_LIMIT,
    KNOWN_MODELS,
    ModelInfo,
    ModelRule,
    ModelTable,
    normalize_model_name,
    resolve_model_info,
)


def test_longest_prefix_wins() -> None:
    assert KNOWN_MODELS.lookup("gpt-4o-mini-2024-07-18").family == "gpt-4o"
    assert KNOWN_MODELS.lookup("gpt-4-turbo").vision is True
    assert KNOWN_MODELS.lookup("gpt-4-0613").vision is False


def test_vendor_and_region_prefixes_are_stripped() -> None:
    assert normalize_model_name("us.anthropic.claude-3-5-sonnet-20241022-v2:0") == "claude-3-5-sonnet-20241022-v2:0"
    assert KNOWN_MODELS.lookup("us.anthropic.claude-3-5-sonnet-20241022-v2:0").family == "claude-3-5"
    assert KNOWN_MODELS.lookup("OpenAI/GPT-4o").family == "gpt-4o"


def test_unknown_name_gets_defaults_never_an_error() -> None:
    info = KNOWN_MODELS.lookup("my-local-finetune")
    assert info == DEFAULT_MODEL_INFO
    assert info.context_window == DEFAULT_TOKEN_LIMIT
    assert (info.function_calling, info.json_output, info.vision) == (True, True, False)
    assert KNOWN_MODELS.find("my-local-finetune") is None


def test_override_partial_full_and_token_limit() -> None:
    partial = resolve_model_info("my-model", override={"vision": True})
    assert partial.vision is True and partial.function_calling is True
    full = ModelInfo(function_calling=False, family="x")
    assert resolve_model_info("gpt-4o", override=full) == full
    assert resolve_model_info("gpt-4o", token_limit=1000).context_window == 1000
    with pytest.raises(ValueError, match="context_window"):
        resolve_model_info("m", override={"context_window": 0})


def test_table_extend_replaces_same_prefix() -> None:
    table = ModelTable([ModelRule("foo", ModelInfo(family="a"))])
    table2 = table.extend([ModelRule("foo", ModelInfo(family="b")), ModelRule("foo-bar", ModelInfo(family="c"))])
    assert table.lookup("foo-1").family == "a"
    assert table2.lookup("foo-1").family == "b"
    assert table2.lookup("foo-bar-1").family == "c"
    assert len(table2) == 2


def test_model_info_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="visoin"):
        ModelInfo(visoin=True)  # type: ignore[call-arg]
