"""The vector-store types, the filter language and the chunker, without a backend (the backends run
ext-testing's VectorStoreConformance in their own tests)."""

from __future__ import annotations

import math
import random

import pytest
from pydantic import ValidationError

from ext.core import MetadataValue, VectorQuery, VectorRecord, matches_filter, normalize_filter
from ext.core._vector_values import check_length, check_vector


def test_record_refuses_non_finite_and_zero_vectors() -> None:
    for bad in ([math.nan, 1.0], [1.0, math.inf], [0.0, 0.0], []):
        with pytest.raises(ValidationError, match="vector"):
            VectorRecord(id="a", vector=bad)
    with pytest.raises(ValidationError, match="metadata"):
        VectorRecord(id="a", vector=[1.0], metadata={"nested": {"no": 1}})  # type: ignore[dict-item]
    with pytest.raises(ValidationError, match="id"):
        VectorRecord(id="", vector=[1.0])


def test_record_refuses_what_float32_and_the_stores_cannot_keep() -> None:
    for bad, message in (
        ([1e39, 1.0], r"vector\[0\] = 1e\+39 is outside float32's range"),
        ([1.0, -3.5e38], r"vector\[1\] = -3\.5e\+38 is outside float32's range"),
        ([1e-46, -7e-46], "every component underflows to zero as float32"),
        ([math.nan, 1e39], r"vector\[0\] must be a finite number"),
    ):
        with pytest.raises(ValidationError, match=message):
            VectorRecord(id="a", vector=bad)
    # float32's own limits are kept: its largest value and its smallest subnormal.
    assert VectorRecord(id="a", vector=[3.4028234663852886e38, 1.5e-45]).vector == [3.4028234663852886e38, 1.5e-45]
    for fields, message in (
        ({"id": "a\x00"}, "id must not contain NUL"),
        ({"id": "é" * 1025}, "id is 2050 bytes as UTF-8"),
        ({"text": "\x00"}, "text must not contain NUL"),
        ({"metadata": {"k": 2**63}}, "signed 64-bit"),
        ({"metadata": {"k": -(2**63) - 1}}, "signed 64-bit"),
        ({"metadata": {"k": math.inf}}, "finite"),
        ({"metadata": {"k": "\x00"}}, "NUL"),
        ({"metadata": {"\x00": 1}}, "NUL"),
        ({"metadata": {"": 1}}, "non-empty"),
    ):
        with pytest.raises(ValidationError, match=message):
            VectorRecord.model_validate({"id": "a", "vector": [1.0], **fields})
    edge = VectorRecord(id="é" * 1024, vector=[1.0], metadata={"max": 2**63 - 1, "min": -(2**63)})
    assert edge.metadata == {"max": 2**63 - 1, "min": -(2**63)}


def test_fast_and_slow_vector_checks_agree() -> None:
    # check_vector takes one C pass for good vectors and walks them only to name a fault: both paths must agree.
    rng = random.Random(7)
    specials = [0.0, -0.0, 1e-46, 7.1e-46, 1e-40, 1.0, 3.4028234663852886e38, 3.5e38, 1e300, math.inf, math.nan]
    for _ in range(3000):
        vector = [rng.choice(specials) * rng.choice((1, -1)) for _ in range(rng.randint(1, 4))]
        slow_ok = (
            all(math.isfinite(x) and abs(x) <= 3.4028234663852886e38 for x in vector)
            and max(abs(x) for x in vector) > 2.0**-150
        )
        try:
            check_vector(vector, "v")
        except ValueError:
            assert not slow_ok, vector
        else:
            assert slow_ok, vector


def test_length_bounds() -> None:
    check_length([1e18, 0.0], "v")
    check_length([0.0, 1e-18], "v")
    with pytest.raises(ValueError, match="length 2e\\+18, above 1e\\+18"):
        check_length([2e18, 0.0], "v")
    with pytest.raises(ValueError, match="length 5e-19, below 1e-18"):
        check_length([5e-19], "v")
    with pytest.raises(ValidationError, match="below 1e-18"):
        VectorQuery(vector=[1e-30])


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
        ({"a": 2**63}, r"filter\['a'\] = 9223372036854775808 does not fit in a signed 64-bit integer"),
        ({"a": {"$in": [0, -(2**63) - 1]}}, r"filter\['a'\]\['\$in'\]\[1\]"),
        ({"a": "\x00"}, "NUL"),
        ({"a\x00": 1}, "NUL"),
        ({"a": "\ud800"}, "lone surrogate"),
        ({"a": {"$in": list(range(600))}, "b": {"$in": list(range(401))}}, "more than 1000 values"),
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
