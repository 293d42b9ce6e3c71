"""The vector-store types, the filter language and the chunker, without a backend (the backends run
ext-testing's VectorStoreConformance in their own tests)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from ext.core import MetadataValue, VectorQuery, VectorRecord, matches_filter, normalize_filter


def test_record_refuses_non_finite_and_zero_vectors() -> None:
    for bad in ([math.nan, 1.0], [1.0, math.inf], [0.0, 0.0], []):
        with pytest.raises(ValidationError, match="vector"):
            VectorRecord(id="a", vector=bad)
    with pytest.raises(ValidationError, match="metadata"):
        VectorRecord(id="a", vector=[1.0], metadata={"nested": {"no": 1}})  # type: ignore[dict-item]
    with pytest.raises(ValidationError, match="id"):
        VectorRecord(id="", vector=[1.0])


def test_query_ranges() -> None:
    with pytest.raises(ValidationError, match="top_k"):
        VectorQuery(vector=[1.0], top_k=0)
    with pytest.raises(ValidationError, match="min_score"):
        VectorQuery(vector=[1.0], min_score=-1.5)
    assert VectorQuery(vector=[1.0], filter={"k": "v"}).filter == {"k": ["v"]}  # type: ignore[dict-item]


def test_filter_language() -> None:
    assert normalize_filter(None) == {}
    assert normalize_filter({"a": 1, "b": {"$in": ["x", None]}}) == {"a": [1], "b": ["x", None]}
    for bad, where in (
        ({"a": {"$gt": 1}}, "'a'"),
        ({"a": {"$in": []}}, r"\$in"),
        ({"a": {"$in": "xy"}}, r"\$in"),
        ({"a": [1, 2]}, "JSON scalar"),
        ({"$or": 1}, "operators"),
        ({"a": math.nan}, "finite"),
        ("a", "mapping"),
    ):
        with pytest.raises(ValueError, match=where):
            normalize_filter(bad)  # type: ignore[arg-type]


def test_matches_filter_keeps_json_kinds_apart() -> None:
    meta: dict[str, MetadataValue] = {"n": 1, "flag": True, "s": "x"}
    assert matches_filter(meta, normalize_filter({"n": 1.0}))
    assert not matches_filter(meta, normalize_filter({"n": True}))
    assert not matches_filter(meta, normalize_filter({"flag": 1}))
    assert matches_filter(meta, normalize_filter({"missing": None, "s": {"$in": ["y", "x"]}}))
    assert not matches_filter(meta, normalize_filter({"s": "y"}))
