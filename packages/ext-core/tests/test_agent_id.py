from __future__ import annotations

import pytest

from ext.core import AgentId, AgentType


def test_string_form_and_parse() -> None:
    agent = AgentId("writer", "session/42")
    assert str(agent) == "writer/session/42"
    assert AgentId.from_str("writer/session/42") == agent
    assert AgentId(AgentType("writer"), "k").type == "writer"
    assert hash(AgentId("a", "b")) == hash(AgentId("a", "b"))


@pytest.mark.parametrize("bad", ["", "has space", "a/b"])
def test_bad_type(bad: str) -> None:
    with pytest.raises(ValueError, match="type"):
        AgentId(bad, "k")
    with pytest.raises(ValueError, match=r"AgentType\.name"):
        AgentType(bad)


def test_bad_key_and_string() -> None:
    with pytest.raises(ValueError, match="key"):
        AgentId("a", "")
    with pytest.raises(ValueError, match="type/key"):
        AgentId.from_str("nokey")
    assert str(AgentType("t")) == "t"
