"""The keyed row diff by pyarrow in the job's own process, for local versions of flat columns.

A keyed diff on Spark reads both versions twice and shuffles a fingerprint of every row (see
`tables.spark.jobs.rowdiff`): on two cores, a 10 M-row diff took 1.9x a pyarrow join over
delta-rs's reads. Here each version's files are read once, by pyarrow (both versions' files
in one pool of threads); the rows of both versions are matched on the keys (one integer, date
or timestamp key without nulls by sorting with numpy, other keys by a hash join of the keys
and row numbers, nulls matching nulls), which also finds repeated keys, the keys of one side
only and the pairs to compare; the pairs' columns are compared by Arrow's kernels, and only
the differing rows' values taken. A version already in key order (a table written in key
order, the usual case; checked on its keys, one pass) is neither sorted nor gathered: its
paired values are taken by a filter, one sequential pass over each column. A version whose
key order is a few blocks of rows (delta-rs spreads a table written in key order over its
files in blocks) is put in that order by reordering the blocks' slices, then filtered too.

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
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tables.delta.snapshot.partitions import typed_partition_values
from tables.delta.snapshot.schema.columnmapping import physical_name
from tables.delta.storage.api import Storage
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
    "read_sides",
]

# Both versions' data files together up to this many bytes and rows take this route: their
# columns are held in memory (10 M rows of five columns, 250 MB of Parquet: about 0.8 GB of
# Arrow for both versions, as the peer's join holds).
ARROW_BYTES = 512 << 20
ARROW_ROWS = 25_000_000
READ_THREADS = 4
# A side whose key order is fewer blocks of consecutive rows than this is put in key order by
# reordering the blocks' slices (gathering its columns by row numbers costs more).
MAX_RUNS = 1024

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
    if side.storage.remote:
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


def read_sides(sides: Sequence[Side], files: Sequence[list[Path]], key: str | None = None) -> list[pa.Table]:
    """Each version's rows as one Arrow table, the files of both versions read in one pool of
    threads (a version of one or two files is read beside the other, not after it), each
    version's files in the order of their least `key` value when one is given (a table written
    in key order into several files is then in key order, whatever the order of its log's
    entries); Declined when pyarrow cannot read one of them (Spark's route then names it)."""
    types = [_types(s) for s in sides]
    jobs = [(i, j) for i, side in enumerate(sides) for j in range(len(side.entries))]

    def one(job: tuple[int, int]) -> pa.Table:
        i, j = job
        return _read_file(sides[i], sides[i].entries[j], files[i][j], types[i])

    try:
        if len(jobs) <= 1:
            tables = [one(job) for job in jobs]
        else:
            with ThreadPoolExecutor(min(READ_THREADS, len(jobs), os.cpu_count() or 1)) as pool:
                tables = list(pool.map(one, jobs))
    except (OSError, pa.ArrowException) as exc:
        raise Declined(f"unreadable: {exc}") from None
    out, start = [], 0
    for side, side_types in zip(sides, types, strict=True):
        end = start + len(side.entries)
        schema = pa.schema([pa.field(c, t) for c, t in side_types.items()])
        parts = tables[start:end]
        if key is not None and len(parts) > 1 and _ordered_type(side_types[key]):
            parts.sort(key=lambda t: _least(t.column(key)))
        out.append(pa.concat_tables(parts) if parts else schema.empty_table())
        start = end
    return out


def _ordered_type(t: pa.DataType) -> bool:
    """Whether a key of this type is matched by sorting (`_sortable_key`)."""
    return pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)


def _least(column: pa.ChunkedArray) -> tuple[bool, Any]:
    """A file's least key value, for ordering its files (those without one first)."""
    least = pc.min(column).as_py()
    return (least is not None, least)


def read_side(side: Side, files: list[Path]) -> pa.Table:
    """A version's rows as one Arrow table (`read_sides` of one version)."""
    return read_sides([side], [files])[0]


