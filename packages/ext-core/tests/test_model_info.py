from __future__ import annotations

import pytest
from pydantic import ValidationError

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


def test_every_rule_of_the_known_table_is_a_valid_model_info() -> None:
    # Rules written in code skip validation at import (ModelRule.of); this is where they get it.
    KNOWN_MODELS.validate()
    rules = list(KNOWN_MODELS)
    assert len(rules) == len(KNOWN_MODELS) > 10
    for rule in rules:
        assert ModelInfo.model_validate(rule.info.model_dump()) == rule.info


def test_validate_catches_a_bad_rule_written_in_code() -> None:
    table = KNOWN_MODELS.extend([ModelRule.of("broken", context_window=0)])
    with pytest.raises(ValidationError) as excinfo:
        table.validate()
    assert excinfo.value.errors()[0]["loc"] == ("context_window",)
    with pytest.raises(TypeError, match=r"unknown ModelInfo fields \['visoin'\]"):
        ModelRule.of("typo", visoin=True)


def test_rule_of_fills_defaults_like_validation_does() -> None:
    rule = ModelRule.of("x-model", vision=True, context_window=1000)
    assert rule.prefix == "x-model"
    assert rule.info == ModelInfo(vision=True, context_window=1000)
    assert rule.info.function_calling is True and rule.info.family == "unknown"


def test_importing_ext_core_builds_no_schema() -> None:
    # Import time is a budget every provider package pays; schemas are built on first use instead.
    import subprocess
    import sys

    code = (
        "import sys, pydantic, ext.core\n"
        "built = sorted({f'{m.__name__}.{v.__name__}' for m in list(sys.modules.values())"
        " if getattr(m, '__name__', '').startswith('ext.') for v in vars(m).values()"
        " if isinstance(v, type) and issubclass(v, pydantic.BaseModel) and v.__dict__.get('__pydantic_complete__')})\n"
        "print(built)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
