"""Values as JSON carries them: the one rendering every answer of rows uses (a preview, a diff,
change data, a query's result, a row's history), in pages, API answers and CSV.

Rules: dates and times ISO-8601 (timezone-aware timestamps in UTC with `Z`, timestamp_ntz
without a zone), a duration ISO-8601 too (`P1DT2H3M4.5S`, `-PT1S`, `PT0S`), decimals as plain
strings with no exponent and no float rounding (`Decimal("1E+2")` is "100"), bytes as base64
(standard alphabet, padded), NaN and infinities as the strings "NaN", "Infinity" and
"-Infinity", structs and dicts as objects with string keys, lists as lists, and a map whose
Arrow type is given as a list of {"key", "value"} objects (a map's keys need not be strings).

Pure: no Django, no Spark.
"""

from __future__ import annotations

import base64
import math
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa


def duration_text(value: timedelta) -> str:
    """A duration as ISO-8601 (days, hours, minutes and seconds with their fraction)."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    days, rest = divmod(micros, 86_400_000_000)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = format(Decimal(rest) / 1_000_000, "f").rstrip("0").rstrip(".") if rest else ""
    clock = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n) + (
        f"{seconds}S" if seconds else ""
    )
    text = (f"{days}D" if days else "") + (f"T{clock}" if clock else "")
    return f"{sign}P{text or 'T0S'}"


def json_value(value: Any, t: pa.DataType | None = None) -> Any:
    """A Python value (from Arrow's to_pylist, or a key parsed from text) as something
    json.dumps accepts, losslessly; `t`, the value's Arrow type where known, tells a map from a
    list of pairs and types a struct's fields."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.isoformat()
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return duration_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if t is not None and pa.types.is_map(t):
        return [{"key": json_value(k, t.key_type), "value": json_value(v, t.item_type)} for k, v in value]
    if isinstance(value, dict):
        fields = {f.name: f.type for f in t} if t is not None and pa.types.is_struct(t) else {}
        return {str(k): json_value(v, fields.get(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        inner = t.value_type if t is not None and hasattr(t, "value_type") else None
        return [json_value(v, inner) for v in value]
    return str(value)