def _same(x: pa.ChunkedArray, y: pa.ChunkedArray) -> pa.ChunkedArray:
    """Null-safe equality as Spark's `<=>` (NaN equals NaN, -0.0 equals 0.0)."""
    if x.null_count or y.null_count:
        same = pc.or_(pc.fill_null(pc.equal(x, y), False), pc.and_(pc.is_null(x), pc.is_null(y)))
    else:  # a column without nulls, the usual one: one kernel instead of five
        same = pc.equal(x, y)
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


@dataclass(slots=True)
class Match:
    """The rows of both sides matched on the keys: the pairs (a's and b's row numbers, in one
    order) and each side's rows alone. A side whose pairs are in its rows' own order (a side
    already in key order, matched by sorting) has the mask of its paired rows too: filtering
    its columns by it takes the pairs' values in one sequential pass, where gathering them by
    their numbers jumps about."""

    pair_a: np.ndarray
    pair_b: np.ndarray
    alone_a: np.ndarray
    alone_b: np.ndarray
    mask_a: np.ndarray | None = None
    mask_b: np.ndarray | None = None


def _repeated(t: pa.Table, keys: list[str]) -> int:
    """How many key values repeat in `t` (a null key value is one value, as Spark's null-safe
    join matches it)."""
    counts = t.select(keys).group_by(keys).aggregate([([], "count_all")]).column("count_all")
    return pc.sum(pc.greater(counts, 1)).as_py() or 0


def _any_repeated(joined: pa.Table, a: pa.Table, b: pa.Table, keys: list[str]) -> bool:
    """Whether a key repeats on either side, read from their join: a row matched more than once (a key of both sides repeated on one), or a key repeated among the rows of
    one side only (few, usually; a distinct count over all rows took longer than the join)."""
    ja, jb = joined.column("__ia"), joined.column("__ib")
    for idx, n in ((ja, a.num_rows), (jb, b.num_rows)):
        matched = pc.drop_null(idx).to_numpy()
        if len(matched) and np.bincount(matched, minlength=n).max() > 1:
            return True
    for t, idx, other in ((a, ja, jb), (b, jb, ja)):
        alone = pc.filter(idx, pc.is_null(other))
        if len(alone) > 1 and _repeated(t.select(keys).take(alone), keys):
            return True
    return False


def _join_keys(a: pa.Table, b: pa.Table, keys: list[str]) -> tuple[pa.Table, pa.Table, list[str]]:
    """Both sides' key columns for a hash join that matches null with null (Spark's `<=>`): a
    key column holding nulls is joined as (its value, nulls filled; whether it was null)."""
    left: dict[str, Any] = {}
    right: dict[str, Any] = {}
    for i, k in enumerate(keys):
        x, y = a.column(k), b.column(k)
        if x.null_count or y.null_count:
            present = pc.drop_null(x) if len(x) > x.null_count else pc.drop_null(y)
            if len(present):  # any value stands for null beside the flag
                left[f"__k{i}"], right[f"__k{i}"] = pc.fill_null(x, present[0]), pc.fill_null(y, present[0])
            left[f"__n{i}"], right[f"__n{i}"] = pc.is_null(x), pc.is_null(y)
        else:
            left[f"__k{i}"], right[f"__k{i}"] = x, y
    left["__ia"] = pa.array(np.arange(a.num_rows, dtype=np.int64))
    right["__ib"] = pa.array(np.arange(b.num_rows, dtype=np.int64))
    on = [c for c in left if c != "__ia"]
    return pa.table(left), pa.table(right), on


def _sortable_key(a: pa.Table, b: pa.Table, keys: list[str]) -> bool:
    """Whether the keys are one integer, date or timestamp column without nulls: matched by
    sorting with numpy (an Arrow hash join of 10 M keys took several times longer)."""
    if len(keys) != 1:
        return False
    x, y = a.column(keys[0]), b.column(keys[0])
    return not (x.null_count or y.null_count) and _ordered_type(x.type)


def _runs(sorted_keys: np.ndarray) -> int:
    """How many values repeat in a sorted array."""
    dup = sorted_keys[1:] == sorted_keys[:-1]
    return int(np.count_nonzero(dup[1:] & ~dup[:-1]) + (1 if len(dup) and dup[0] else 0))


