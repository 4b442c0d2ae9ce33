"""Partition values: the log's strings to typed values (protocol "Partition Value Serialization").

`partitionValues` maps each partition column's physical name (the logical name without column
mapping) to a string; a missing key, JSON null or the empty string is a null value. Types:

- string: as is; binary: the string's UTF-8 bytes; boolean: "true" / "false"
- byte, short, integer, long: decimal integer text; float, double: number text, also NaN,
  Infinity, -Infinity; decimal(p,s): decimal text, rounded to scale s
- date: yyyy-MM-dd
- timestamp: yyyy-MM-dd HH:mm:ss[.SSSSSS] read as UTC, or ISO-8601 with a zone
  (e.g. 1970-01-01T00:00:00.123456Z): an aware UTC datetime
- timestamp_ntz: yyyy-MM-dd HH:mm:ss[.SSSSSS]: a naive datetime (never shifted)

A value that does not parse raises CorruptLogError naming the column and the text: reading on
with a null would return wrong data. Pure; no Spark, no Django.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.errors import CorruptLogError, UnsupportedFeatureError
from tables.delta.log.actions import Metadata
from tables.delta.snapshot.schema.columnmapping import physical_name

_INT_RANGES = {"byte": 8, "short": 16, "integer": 32, "long": 64}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_FLOAT_WORDS = {"nan": "nan", "infinity": "inf", "+infinity": "inf", "-infinity": "-inf", "inf": "inf", "-inf": "-inf"}


@dataclass(frozen=True, slots=True)
class PartitionColumn:
    name: str  # logical
    key: str  # key in partitionValues (physical name)
    type: str  # Delta primitive type name


def partition_columns(metadata: Metadata, mode: str) -> list[PartitionColumn]:
    """The table's partition columns in partitionColumns order, with their keys and types."""
    fields = {f["name"]: f for f in metadata.schema.get("fields", [])}
    out = []
    for name in metadata.partition_columns:
        f = fields.get(name)
        if f is None:
            raise CorruptLogError(f"partition column '{name}' is not in the table schema")
        if not isinstance(f["type"], str):
            raise UnsupportedFeatureError(f"partition column '{name}' has a nested type", feature="partitionType")
        out.append(PartitionColumn(name, physical_name(f, mode), f["type"]))
    return out


def _timestamp(text: str, ntz: bool) -> datetime:
    s = text.strip()
    if re.match(r"^\d{4}-\d{2}-\d{2}$", s):
        s += " 00:00:00"
    s = re.sub(r"[zZ]$", "+00:00", s)
    dt = datetime.fromisoformat(s)
    if ntz:
        if dt.tzinfo is not None:
            raise ValueError("a timestamp without time zone carries a zone")
        return dt
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def parse_partition_value(text: str | None, type_name: str, column: str = "") -> Any:
    """A partition value string as a typed Python value (None for null)."""
    if text is None or text == "":
        return None
    t = type_name.strip().lower()
    try:
        if t == "string":
            return text
        if t == "binary":
            return text.encode("utf-8")
        if t == "boolean":
            low = text.strip().lower()
            if low not in ("true", "false"):
                raise ValueError("not true or false")
            return low == "true"
        if t in _INT_RANGES:
            value = int(text.strip())
            bits = _INT_RANGES[t]
            if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
                raise ValueError(f"out of range for {t}")
            return value
        if t in ("float", "double"):
            s = text.strip()
            return float(_FLOAT_WORDS.get(s.lower(), s))
        if m := _DECIMAL.match(t):
            precision, scale = int(m[1]), int(m[2])
            value = Decimal(text.strip()).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
            if len(value.as_tuple().digits) > precision and value != 0:
                raise ValueError(f"does not fit decimal({precision},{scale})")
            return value
        if t == "date":
            return date.fromisoformat(text.strip())
        if t == "timestamp":
            return _timestamp(text, ntz=False)
        if t == "timestamp_ntz":
            return _timestamp(text, ntz=True)
    except (ValueError, InvalidOperation, OverflowError) as exc:
        raise CorruptLogError(
            f"partition value {text[:80]!r} of column '{column or '?'}' is not a valid {type_name} ({exc})",
            column=column,
        ) from exc
    raise UnsupportedFeatureError(
        f"partition column '{column or '?'}' has type {type_name}, which this reader cannot type",
        feature="partitionType",
    )


def typed_partition_values(values: dict[str, str | None] | None, columns: list[PartitionColumn]) -> list[Any]:
    """One file's partition values in `columns` order, typed."""
    values = values or {}
    return [parse_partition_value(values.get(c.key), c.type, c.name) for c in columns]


# --- distinct partitions of a file list ----------------------------------------------------------
# A table has far fewer partitions than files: a predicate or a per-partition count is worked
# out once per distinct partition tuple and mapped back to the files with numpy.


def partition_value_columns(files: pa.Table, columns: list[PartitionColumn]) -> list[pa.Array]:
    """Each column's raw partition value strings for every file of `files` (a snapshot's
    file batch), with the empty string as null (the log writes both for a null value)."""
    n = files.num_rows
    if n == 0:
        return [pa.array([], pa.string()) for _ in columns]
    pv = files.column("partitionValues").combine_chunks()
    names = {pv.type.field(i).name for i in range(pv.type.num_fields)} if pa.types.is_struct(pv.type) else set()
    out = []
    for c in columns:
        if c.key not in names:
            out.append(pa.nulls(n, pa.string()))
            continue
        child = pc.struct_field(pv, c.key)  # null where the struct itself is null
        if not pa.types.is_string(child.type):
            child = pc.cast(child, pa.string())
        out.append(pc.if_else(pc.equal(child, ""), pa.scalar(None, pa.string()), child))
    return out


def distinct_partitions(
    files: pa.Table, columns: list[PartitionColumn]
) -> tuple[np.ndarray, list[dict[str, str | None]]]:
    """(for each file the index of its partition, the distinct partitions as {key: raw value
    string or None}), computed with dictionary encoding and numpy rather than per file."""
    n = files.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64), []
    if not columns:
        return np.zeros(n, dtype=np.int64), [{}]
    raw = partition_value_columns(files, columns)
    codes = []
    for values in raw:
        enc = pc.dictionary_encode(values)
        codes.append(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64))
    stacked = np.stack(codes, axis=1)
    _uniq, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    picked = [v.take(pa.array(first)).to_pylist() for v in raw]
    parts = [{c.key: picked[j][i] for j, c in enumerate(columns)} for i in range(len(first))]
    return inverse.reshape(-1).astype(np.int64), parts
