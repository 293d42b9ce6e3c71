"""ext's metadata and filters in Chroma's terms.

Chroma's metadata cannot hold null (a null in an upsert deletes the key: `UpdateMetadataValue` in Chroma's
`chroma_types`), and its `where` language has no "key is absent" test. So each record also carries two reserved
arrays: `ext:keys` (the keys with a non-null value) and `ext:nulls` (the keys whose value is null). ext's
`{key: None}` ("null or absent") becomes `{"ext:keys": {"$not_contains": key}}`, and `get` gives the nulls back.

Chroma's `$in` takes values of one kind only (a list mixing strings, bools, ints or floats is an "Invalid where
clause", 400), so a condition is split by kind and the parts joined with `$or`. Chroma compares ints and floats by
value (`1` matches `1.0`) and keeps bools apart from numbers, as ext's filter language asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ext.core import MetadataValue

KEYS = "ext:keys"
NULLS = "ext:nulls"
_RESERVED_PREFIXES = ("ext:", "chroma:", "#")


def check_metadata(metadata: Mapping[str, MetadataValue], where: str) -> None:
    """Raise `ValueError` naming the key for a key Chroma keeps for itself. (What no store can keep, such as an
    empty key, a NaN or an integer beyond 64 bits, ext-core's `BaseVectorStore` has already refused.)"""
    for key in metadata:
        if key.startswith(_RESERVED_PREFIXES):
            # '#' starts Chroma's own keys (#document, #embedding; 400 "Invalid metadata"), 'chroma:document' is
            # where Chroma's log keeps the document (rust/log/src/sqlite_log.rs), and 'ext:' is this store's.
            raise ValueError(
                f"{where}: metadata key {key!r} is reserved (keys may not start with '#', 'chroma:' or 'ext:')"
            )


def encode(metadata: Mapping[str, MetadataValue], stale: set[str]) -> dict[str, Any] | None:
    """The metadata Chroma stores for a record: the non-null values, the two reserved arrays, and a null for each
    `stale` key (a key the stored record has and the new one lacks: Chroma's upsert merges metadata, and a null
    deletes a key)."""
    values = {key: value for key, value in metadata.items() if value is not None}
    out: dict[str, Any] = {key: None for key in stale if key not in values}
    out.update(values)
    out[KEYS] = sorted(values) or None
    nulls = sorted(key for key, value in metadata.items() if value is None)
    out[NULLS] = nulls or None
    if not stale and out[KEYS] is None and out[NULLS] is None:
        return None
    return out


def decode(stored: Mapping[str, Any] | None) -> dict[str, MetadataValue]:
    """A record's metadata as it was given (nulls included)."""
    if not stored:
        return {}
    out: dict[str, MetadataValue] = {key: value for key, value in stored.items() if not key.startswith("ext:")}
    for key in stored.get(NULLS) or ():
        out[key] = None
    return out


def _kind(value: MetadataValue) -> str:
    return type(value).__name__


def _condition(key: str, values: list[MetadataValue]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if any(value is None for value in values):
        parts.append({KEYS: {"$not_contains": key}})
    kinds: dict[str, list[MetadataValue]] = {}
    for value in values:
        if value is not None:
            kinds.setdefault(_kind(value), []).append(value)
    for same in kinds.values():
        parts.append({key: same[0]} if len(same) == 1 else {key: {"$in": same}})
    return parts[0] if len(parts) == 1 else {"$or": parts}


def where(filter: Mapping[str, list[MetadataValue]]) -> dict[str, Any] | None:
    """Chroma's `where` for a normalised ext filter (None for no filter: Chroma refuses an empty `where`)."""
    conditions = [_condition(key, values) for key, values in filter.items()]
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"$and": conditions}