def _key_order(keys: np.ndarray) -> np.ndarray | None:
    """A side's row numbers in ascending key order, or None when its rows already are in that
    order (a table written in key order, the usual case: then neither a sort nor a gather by
    it); a side in strictly descending order is read backwards rather than sorted."""
    if len(keys) < 2:
        return None
    ascending = keys[1:] >= keys[:-1]
    if ascending.all():
        return None
    if not ascending.any():
        return np.arange(len(keys) - 1, -1, -1)
    return np.argsort(keys, kind="stable")


def _in_key_order(t: pa.Table, key: str) -> tuple[pa.Table, np.ndarray, np.ndarray | None]:
    """The side, its keys in ascending order and its row numbers in that order (None: the rows'
    own). A side whose key order is a few blocks of consecutive rows (delta-rs writes a table
    in key order as blocks spread over its files) is put in key order by reordering the blocks'
    slices, no row copied: its order is then its rows' own."""
    keys = t.column(key).to_numpy()
    order = _key_order(keys)
    if order is None:
        return t, keys, None
    ordered = keys[order]
    starts = np.flatnonzero(np.diff(order) != 1) + 1
    if len(starts) >= MAX_RUNS:
        return t, ordered, order
    bounds = np.concatenate([[0], starts, [len(order)]])
    blocks = [t.slice(order[s], e - s) for s, e in pairwise(bounds)]
    return pa.concat_tables(blocks), ordered, None


def _match_sorted(
    a: pa.Table,
    b: pa.Table,
    sorted_a: tuple[np.ndarray, np.ndarray | None],
    sorted_b: tuple[np.ndarray, np.ndarray | None],
) -> tuple[Match | None, tuple[int, int]]:
    """Rows of both sides matched on one sortable key, each side's keys given in key order with
    its row numbers in that order (`_in_key_order`): each side's keys found in the other's by
    binary search; the repeated values counted from the ordered keys. The pairs come in key
    order, which is a side's own row order when its order is None."""
    (ka_s, sa), (kb_s, sb) = sorted_a, sorted_b
    repeated = (_runs(ka_s), _runs(kb_s))
    if any(repeated):
        return None, repeated
    pos = np.searchsorted(kb_s, ka_s)
    found = kb_s[np.minimum(pos, len(kb_s) - 1)] == ka_s if len(kb_s) else np.zeros(len(ka_s), dtype=bool)
    at_b = pos[found]
    in_b = np.zeros(len(kb_s), dtype=bool)
    in_b[at_b] = True

    def rows(order: np.ndarray | None, at: np.ndarray) -> np.ndarray:
        return at if order is None else order[at]

    return Match(
        rows(sa, np.flatnonzero(found)),
        rows(sb, at_b),
        rows(sa, np.flatnonzero(~found)),
        rows(sb, np.flatnonzero(~in_b)),
        found if sa is None else None,
        in_b if sb is None else None,
    ), (0, 0)


def _match_joined(a: pa.Table, b: pa.Table, keys: list[str]) -> tuple[Match | None, tuple[int, int]]:
    """Rows of both sides matched by a full outer hash join of their keys and row numbers."""
    left, right, on = _join_keys(a, b, keys)
    joined = left.join(right, keys=on, join_type="full outer", use_threads=True).combine_chunks()
    if _any_repeated(joined, a, b, keys):  # counted exactly only then, for the refusal
        return None, (_repeated(a, keys), _repeated(b, keys))
    ja, jb = joined.column("__ia"), joined.column("__ib")
    both = pc.and_(pc.is_valid(ja), pc.is_valid(jb))
    return Match(
        pc.filter(ja, both).to_numpy(),
        pc.filter(jb, both).to_numpy(),
        pc.filter(ja, pc.is_null(jb)).to_numpy(),
        pc.filter(jb, pc.is_null(ja)).to_numpy(),
    ), (0, 0)


