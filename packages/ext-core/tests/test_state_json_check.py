"""The save-time JSON check: the fast walk (`_is_json`) agrees with the walk that names the bad value
(`_check_json`) on any value, JSON or not, so the fast one decides and the slow one only words the error."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ext.core._state import _check_json, _is_json, encode_state

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
        st.dictionaries(st.integers(), inner, min_size=1, max_size=2),  # non-str keys: refused
        st.tuples(inner),  # tuples: refused, not changed into lists
        st.frozensets(st.integers(), max_size=2),  # sets: refused
    ),
    max_leaves=20,
)


def _slow(value: Any) -> bool:
    try:
        _check_json(value, "state")
    except (TypeError, ValueError):
        return False
    return True


@given(values)
def test_the_fast_check_agrees_with_the_one_that_names_the_error(value: Any) -> None:
    assert _is_json(value) == _slow(value)


def test_encode_state_still_names_the_bad_value() -> None:
    with pytest.raises(ValueError, match=r"state\['a'\]\[1\]: JSON has no nan"):
        encode_state({"a": [1.0, math.nan]})
    with pytest.raises(TypeError, match=r"state\['b'\]: expected a JSON value .* got tuple"):
        encode_state({"a": 1, "b": (1, 2)})
    assert encode_state({"a": [1, {"b": None}]}) == b'{"a":[1,{"b":null}]}'
