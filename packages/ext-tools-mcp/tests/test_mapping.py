"""The result mapping builds exactly what validated construction builds."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types as mt

from ext.core import ImageResultContent, TextResultContent, ToolResult
from ext.tools.mcp import _mapping


class _Text(str):
    """A str subclass: not what the SDK produces, so it goes through validation."""


def _validated(name: str, text: str, is_error: bool, structured: Any) -> ToolResult:
    return ToolResult(
        name=name, result=[TextResultContent(content=text)], is_error=is_error, structured_content=structured
    )


@pytest.mark.parametrize(
    ("is_error", "structured", "expected_structured"),
    [
        (False, None, None),
        (False, {"result": "héllo"}, {"result": "héllo"}),
        (True, None, None),
        (False, [1, 2], {"result": [1, 2]}),
        (False, "plain", {"result": "plain"}),
    ],
)
def test_single_text_result_matches_validated_construction(
    is_error: bool, structured: Any, expected_structured: Any
) -> None:
    sdk = mt.CallToolResult(
        content=[mt.TextContent(type="text", text="héllo")], is_error=is_error, structured_content=structured
    )
    ours = _mapping.tool_result("echo", sdk)
    expected = _validated("echo", "héllo", is_error, expected_structured)

    assert type(ours) is ToolResult and type(ours.result[0]) is TextResultContent
    assert ours == expected
    assert ours.__dict__ == expected.__dict__
    assert list(ours.__dict__) == list(expected.__dict__)
    assert ours.model_fields_set == expected.model_fields_set
    assert ours.result[0].__dict__ == expected.result[0].__dict__
    assert ours.result[0].model_fields_set == expected.result[0].model_fields_set
    assert ours.__pydantic_extra__ is None and ours.__pydantic_private__ is None
    assert ours.model_dump() == expected.model_dump()
    assert ours.model_dump_json() == expected.model_dump_json()
    assert ToolResult.model_validate_json(ours.model_dump_json()) == expected
    assert repr(ours) == repr(expected)
    assert ours.to_text() == "héllo"
    # Copies and assignment behave as on a validated model.
    renamed = ours.model_copy(update={"name": "other"})
    assert renamed.name == "other" and ours.name == "echo" and renamed.result == expected.result
    ours.result.append(TextResultContent(content="more"))
    assert ours.to_text() == "héllo\nmore"


def test_unusual_values_go_through_validation() -> None:
    sdk = mt.CallToolResult(content=[mt.TextContent(type="text", text="x")])
    ours = _mapping.tool_result(_Text("echo"), sdk)
    assert ours == _validated("echo", "x", False, None)
    assert type(ours.name) is str  # validation made it a plain str


def test_other_blocks_keep_the_per_block_mapping() -> None:
    sdk = mt.CallToolResult(
        content=[
            mt.TextContent(type="text", text="a"),
            mt.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        ]
    )
    ours = _mapping.tool_result("pic", sdk)
    assert ours.result[0] == TextResultContent(content="a")
    assert isinstance(ours.result[1], ImageResultContent)
    assert ours.result[1].content.mime_type == "image/png"
