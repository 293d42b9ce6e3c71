"""The state-store building blocks that need no store: the save policy and the JSON checks. The stores themselves
run `ext.testing.conformance.StateStoreConformance` (in ext-runtime-local's tests, which have ext-testing)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ext.core import AgentId, SavePolicy, StateConflictError, decode_state, encode_state


def test_save_policies() -> None:
    assert SavePolicy().every_n_messages == 1
    assert SavePolicy.after_each_message() == SavePolicy()
    assert SavePolicy.every(5).every_n_messages == 5
    assert SavePolicy.on_deactivation().every_n_messages is None
    with pytest.raises(ValidationError, match="every_n_messages"):
        SavePolicy.every(0)
    with pytest.raises(ValidationError, match="extra"):
        SavePolicy(every=3)  # type: ignore[call-arg]


def test_state_round_trips_through_json() -> None:
    state = {"n": 1, "f": 0.5, "s": "h\u00e9", "none": None, "ok": True, "items": [1, {"k": []}]}
    assert decode_state(encode_state(state)) == state


def test_conflict_error_names_the_agent_and_both_versions() -> None:
    error = StateConflictError(AgentId("t", "k"), 3, None)
    assert str(error).startswith("the state of t/k was written by someone else: expected version 3, found no record")
    assert (error.expected, error.found) == (3, None)


def test_decoding_a_non_object_is_refused() -> None:
    with pytest.raises(ValueError, match="must be a JSON object"):
        decode_state(b"[1, 2]")