def _differing(a: pa.Table, b: pa.Table, match: Match, compared: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Which pairs differ (their places among the pairs) and, for each of them, which compared
    columns differ. A side's paired values are filtered by its mask when it has one, else
    taken; the columns' equalities are combined as Arrow's bitmaps, and only the differing
    pairs' flags are expanded."""
    if not compared or not len(match.pair_a):
        return np.zeros(0, dtype=np.int64), np.zeros((0, len(compared)), dtype=bool)

    def picker(t: pa.Table, rows: np.ndarray, mask: np.ndarray | None):
        if mask is not None:
            keep = pa.array(mask)
            return lambda c: t.column(c).filter(keep)
        at = pa.array(rows, pa.int64())
        return lambda c: t.column(c).take(at)

    pick_a, pick_b = picker(a, match.pair_a, match.mask_a), picker(b, match.pair_b, match.mask_b)
    sames = [_same(pick_a(c), pick_b(c)) for c in compared]
    all_same = sames[0]
    for s in sames[1:]:
        all_same = pc.and_(all_same, s)
    changed = np.flatnonzero(~all_same.to_numpy(zero_copy_only=False))
    at = pa.array(changed, pa.int64())
    flags = np.zeros((len(changed), len(compared)), dtype=bool)
    for j, s in enumerate(sames):
        flags[:, j] = ~s.take(at).to_numpy(zero_copy_only=False)
    return changed, flags


def arrow_diff(a: pa.Table, b: pa.Table, keys: list[str], compared: list[str]) -> Outcome:
    """The keyed diff of two versions' rows, as `tables.spark.jobs.rowdiff` writes it."""
    if _sortable_key(a, b, keys):
        a, *sorted_a = _in_key_order(a, keys[0])
        b, *sorted_b = _in_key_order(b, keys[0])
        match, repeated = _match_sorted(a, b, tuple(sorted_a), tuple(sorted_b))
    else:
        match, repeated = _match_joined(a, b, keys)
    if match is None:
        return Outcome(None, repeated)
    changed_rows, changed_flags = _differing(a, b, match, compared)
    return Outcome(_written(a, b, keys, compared, match, changed_rows, changed_flags), (0, 0))


def _written(
    a: pa.Table,
    b: pa.Table,
    keys: list[str],
    compared: list[str],
    match: Match,
    changed_rows: np.ndarray,
    changed_flags: np.ndarray,
) -> pa.Table:
    """The diff's rows as Spark writes them: the changed pairs, then the rows of one side only,
    sorted by the keys (nulls first) and the kind."""
    n_changed, n_a, n_b = len(changed_rows), len(match.alone_a), len(match.alone_b)
    idx_a = pa.concat_arrays(
        [
            pa.array(match.pair_a[changed_rows], pa.int64()),
            pa.array(match.alone_a, pa.int64()),
            pa.nulls(n_b, pa.int64()),
        ]
    )
    idx_b = pa.concat_arrays(
        [
            pa.array(match.pair_b[changed_rows], pa.int64()),
            pa.nulls(n_a, pa.int64()),
            pa.array(match.alone_b, pa.int64()),
        ]
    )
    key_values = [pc.coalesce(a.column(k).take(idx_a), b.column(k).take(idx_b)) for k in keys]
    kind = pc.if_else(pc.is_null(idx_a), "added", pc.if_else(pc.is_null(idx_b), "removed", pa.scalar("changed")))
    flags = np.zeros((n_changed + n_a + n_b, len(compared)), dtype=bool)
    flags[:n_changed] = changed_flags
    offsets = np.concatenate([[0], np.cumsum(flags.sum(axis=1))]).astype(np.int32)
    names = np.array(compared, dtype=object)[np.nonzero(flags)[1]] if compared else np.array([], dtype=object)
    changed_columns = pa.ListArray.from_arrays(pa.array(offsets), pa.array(names.tolist(), pa.string()))
    before, after = _row_struct(a, keys, idx_a), _row_struct(b, keys, idx_b)
    columns = [kind, *key_values, changed_columns, before, after]
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
    return out.take(order)
