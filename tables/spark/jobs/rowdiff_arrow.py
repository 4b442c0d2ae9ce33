"""The keyed row diff by pyarrow in the job's own process, for local versions of flat columns.

A keyed diff on Spark reads both versions twice and shuffles a fingerprint of every row (see
`tables.spark.jobs.rowdiff`): on two cores, a 10 M-row diff took 1.9x a pyarrow join over
delta-rs's reads. Here each version's files are read once, by pyarrow, and the diff is one
hash aggregation over both versions' keys (which rows of each side hold a key: its
repetitions, the keys of one side only and the pairs to compare in the same pass), the pairs'
columns compared by Arrow's kernels, and only the differing rows' values taken.

It answers exactly what the Spark route answers (the same file of rows, sorted as Spark
sorts them), so it takes only what it can answer the same way, else `Declined` and Spark
runs as before:
- both sides local (object stores are read by Spark's routes), every file present and
  readable by pyarrow (Spark then names a missing or broken file as it always has);
- column mapping none or name (id mode matches Parquet field ids: Spark's reader);
- flat columns whose equality and order Arrow computes as Spark does: integers, booleans,
  strings and binary without collations, dates, timestamps, decimals, and floating point
  outside the keys (Spark makes -0.0 and 0.0 one key, Arrow two; NaN is compared as equal to
  NaN here as Spark does); no nested, map or void column, no column whose type changed
  between the versions (Spark compares those by their JSON form);
- at most ARROW_BYTES of data files and ARROW_ROWS rows (their footers'): both versions are
  held in memory, as the peer's join holds them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tables.delta.snapshot.columnmapping import physical_name
from tables.delta.snapshot.partitions import typed_partition_values
from tables.delta.storage.boundary import Storage
from tables.spark.reading.read import Layout, ScanEntry, local_file

__all__ = [
    "ARROW_BYTES",
    "ARROW_ROWS",
    "Declined",
    "Side",
    "arrow_diff",
    "check_size",
    "check_types",
    "local_files",
    "read_side",
]

# Both versions' data files together up to this many bytes and rows take this route: their
# columns are held in memory (10 M rows of five columns, 250 MB of Parquet: about 0.8 GB of
# Arrow for both versions, as the peer's join holds).
ARROW_BYTES = 512 << 20
ARROW_ROWS = 25_000_000
READ_THREADS = 4

_INTS = {"byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64()}
_FLAT = {
    **_INTS,
    "boolean": pa.bool_(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "float": pa.float32(),
    "double": pa.float64(),
}


class Declined(Exception):
    """This diff is not one the Arrow route answers as Spark would: Spark makes it."""


@dataclass(slots=True)
class Side:
    """One version to read: its storage, layout and files (entries with deletion vectors)."""

    storage: Storage
    version: int
    layout: Layout
    entries: list[ScanEntry]


def _arrow_type(field: dict[str, Any]) -> pa.DataType:
    """The Arrow type Spark's result holds for a flat Delta column; Declined for any other."""
    t = field["type"]
    if not isinstance(t, str) or "__COLLATIONS" in (field.get("metadata") or {}):
        raise Declined(f"column {field['name']}: nested or collated")
    name = t.strip().lower()
    if name in _FLAT:
        return _FLAT[name]
    if name.startswith("decimal(") and name.endswith(")"):
        precision, scale = (int(x) for x in name[8:-1].split(","))
        return pa.decimal128(precision, scale)
    raise Declined(f"column {field['name']}: type {name}")


def _types(side: Side) -> dict[str, pa.DataType]:
    return {f["name"]: _arrow_type(f) for f in side.layout.schema.get("fields", [])}


def local_files(side: Side) -> list[Path]:
    """Each entry's file, confined by the storage (a path outside the roots is refused here, as
    Spark's route refuses it); Declined for an object store or column mapping by field id."""
    if getattr(side.storage, "remote", False):
        raise Declined("an object store")
    if side.layout.mode == "id":
        raise Declined("column mapping by field id")
    resolved: dict[str, Path] = {}
    for e in side.entries:
        if e.path not in resolved:
            resolved[e.path] = local_file(side.storage, e.path)
    return [resolved[e.path] for e in side.entries]


def check_types(sides: Sequence[Side], keys: list[str]) -> None:
    """Declined unless every column of both versions is one this route compares as Spark, the
    keys not floating point and no column's type changed between the versions."""
    a, b = (_types(s) for s in sides)
    for k in keys:
        if a[k] != b[k] or pa.types.is_floating(a[k]):
            raise Declined(f"key {k}: floating point or changed type")
    if any(c in b and b[c] != t for c, t in a.items()):
        raise Declined("a column's type changed")


