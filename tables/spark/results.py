"""Results of Spark jobs as JSON pages, read with pyarrow only (safe in the web process).

Contract:
- A result is a directory of Parquet part files written by Spark (`part-NNNNN-*.parquet`,
  plus `_SUCCESS` and checksum files that are ignored). Jobs sort before writing, so the part
  files in partition-number order, each in its own row order, are the result's order.
- `read_page(path, offset, limit)` returns {"columns": [{name, type}], "rows": [...],
  "total": n, "offset": offset, "limit": limit}: it reads the footers for the row counts and
  then only the row groups that overlap the page, never the whole result.
- Values are made JSON-safe by tables.delta.json_values (the one rendering of values).
  Column types use Delta's names (integer, long, decimal(10,2), timestamp_ntz, array<...>, struct<...>, map<...>).

No pyspark import here: the web process pages results without starting a JVM.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tables.delta.json_values import json_value
from tables.delta.log.actions import empty_table

MAX_PAGE = 10_000

_PART = re.compile(r"^part-(\d+)")


def type_name(t: pa.DataType) -> str:
    """Delta's name for an Arrow type (what the UI and API show as a column's type)."""
    if pa.types.is_int8(t):
        return "byte"
    if pa.types.is_int16(t):
        return "short"
    if pa.types.is_int32(t):
        return "integer"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_map(t):
        return f"map<{type_name(t.key_type)},{type_name(t.item_type)}>"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return f"array<{type_name(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{type_name(f.type)}" for f in t) + ">"
    if pa.types.is_null(t):
        return "void"
    return str(t)


def columns_of(schema: pa.Schema) -> list[dict[str, str]]:
    """[{name, type}] of a result's columns, the types by Delta's names."""
    return [{"name": f.name, "type": type_name(f.type)} for f in schema]


def written_columns(path: str | Path) -> list[dict[str, str]]:
    """`columns_of` a written result, from its first part file ([] when it has none)."""
    files = part_files(path)
    return columns_of(pq.ParquetFile(files[0]).schema_arrow) if files else []


def table_to_json(table: pa.Table) -> dict[str, Any]:
    """{"columns": [{name, type}], "rows": [{column: value}]} for an Arrow table."""
    columns = columns_of(table.schema)
    types = {f.name: f.type for f in table.schema}
    rows = [{k: json_value(v, types[k]) for k, v in row.items()} for row in table.to_pylist()]
    return {"columns": columns, "rows": rows}


def part_files(path: str | Path) -> list[Path]:
    """The Parquet part files of a result directory in result order (or the file itself)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: no such result")
    files = [f for f in p.iterdir() if f.is_file() and f.suffix == ".parquet" and not f.name.startswith((".", "_"))]

    def order(f: Path) -> tuple[int, str]:
        m = _PART.match(f.name)
        return (int(m[1]) if m else -1, f.name)

    return sorted(files, key=order)


def read_page(path: str | Path, offset: int = 0, limit: int = 100) -> dict[str, Any]:
    """One page of a Parquet result (see the module's contract)."""
    offset = max(0, int(offset))
    limit = max(0, min(int(limit), MAX_PAGE))
    files = part_files(path)
    schema: pa.Schema | None = None
    total = 0
    pieces: list[pa.Table] = []
    start, stop = offset, offset + limit
    for f in files:
        pf = pq.ParquetFile(f)
        if schema is None:
            schema = pf.schema_arrow
        meta = pf.metadata
        for rg in range(meta.num_row_groups):
            n = meta.row_group(rg).num_rows
            lo, hi = total, total + n
            total = hi
            if hi <= start or lo >= stop or n == 0:
                continue
            t = pf.read_row_group(rg)
            pieces.append(t.slice(max(0, start - lo), min(hi, stop) - max(lo, start)))
    if schema is None:
        schema = pa.schema([])
    table = pa.concat_tables(pieces) if pieces else empty_table(schema)
    out = table_to_json(table)
    return {**out, "total": total, "offset": offset, "limit": limit}
