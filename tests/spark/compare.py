"""Comparing rows from Spark and from delta-rs as multisets, whatever the column order.

Values are normalized so that equal data compares equal across the two engines: aware
timestamps in UTC (Spark's session zone vs delta-rs's 'UTC'), NaN as a marker (NaN != NaN),
maps (lists of key/value pairs) as sorted tuples, structs as sorted items, lists as tuples,
string views as strings.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa


def norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, datetime) and v.tzinfo is not None:
        return v.astimezone(UTC)
    if isinstance(v, dict):
        return tuple(sorted((k, norm(x)) for k, x in v.items()))
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
            return ("map", tuple(sorted((repr(norm(k)), norm(x)) for k, x in v)))
        return tuple(norm(x) for x in v)
    return v


def multiset(table: pa.Table, drop: tuple[str, ...] = ()) -> tuple[list[str], Counter]:
    """(sorted column names, Counter of normalized rows in that column order)."""
    names = sorted(n for n in table.column_names if n not in drop)
    return names, Counter(tuple(norm(r[n]) for n in names) for r in table.to_pylist())


def rows_of(items: list[dict[str, Any]]) -> Counter:
    """Counter of normalized rows given as dicts (expected values written in a test)."""
    return Counter(tuple(norm(r[k]) for k in sorted(r)) for r in items)
