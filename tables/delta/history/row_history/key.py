"""The key of a row history: the key's columns, typed from their text in the range's last
schema, and how a row's values are compared with it (see the package's rules).

Pure: no storage, no Django, no Spark.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from tables.delta.errors import InvalidColumnsError
from tables.delta.json_values import json_value
from tables.delta.snapshot.partitions import PartitionColumn
from tables.delta.snapshot.schema.columnmapping import physical_name

KEY_TYPES = "byte, short, integer, long, string, date, decimal(p,s), boolean"
_INT_BITS = {"byte": 8, "short": 16, "integer": 32, "long": 64}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_INTEGER_TEXT = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True, slots=True)
class KeyColumn:
    name: str  # logical
    physical: str  # the name in data files and statistics
    type: str  # Delta primitive type name
    value: Any  # typed
    partition: str | None  # its key in partitionValues when it partitions the table


def is_key_type(type_name: Any) -> bool:
    """Whether a column of this Delta type can be a key column (KEY_TYPES)."""
    t = type_name.strip().lower() if isinstance(type_name, str) else ""
    return t in ("string", "boolean", "date", *_INT_BITS) or bool(_DECIMAL.match(t))


def cast_key_value(text: str, type_name: Any, column: str) -> Any:
    """A key's text as a value of the column's Delta type; InvalidColumnsError otherwise."""
    t = type_name.strip().lower() if isinstance(type_name, str) else ""
    shown = f"key {column}={text[:80]!r}"
    try:
        if t == "string":
            return text
        if t in _INT_BITS:
            if not _INTEGER_TEXT.match(text.strip()):
                raise ValueError("not an integer")
            value, bits = int(text.strip()), _INT_BITS[t]
            if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
                raise ValueError(f"out of range for {t}")
            return value
        if t == "boolean":
            if text.strip().lower() not in ("true", "false"):
                raise ValueError("use true or false")
            return text.strip().lower() == "true"
        if t == "date":
            return date.fromisoformat(text.strip())
        if m := _DECIMAL.match(t):
            return _decimal(text, int(m[1]), int(m[2]))
    except (ValueError, InvalidOperation) as exc:
        raise InvalidColumnsError(f"{shown}: not a valid {type_name} ({exc})", column=column) from exc
    kind = type_name if isinstance(type_name, str) else str(type_name.get("type", "nested"))
    raise InvalidColumnsError(
        f"{shown}: column '{column}' has type {kind[:40]}; a key column must be one of {KEY_TYPES}",
        column=column,
    )


def _decimal(text: str, precision: int, scale: int) -> Decimal:
    # a key with more decimal places than the column holds names no row: refuse, never round
    value = Decimal(text.strip())
    if not value.is_finite():
        raise ValueError("not a finite number")
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -scale and value != value.quantize(Decimal(1).scaleb(-scale)):
        raise ValueError(f"more than {scale} decimal places")
    value = value.quantize(Decimal(1).scaleb(-scale))
    if len(value.as_tuple().digits) > precision and value != 0:
        raise ValueError(f"more than {precision} digits")
    return value


def parse_key(
    schema: dict[str, Any], mode: str, partitions: list[PartitionColumn], pairs: Iterable[tuple[str, str]]
) -> list[KeyColumn]:
    """The key columns, typed, from (column, text) pairs; InvalidColumnsError for an unknown or
    repeated column or an empty key."""
    fields = {f["name"]: f for f in schema.get("fields", [])}
    by_name = {p.name: p for p in partitions}
    out: list[KeyColumn] = []
    for name, text in pairs:
        f = fields.get(name)
        if f is None:
            known = ", ".join(list(fields)[:50])
            raise InvalidColumnsError(
                f"key column {name[:80]!r} is not a column of the table (its columns: {known})", column=name
            )
        if any(k.name == name for k in out):
            raise InvalidColumnsError(f"key column {name[:80]!r} is given twice", column=name)
        value = cast_key_value(str(text), f["type"], name)
        part = by_name.get(name)
        out.append(KeyColumn(name, physical_name(f, mode), f["type"], value, part.key if part else None))
    if not out:
        raise InvalidColumnsError("a row history needs a key: one or more columns with their values")
    return out


def key_pairs(key: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
    items = key.items() if isinstance(key, Mapping) else key
    return [(str(name), v if isinstance(v, str) else json.dumps(json_value(v)).strip('"')) for name, v in items]


def key_text(keys: list[KeyColumn]) -> str:
    return ", ".join(f"{k.name}={json_value(k.value)}" for k in keys)


def same_value(a: Any, b: Any) -> bool:
    """Values equal as a row's history compares them: NaN equals NaN (inside structs, arrays
    and maps too, where Python's == would call two NaN objects different), a boolean is never
    a number."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def key_holds(values: Mapping[str, Any], keys: list[KeyColumn]) -> bool:
    """Whether a row's logical values hold the key (the exact check: a boolean is never 1)."""
    return all(same_value(values.get(k.name), k.value) for k in keys)