def check_size(files: Sequence[Sequence[Path]]) -> None:
    """Declined above ARROW_BYTES or ARROW_ROWS (footers') of distinct files, or when one is
    missing or has no readable footer (Spark's route names it, as it always has)."""
    size = rows = 0
    for p in {p for side in files for p in side}:
        try:
            size += p.stat().st_size
            if size > ARROW_BYTES:
                raise Declined("too many bytes")
            rows += pq.read_metadata(p).num_rows
        except (OSError, pa.ArrowException) as exc:
            raise Declined(f"{p.name}: {exc}") from None
        if rows > ARROW_ROWS:
            raise Declined("too many rows")
    if size > ARROW_BYTES:  # a bound below zero switches the route off
        raise Declined("too many bytes")


def _fit(arr: pa.ChunkedArray, target: pa.DataType, int96: bool) -> pa.ChunkedArray:
    """A file's column as the type Spark reads it as (Declined where Spark's reading differs)."""
    if arr.type == target:
        return arr
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(arr.type):
        # INT96 (Spark's older timestamps) is an instant pyarrow reads without a time zone
        if (arr.type.tz is None) != (target.tz is None) and not (int96 and target.tz):
            raise Declined("a timestamp's time zone differs from the schema's")
        if int96 and target.tz:
            arr = arr.cast(pa.timestamp(arr.type.unit, tz="UTC"))
        return arr.cast(target, safe=False)  # nanoseconds truncated as Spark's reader does
    if pa.types.is_string(target) and pa.types.is_large_string(arr.type):
        return arr.cast(target)
    if pa.types.is_integer(target) and pa.types.is_integer(arr.type) and arr.type.bit_width <= target.bit_width:
        return arr.cast(target)  # a widened column (type widening)
    raise Declined(f"a file's {arr.type} for {target}")


def _read_file(side: Side, entry: ScanEntry, path: Path, types: dict[str, pa.DataType]) -> pa.Table:
    """One entry's rows with the version's logical columns, typed as Spark reads them."""
    layout = side.layout
    fields = {f["name"]: f for f in layout.schema.get("fields", [])}
    parts = {p.name: i for i, p in enumerate(layout.partitions)}
    pf = pq.ParquetFile(path)
    present = set(pf.schema_arrow.names)
    physical = {n: physical_name(fields[n], layout.mode) for n in types if n not in parts}
    wanted = [p for p in physical.values() if p in present]
    t = pf.read(columns=wanted, use_threads=True)
    int96 = {pf.schema.column(i).name for i in range(len(pf.schema)) if pf.schema.column(i).physical_type == "INT96"}
    values = typed_partition_values(entry.partition_values, layout.partitions) if parts else []
    n = t.num_rows
    columns = []
    for name, target in types.items():
        if name in parts:
            columns.append(pa.chunked_array([pa.repeat(pa.scalar(values[parts[name]], target), n)], target))
        elif physical[name] in present:
            columns.append(_fit(t.column(physical[name]), target, physical[name] in int96))
        else:  # a column the file predates
            columns.append(pa.chunked_array([pa.nulls(n, target)], target))
    out = pa.Table.from_arrays(columns, schema=pa.schema([pa.field(c, tt) for c, tt in types.items()]))
    if entry.rows is not None and len(entry.rows):
        keep = np.zeros(n, bool) if entry.only else np.ones(n, bool)
        keep[entry.rows[entry.rows < n]] = entry.only
        out = out.filter(pa.array(keep))
    elif entry.only:
        out = out.slice(0, 0)
    return out


def read_side(side: Side, files: list[Path]) -> pa.Table:
    """A version's rows as one Arrow table (its files read in parallel); Declined when pyarrow
    cannot read one of them (Spark's route then names it)."""
    types = _types(side)
    schema = pa.schema([pa.field(c, t) for c, t in types.items()])
    if not side.entries:
        return schema.empty_table()

    def one(i: int) -> pa.Table:
        return _read_file(side, side.entries[i], files[i], types)

    try:
        if len(files) == 1:
            tables = [one(0)]
        else:
            with ThreadPoolExecutor(min(READ_THREADS, len(files), os.cpu_count() or 1)) as pool:
                tables = list(pool.map(one, range(len(files))))
    except (OSError, pa.ArrowException) as exc:
        raise Declined(f"unreadable: {exc}") from None
    return pa.concat_tables(tables)


def _same(x: pa.ChunkedArray, y: pa.ChunkedArray) -> pa.ChunkedArray:
    """Null-safe equality as Spark's `<=>` (NaN equals NaN, -0.0 equals 0.0)."""
    same = pc.or_(pc.fill_null(pc.equal(x, y), False), pc.and_(pc.is_null(x), pc.is_null(y)))
    if pa.types.is_floating(x.type):
        both_nan = pc.and_(pc.fill_null(pc.is_nan(x), False), pc.fill_null(pc.is_nan(y), False))
        same = pc.or_(same, both_nan)
    return same


