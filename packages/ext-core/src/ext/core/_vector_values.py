"""What a vector store accepts: the checks every `BaseVectorStore` runs, once, before its backend is reached.

Every backend keeps vectors as float32 (sqlite-vec BLOBs, pgvector's `vector`, Chroma's hnswlib index) and computes
cosine similarity in float32 arithmetic (sqlite-vec's `vec_distance_cosine` and pgvector's cosine distance sum
`x * x` and `x * y` in float32). So:

- each component must be a finite number within float32's range (|x| <= 3.4028234663852886e38): a larger one
  becomes infinite when stored;
- a vector must not be all zeros, nor so small that every component underflows to zero as float32 (every |x| at
  most 2**-150, about 7e-46): cosine similarity is undefined for a zero vector (stores answer NaN, or never return
  it);
- a stored or queried vector's length (Euclidean norm) must lie within [1e-18, 1e18]: the squared length of a
  longer vector overflows float32 (all three stores scored `[1e20, 0, 0]` as NULL), and that of a shorter one
  underflows (SQLite scored `[1e-30, 0, 0]` as infinite, Chroma gave it back as zeros); at both bounds every store
  scores and returns the vector correctly.

Strings (ids, texts, metadata keys and string values, filter keys and values) must be valid Unicode without NUL
characters: PostgreSQL cannot store a NUL in `text` or `jsonb`, and no store can encode a lone surrogate. An id holds
at most 2048 bytes as UTF-8 (PostgreSQL's primary-key index refuses longer entries). Metadata and filter values are
JSON scalars: numbers finite, integers within signed 64 bits (what SQLite and Chroma keep); a filter holds at most
1000 values (SQLite and Chroma bind each value as one or more SQL parameters, and SQLite allows 32766 in a
statement: this store's 20000-value filter failed on Chroma with "too many SQL variables").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

MetadataValue: TypeAlias = str | int | float | bool | None

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32."""
FLOAT32_UNDERFLOW = 2.0**-150
"""Magnitudes at or below this round to zero as float32 (half the smallest subnormal, 1.4e-45)."""
MIN_LENGTH = 1e-18
MAX_LENGTH = 1e18
"""A vector's length (Euclidean norm) must lie within [MIN_LENGTH, MAX_LENGTH] for a store (module docstring)."""
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_ID_BYTES = 2048
"""An id's longest UTF-8 form: PostgreSQL's primary-key index refuses an entry past about 2700 bytes."""
MAX_FILTER_VALUES = 1000
"""A filter holds at most this many values in all (the module docstring says why)."""


def check_text(value: str, where: str) -> str:
    """`value` unless it holds a NUL character or a lone surrogate (`ValueError` naming `where`)."""
    if "\x00" in value:
        raise ValueError(f"{where} must not contain NUL characters ('\\x00'); PostgreSQL cannot store them")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{where} is not valid Unicode (a lone surrogate at position {exc.start}); stores keep UTF-8 text"
            ) from None
    return value


def check_id(value: str, where: str) -> str:
    """A record id: no NUL characters, valid Unicode, at most `MAX_ID_BYTES` bytes as UTF-8."""
    check_text(value, where)
    size = len(value) if value.isascii() else len(value.encode("utf-8"))
    if size > MAX_ID_BYTES:
        raise ValueError(f"{where} is {size} bytes as UTF-8; ids hold at most {MAX_ID_BYTES}")
    return value


def check_vector(vector: list[float], field: str) -> list[float]:
    """`vector` (floats, as pydantic gives them) unless a component is not finite or outside float32's range, or
    all of them are zero as float32 (`ValueError` naming the component and what was expected). Its length is a
    store's concern: see `check_length`."""
    if not vector:
        raise ValueError(f"{field} must not be empty")
    # One pass in C for the common case. hypot is NaN or infinite when a component is; it bounds every component
    # from above, and when it exceeds sqrt(n) times the underflow threshold some component does too.
    length = math.hypot(*vector)
    if FLOAT32_UNDERFLOW * math.sqrt(len(vector)) < length <= FLOAT32_MAX:
        return vector
    largest = 0.0
    for index, x in enumerate(vector):
        if not math.isfinite(x):
            raise ValueError(f"{field}[{index}] must be a finite number, got {x!r}")
        if abs(x) > FLOAT32_MAX:
            raise ValueError(
                f"{field}[{index}] = {x!r} is outside float32's range (-3.4028234663852886e+38 to "
                "3.4028234663852886e+38), the type every store keeps"
            )
        largest = max(largest, abs(x))
    if largest == 0.0:
        # Cosine similarity is undefined for a zero vector: every backend would answer NaN or fail.
        raise ValueError(f"{field} must not be all zeros (cosine similarity is undefined for it)")
    if largest <= FLOAT32_UNDERFLOW:
        raise ValueError(
            f"{field}: every component underflows to zero as float32 (the largest is {largest!r}; float32's "
            "smallest is about 1.4e-45), so the stored vector would be all zeros"
        )
    return vector  # components near float32's limits, whose length alone left the fast path