def _row_struct(t: pa.Table, keys: list[str], idx: pa.Array) -> pa.Array:
    """The non-key columns of `t` at `idx` as a struct, null where `idx` is null; a version of
    key columns only gives null strings (as Spark's route: Parquet has no empty struct)."""
    others = [c for c in t.column_names if c not in keys]
    if not others:
        return pa.nulls(len(idx), pa.string())
    children = [t.column(c).take(idx).combine_chunks() for c in others]
    fields = [pa.field(c, t.schema.field(c).type) for c in others]
    return pa.StructArray.from_arrays(children, fields=fields, mask=pc.is_null(idx))


@dataclass(slots=True)
class Outcome:
    """The diff's rows (sorted, as written), or the count of repeated key values per side."""

    table: pa.Table | None
    repeated: tuple[int, int]


def arrow_diff(a: pa.Table, b: pa.Table, keys: list[str], compared: list[str]) -> Outcome:
    """The keyed diff of two versions' rows, as `tables.spark.jobs.rowdiff` writes it."""
    n_a, n_b = a.num_rows, b.num_rows
    # one hash aggregation over both sides' keys: per key value, how many rows of each side
    # hold it and (for one row) which; Arrow groups null keys together as Spark's null-safe join
    ia = pa.concat_arrays([pa.array(np.arange(n_a, dtype=np.int64)), pa.nulls(n_b, pa.int64())])
    ib = pa.concat_arrays([pa.nulls(n_a, pa.int64()), pa.array(np.arange(n_b, dtype=np.int64))])
    both_keys = pa.concat_tables([a.select(keys), b.select(keys)])
    per_key = (
        both_keys.append_column("__ia", ia)
        .append_column("__ib", ib)
        .group_by(keys)
        .aggregate([("__ia", "count"), ("__ib", "count"), ("__ia", "max"), ("__ib", "max")])
    )
    ca, cb = per_key.column("__ia_count"), per_key.column("__ib_count")
    repeated = (pc.sum(pc.greater(ca, 1)).as_py() or 0, pc.sum(pc.greater(cb, 1)).as_py() or 0)
    if any(repeated):
        return Outcome(None, repeated)

    pairs = per_key.filter(pc.and_(pc.equal(ca, 1), pc.equal(cb, 1)))
    pa_idx, pb_idx = pairs.column("__ia_max"), pairs.column("__ib_max")
    differs = np.zeros((pairs.num_rows, len(compared)), dtype=bool)
    for j, c in enumerate(compared):
        same = _same(a.column(c).take(pa_idx), b.column(c).take(pb_idx))
        differs[:, j] = ~same.to_numpy()
    changed_rows = np.flatnonzero(differs.any(axis=1))
    changed = pairs.take(pa.array(changed_rows, pa.int64()))
    one_side = per_key.filter(pc.or_(pc.equal(ca, 0), pc.equal(cb, 0)))

    rows = pa.concat_tables([changed, one_side]).combine_chunks()
    idx_a, idx_b = rows.column("__ia_max").combine_chunks(), rows.column("__ib_max").combine_chunks()
    kind = pc.if_else(pc.is_null(idx_a), "added", pc.if_else(pc.is_null(idx_b), "removed", pa.scalar("changed")))
    flags = np.zeros((rows.num_rows, len(compared)), dtype=bool)
    flags[: len(changed_rows)] = differs[changed_rows]
    offsets = np.concatenate([[0], np.cumsum(flags.sum(axis=1))]).astype(np.int32)
    names = np.array(compared, dtype=object)[np.nonzero(flags)[1]] if compared else np.array([], dtype=object)
    changed_columns = pa.ListArray.from_arrays(pa.array(offsets), pa.array(names.tolist(), pa.string()))
    before, after = _row_struct(a, keys, idx_a), _row_struct(b, keys, idx_b)
    columns = [kind, *(rows.column(k) for k in keys), changed_columns, before, after]
    # as Spark writes them: the kind and the changed columns never null, the rest nullable
    schema = pa.schema(
        [
            pa.field("_diff", pa.string(), nullable=False),
            *(pa.field(k, a.schema.field(k).type) for k in keys),
            pa.field("_changed_columns", changed_columns.type, nullable=False),
            pa.field("_before", before.type),
            pa.field("_after", after.type),
        ]
    )
    out = pa.Table.from_arrays(columns, schema=schema)
    # Spark's order: keys ascending, nulls first (strings and binary by their bytes, as Arrow)
    order = pc.sort_indices(out, sort_keys=[(k, "ascending", "at_start") for k in [*keys, "_diff"]])
    return Outcome(out.take(order), (0, 0))