def check_length(vector: Sequence[float], field: str) -> None:
    """Raise `ValueError` unless the length of `vector` (already through `check_vector`) is within
    [MIN_LENGTH, MAX_LENGTH], where float32 cosine similarity holds."""
    length = math.hypot(*vector)
    if length < MIN_LENGTH:
        raise ValueError(
            f"{field} has length {length:.3g}, below {MIN_LENGTH:g}: stores compute cosine similarity in float32, "
            "where its squared length underflows to zero; scale it up (cosine similarity ignores length)"
        )
    if length > MAX_LENGTH:
        raise ValueError(
            f"{field} has length {length:.3g}, above {MAX_LENGTH:g}: stores compute cosine similarity in float32, "
            "where its squared length overflows; scale it down (cosine similarity ignores length)"
        )


def check_scalar(value: Any, where: str) -> MetadataValue:
    """`value` if it is a JSON scalar a store keeps as given: finite, an integer within signed 64 bits, a string
    without NUL characters."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{where} = {value} does not fit in a signed 64-bit integer (-2**63 to 2**63 - 1)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} must be a finite number, got {value!r}")
        return value
    if isinstance(value, str):
        return check_text(value, where)
    raise ValueError(f"{where} must be a JSON scalar (str, int, float, bool or None), got {type(value).__name__}")


def check_key(key: Any, where: str) -> str:
    """A metadata or filter key: a non-empty string without NUL characters."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"{where} keys must be non-empty strings, got {key!r}")
    return check_text(key, f"{where} key {key!r}")


def check_metadata(metadata: Mapping[str, Any]) -> dict[str, MetadataValue]:
    """Each key (non-empty, no NUL) and value (`check_scalar`) of a record's metadata."""
    return {check_key(key, "metadata"): check_scalar(value, f"metadata[{key!r}]") for key, value in metadata.items()}


def normalize_filter(value: Mapping[str, Any] | None) -> dict[str, list[MetadataValue]]:
    """The filter as key -> accepted values; `ValueError` naming the key and what was expected otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"filter must be a mapping of metadata key to a value or {{'$in': [...]}}, got {value!r}")
    out: dict[str, list[MetadataValue]] = {}
    total = 0
    for key, condition in value.items():
        check_key(key, "filter")
        if key.startswith("$"):
            raise ValueError(
                f"filter key {key!r}: operators go inside a key's condition, e.g. {{'k': {{'$in': [...]}}}}"
            )
        if isinstance(condition, Mapping):
            if set(condition) != {"$in"}:
                raise ValueError(f"filter[{key!r}] supports only '$in' (or a plain value), got {sorted(condition)}")
            values = condition["$in"]
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise ValueError(f"filter[{key!r}]['$in'] must be a non-empty list of values")
            out[key] = [check_scalar(v, f"filter[{key!r}]['$in'][{i}]") for i, v in enumerate(values)]
        else:
            out[key] = [check_scalar(condition, f"filter[{key!r}]")]
        total += len(out[key])
        if total > MAX_FILTER_VALUES:
            raise ValueError(f"filter holds more than {MAX_FILTER_VALUES} values in all; split the call")
    return out


def check_ids(ids: Sequence[str]) -> list[str]:
    """`ids` as a list of ids (`check_id`)."""
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        raise ValueError(f"ids must be a list of strings, got {type(ids).__name__}")
    for index, item in enumerate(ids):
        if not isinstance(item, str) or not item:
            raise ValueError(f"ids[{index}] must be a non-empty string, got {item!r}")
        check_id(item, f"ids[{index}]")
    return list(ids)
