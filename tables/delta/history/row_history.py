"""The history of one row: the versions of a range where the row with a given key was inserted,
changed or deleted, its values before and after, who committed each and when.

Rules:
- The key is one or more top-level columns with values given as text, cast to the column's
  type in the range's last schema (byte, short, integer, long, string, date, decimal(p,s),
  boolean); an unknown column, a type that cannot be a key or text that does not cast raises
  InvalidColumnsError. More than one row with the key, at `start` or after any version, raises
  InvalidColumnsError (key not unique) rather than picking one.
- The row present at `start` is an insert at `start`, with that commit's user and time (the
  versions before `start` are not looked at). After that, a version is an event when the
  row's values differ before and after it: an insert, an update (the columns whose values
  differ are `changed`; an insert or a delete lists every column) or a delete. A version that
  rewrites the row with the same values (OPTIMIZE, an UPDATE setting the value it had) is not
  one.
- What changed in each version comes from `snapshot.changes.plan_changes` (change data files
  where a commit has them, else its added and removed files with their deletion vectors), so
  this module holds no second copy of those rules. The row is carried forward from version to
  version: only files of a version that could hold the key are read, never a whole snapshot
  again.
- Pruning, before any data file is read: a file whose partition values differ from the key's
  (for key columns that partition the table), or whose statistics (`minValues`, `maxValues`,
  `nullCount`, `numRecords` of its add) rule the key out, is skipped. Change data files carry
  no statistics, so a version with change data is read only when one of its added or removed
  files could hold the key. Truncated string statistics are compared as prefixes.
- Timestamps follow tables.delta.history.timestamps (In-Commit Timestamps from the enablement
  version on, monotonized file times before), as `plan_changes` gives them; the user is the
  commitInfo's userName, else its userId.
- Values are read with the range's last schema: column mapping (name and id) gives the logical
  names, partition values come from the log, a column a file lacks is null.
- Planning and reading are apart: `plan_row_history` decides from the log alone which files of
  which versions are read (`RowPlan.reads`, every pruning decision above taken); a data engine
  reads those files' rows with the key (`ParquetKeyReader` here with pyarrow, each file when the
  replay first needs it; tables.spark.jobs.row_history on Spark) and `replay` turns them into
  events, applying deletion vectors and row selections. `row_history` is the two with pyarrow.
- `RowHistory.to_dict` is JSON-safe, by tables.delta.json_values (the one rendering of values).

Pure: storage only through tables.delta.storage; no Django, no Spark.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tables.delta.errors import CorruptLogError, DeltaError, InvalidColumnsError, StorageError, at_version
from tables.delta.history.changes import ChangeEntry, ChangePlan, commit_actions, plan_changes
from tables.delta.history.timestamps import format_ms
from tables.delta.json_values import json_value
from tables.delta.log.actions import Metadata, Protocol, bool_mask
from tables.delta.log.listing import available_versions, list_log
from tables.delta.snapshot.columnmapping import field_id, mapping_mode, physical_name
from tables.delta.snapshot.dv import read_deletion_vector
from tables.delta.snapshot.files import log_add_actions
from tables.delta.snapshot.partitions import (
    PartitionColumn,
    distinct_partitions,
    parse_partition_value,
    partition_columns,
)
from tables.delta.snapshot.replay import canonical_path
from tables.delta.snapshot.state import check_reader_protocol, load_snapshot
from tables.delta.storage.boundary import Storage, as_storage

KEY_TYPES = "byte, short, integer, long, string, date, decimal(p,s), boolean"
CHANGE_TYPE_COLUMN = "_change_type"
FIELD_ID_KEY = b"PARQUET:field_id"
_INT_BITS = {"byte": 8, "short": 16, "integer": 32, "long": 64}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_INTEGER_TEXT = re.compile(r"^[+-]?\d+$")
_REMOVED = ("delete", "update_preimage")
_ADDED = ("insert", "update_postimage")


# --- the key ------------------------------------------------------------------------------------


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


def _key_text(keys: list[KeyColumn]) -> str:
    return ", ".join(f"{k.name}={json_value(k.value)}" for k in keys)


# --- pruning ----------------------------------------------------------------------------------


def parse_stats(raw: Any) -> dict[str, Any] | None:
    """An add's `stats` (JSON text, or a checkpoint's parsed struct); None when unusable.
    Decimals are read as Decimal: a float would lose the digits a decimal key compares."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        stats = json.loads(raw, parse_float=Decimal)
    except (ValueError, RecursionError):
        return None
    return stats if isinstance(stats, dict) else None


def _stat(raw: Any, key: KeyColumn) -> Any:
    """A min or max statistic as a value comparable with the key's, or None."""
    if raw is None or isinstance(raw, (dict, list)):
        return None
    v = key.value
    try:
        if isinstance(v, bool):
            return raw if isinstance(raw, bool) else None
        if isinstance(v, int):
            return int(raw) if isinstance(raw, (int, Decimal)) and not isinstance(raw, bool) else None
        if isinstance(v, Decimal):
            return Decimal(str(raw)) if not isinstance(raw, bool) else None
        if isinstance(v, date):
            return date.fromisoformat(raw[:10]) if isinstance(raw, str) else None
        if isinstance(v, str):
            return raw if isinstance(raw, str) else None
    except (ValueError, InvalidOperation):
        return None
    return None


def stats_may_hold(stats: dict[str, Any] | None, keys: list[KeyColumn]) -> bool:
    """Whether a file with these statistics can hold the key (True when they do not say)."""
    if stats is None:
        return True
    n = stats.get("numRecords")
    n = n if isinstance(n, int) and not isinstance(n, bool) else None
    if n == 0:
        return False
    mins, maxs, nulls = (
        stats.get(k) if isinstance(stats.get(k), dict) else {} for k in ("minValues", "maxValues", "nullCount")
    )
    for k in keys:
        if k.partition is not None:
            continue
        if n is not None and nulls.get(k.physical) == n:
            return False  # every value null: a key is never null
        lo, hi = _stat(mins.get(k.physical), k), _stat(maxs.get(k.physical), k)
        if lo is not None and k.value < lo:
            return False  # a truncated string minimum is a prefix, never above the true one
        if hi is not None and k.value > hi:
            # a truncated string maximum is a prefix of the true one: a key starting with it
            # may still be at or below the true maximum
            if not (isinstance(hi, str) and k.value.startswith(hi)):
                return False
    return True


def partition_may_hold(values: Mapping[str, str | None] | None, keys: list[KeyColumn]) -> bool:
    """Whether a file with these partition values can hold the key (True when unknown)."""
    if values is None:
        return True
    for k in keys:
        if k.partition is None:
            continue
        try:
            typed = parse_partition_value(values.get(k.partition), k.type, k.name)
        except DeltaError:
            return True  # a value this reader cannot type: the rows decide
        if typed != k.value:
            return False
    return True


# --- reading the key's rows ------------------------------------------------------------------------


@dataclass(slots=True)
class Match:
    """A row of one file with the key: its index in the file, its values (logical names, schema
    order) and, in a change data file, its change type."""

    index: int
    values: dict[str, Any]
    change_type: str | None = None


def _same(a: Any, b: Any) -> bool:
    """Values equal as a row's history compares them: NaN equals NaN (inside structs, arrays
    and maps too, where Python's == would call two NaN objects different), a boolean is never
    a number."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _logical(value: Any, dtype: Any, mode: str) -> Any:
    """A value as pyarrow gives it, with nested fields under their logical names (column
    mapping) and maps as objects (string keys) or [key, value] pairs."""
    if value is None or not isinstance(dtype, dict):
        return value
    kind = dtype.get("type")
    if kind == "struct" and isinstance(value, dict):
        return {
            f["name"]: _logical(value.get(physical_name(f, mode)), f["type"], mode) for f in dtype.get("fields", [])
        }
    if kind == "array" and isinstance(value, list):
        return [_logical(x, dtype.get("elementType"), mode) for x in value]
    if kind == "map" and isinstance(value, list):
        pairs = [(_logical(k, dtype.get("keyType"), mode), _logical(x, dtype.get("valueType"), mode)) for k, x in value]
        return dict(pairs) if all(isinstance(k, str) for k, _ in pairs) else [[k, x] for k, x in pairs]
    return value


def _candidates(table: pa.Table | None, keys: list[tuple[str, Any]], num_rows: int) -> np.ndarray:
    """Indexes of the rows whose key columns equal the key, computed by Arrow; a column Arrow
    cannot compare with the value leaves its rows to the exact check after."""
    mask = None
    for name, value in keys:
        col = table.column(name)  # type: ignore[union-attr]
        try:
            hit = pc.fill_null(pc.equal(col, pa.scalar(value, type=col.type)), False)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            continue
        mask = hit if mask is None else pc.and_(mask, hit)
    if mask is None:
        return np.arange(num_rows)
    return np.flatnonzero(bool_mask(mask))


def _plain(t: pa.DataType) -> pa.DataType:
    """`t` with every string or binary view in it (nested ones too) as a plain large type."""
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_plain(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_plain(t.key_type)), t.item_field.with_type(_plain(t.item_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_plain(t.value_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain(t.value_type)))
    return t


def _without_views(table: pa.Table) -> pa.Table:
    """String and binary views (delta-rs writes them, nested in structs, lists and maps too) as
    plain large types: Arrow's take has no kernel for views."""
    for i, f in enumerate(table.schema):
        plain = _plain(f.type)
        if plain != f.type:
            table = table.set_column(i, f.name, table.column(i).cast(plain))
    return table


@dataclass(slots=True)
class RowLayout:
    """What reading a file's rows needs of the range's last metadata: its top-level fields,
    the column mapping mode and the partition columns."""

    fields: list[dict[str, Any]]
    mode: str
    partitions: list[PartitionColumn]


def key_holds(values: Mapping[str, Any], keys: list[KeyColumn]) -> bool:
    """Whether a row's logical values hold the key (the exact check: a boolean is never 1)."""
    return all(_same(values.get(k.name), k.value) for k in keys)


def logical_value(value: Any, dtype: Any, mode: str) -> Any:
    """A value as Arrow gives it, under logical names (see `_logical`); for engines that read
    the files themselves and return structs by logical name, `mode` is "none"."""
    return _logical(value, dtype, mode)


def file_partition_values(layout: RowLayout, values: Mapping[str, str | None] | None) -> dict[str, Any]:
    """A file's partition columns by logical name, typed from the log ({} when unknown: the
    file's own columns then stand for them, if it has any)."""
    if values is None:
        return {}
    return {c.name: parse_partition_value(values.get(c.key), c.type, c.name) for c in layout.partitions}


class ParquetKeyReader:
    """Reads a file's rows with the key with pyarrow (what `row_history` reads with; a Spark
    job reads the same files its own way), each file at most once."""

    def __init__(self, storage: Storage, layout: RowLayout, keys: list[KeyColumn]) -> None:
        self.storage, self.layout, self.keys = storage, layout, keys
        self.read: dict[str, list[Match]] = {}

    def __call__(self, file: FileRead) -> list[Match]:
        """The file's rows with the key (before any deletion vector), in file order."""
        if file.ident not in self.read:
            with self._open(file.path) as pf:  # closed at once: a long range opens many files
                self.read[file.ident] = self._matches_in(pf, file.partition_values, file.cdc)
        return self.read[file.ident]

    def _open(self, path: str) -> pq.ParquetFile:
        key = self.storage.resolve(path)
        opener = getattr(self.storage, "open_input", None)
        try:
            return pq.ParquetFile(opener(key) if opener else pa.BufferReader(self.storage.read(key)))
        except FileNotFoundError as exc:
            raise StorageError(
                f"{self.storage.display(key)}: data file is missing (removed by VACUUM?)", file=key
            ) from exc
        except (pa.ArrowException, OSError) as exc:
            raise StorageError(f"{self.storage.display(key)}: not a readable Parquet file ({exc})", file=key) from exc

    def _file_columns(self, schema: pa.Schema) -> dict[str, str]:
        """Logical name -> the file's column for each table column the file has; in id mode
        by Parquet field id (a renamed column keeps its id), else by physical name."""
        names = set(schema.names)
        by_id: dict[int, str] = {}
        if self.layout.mode == "id":
            for f in schema:
                raw = (f.metadata or {}).get(FIELD_ID_KEY)
                if raw is not None and raw.decode().lstrip("-").isdigit():
                    by_id[int(raw)] = f.name
        out = {}
        for f in self.layout.fields:
            col = by_id.get(field_id(f)) if self.layout.mode == "id" else None
            col = col or physical_name(f, self.layout.mode)
            if col in names:
                out[f["name"]] = col
        return out

    def _matches_in(self, pf: pq.ParquetFile, values: Mapping[str, str | None] | None, cdc: bool) -> list[Match]:
        """The file's rows with the key: the key columns read first, the other columns only
        when some row has the key."""
        columns = self._file_columns(pf.schema_arrow)
        parts = file_partition_values(self.layout, values)
        data_keys = [k for k in self.keys if k.name not in parts]
        if any(k.name not in columns for k in data_keys):
            return []  # a key column the file lacks reads as null: no row has the key
        pairs = [(columns[k.name], k.value) for k in data_keys]
        head = pf.read(columns=list(dict.fromkeys(c for c, _ in pairs))) if pairs else None
        idx = _candidates(head, pairs, pf.metadata.num_rows)
        if not len(idx):
            return []
        wanted = list(dict.fromkeys(columns.values()))
        if cdc and CHANGE_TYPE_COLUMN in pf.schema_arrow.names:
            wanted.append(CHANGE_TYPE_COLUMN)
        rows = _without_views(pf.read(columns=wanted)).take(pa.array(idx)).to_pylist()
        out = []
        for i, r in zip(idx, rows, strict=True):
            row = {}
            for f in self.layout.fields:
                name = f["name"]
                if name in parts:
                    row[name] = parts[name]  # partition values come from the log, not the file
                else:
                    row[name] = _logical(r.get(columns[name]), f["type"], self.layout.mode) if name in columns else None
            if key_holds(row, self.keys):
                out.append(Match(int(i), row, r.get(CHANGE_TYPE_COLUMN) if cdc else None))
        return out


def select(matches: list[Match], rows: np.ndarray | None, only: bool) -> list[Match]:
    """The matches a change entry's selection keeps: only `rows`, or all but `rows`."""
    if rows is None or not matches:
        return [] if only else matches
    hit = np.isin(np.fromiter((m.index for m in matches), dtype=np.uint64, count=len(matches)), rows)
    return [m for m, h in zip(matches, hit, strict=True) if h == only]


# --- the plan: which files of which versions are read -----------------------------------------
# Every decision below is made from the log alone (partition values, statistics, change
# entries), before any data file is opened: a data engine then reads exactly `RowPlan.reads`
# (pyarrow here, Spark in tables.spark.jobs.row_history) and `replay` turns its rows into events.


@dataclass(frozen=True, slots=True)
class FileRead:
    """A data or change data file the history reads (once), as the log first names it."""

    path: str  # as in the log: URL-encoded, relative to the root or absolute
    partition_values: Mapping[str, str | None] | None  # None: unknown (a remove without them)
    cdc: bool = False

    @property
    def ident(self) -> str:
        return canonical_path(self.path)


@dataclass(slots=True)
class StartFile:
    """A file of the start version's snapshot that could hold the key, and its deletion vector."""

    file: FileRead
    deletion_vector: dict[str, Any] | None


@dataclass(slots=True)
class EntryRead:
    """A change entry (`snapshot.changes`) of a version whose file could hold the key: its
    change type and row selection, or, for a change data file, None (each row says its own)."""

    file: FileRead
    change_type: str | None
    rows: np.ndarray | None = None
    only: bool = False


@dataclass(slots=True)
class VersionPlan:
    version: int
    timestamp: int  # ms since the epoch, the commit timestamp rule's
    user: str | None
    start_files: list[StartFile] | None = None  # at the range's start: its snapshot's files
    entries: list[EntryRead] = field(default_factory=list)  # after it: the version's changes


@dataclass(slots=True)
class RowPlan:
    """What the history of one key over start..end reads, version by version."""

    storage: Storage
    metadata: Metadata  # as of `end`
    protocol: Protocol  # as of `end`
    protocols: list[Protocol]  # every protocol in force at some version of the range
    layout: RowLayout
    keys: list[KeyColumn]
    start: int
    end: int
    versions: list[VersionPlan] = field(default_factory=list)
    reads: dict[str, FileRead] = field(default_factory=dict)  # canonical path -> file, first need first
    seen: set[str] = field(default_factory=set)  # every file considered (read or skipped)

    @property
    def files_read(self) -> int:
        return len(self.reads)

    @property
    def files_skipped(self) -> int:
        return len(self.seen) - len(self.reads)


class _Pruner:
    """Decides, file by file, whether a file could hold the key (each file's decision is taken
    the first time it is read; a file read once is never read again)."""

    def __init__(self, plan: RowPlan) -> None:
        self.keys, self.reads, self.seen = plan.keys, plan.reads, plan.seen
        self.stats: dict[str, Any] = {}  # canonical path -> the stats its add carried

    def skip(self, path: str) -> None:
        self.seen.add(canonical_path(path))

    def may_hold(self, path: str, values: Mapping[str, str | None] | None) -> bool:
        if not partition_may_hold(values, self.keys):
            return False
        return stats_may_hold(parse_stats(self.stats.get(canonical_path(path))), self.keys)

    def read(self, path: str, values: Mapping[str, str | None] | None, cdc: bool = False) -> FileRead | None:
        """The file to read, None when pruned. Change data files have no statistics: only
        their partition values prune them."""
        ident = canonical_path(path)
        self.seen.add(ident)
        if ident in self.reads:
            return self.reads[ident]
        if not (partition_may_hold(values, self.keys) if cdc else self.may_hold(path, values)):
            return None
        self.reads[ident] = FileRead(path, values, cdc)
        return self.reads[ident]


# --- the history --------------------------------------------------------------------------------


@dataclass(slots=True)
class RowEvent:
    version: int
    change: str  # insert | update | delete
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changed: list[str]  # update: the columns whose values differ; insert, delete: every column
    timestamp: int  # ms since the epoch, the commit timestamp rule's
    user: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "change": self.change,
            "before": json_value(self.before),
            "after": json_value(self.after),
            "changed": list(self.changed),
            "timestamp": format_ms(self.timestamp),
            "user": self.user,
        }


@dataclass(slots=True)
class RowHistory:
    key: dict[str, Any]  # column -> typed value
    start: int
    end: int
    events: list[RowEvent] = field(default_factory=list)
    files_read: int = 0
    files_skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        """`delta row-history --json`: {key, events, files: {read, skipped}}."""
        return {
            "key": json_value(self.key),
            "events": [e.to_dict() for e in self.events],
            "files": {"read": self.files_read, "skipped": self.files_skipped},
        }


def event_between(version: int, before: dict | None, after: dict | None, ts: int, user: str | None) -> RowEvent | None:
    """The event a version is for the row, None when its values did not change."""
    if before is None and after is None:
        return None
    if before is None:
        return RowEvent(version, "insert", None, after, list(after or {}), ts, user)
    if after is None:
        return RowEvent(version, "delete", before, None, list(before), ts, user)
    names = list(dict.fromkeys([*before, *after]))
    changed = [n for n in names if not _same(before.get(n), after.get(n))]
    return RowEvent(version, "update", before, after, changed, ts, user) if changed else None


def _not_unique(storage: Storage, keys: list[KeyColumn], count: int, version: int) -> InvalidColumnsError:
    return InvalidColumnsError(
        f"{storage.display()}: key {_key_text(keys)} is not unique: {count} rows have it at version {version}; "
        f"name more key columns (--key COLUMN=VALUE)",
        version=version,
        rows=count,
    )


def _next_row(
    storage: Storage, keys: list[KeyColumn], current: dict | None, changes: list[tuple[str | None, Match]], version: int
) -> dict[str, Any] | None:
    """The row after a version from the row before and the version's changes of it: rows
    removed (deletes, pre-images) and added (inserts, post-images)."""
    removed = sum(1 for kind, _m in changes if kind in _REMOVED)
    added = [m for kind, m in changes if kind in _ADDED]
    count = (current is not None) - removed + len(added)
    if count > 1:
        raise _not_unique(storage, keys, count, version)
    if count <= 0:
        return None
    return added[-1].values if added else current


def _pairs(key: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> list[tuple[str, str]]:
    items = key.items() if isinstance(key, Mapping) else key
    return [(str(name), v if isinstance(v, str) else json.dumps(json_value(v)).strip('"')) for name, v in items]


def _range(storage: Storage, listing: Any, start: int | None, end: int | None) -> tuple[int, int]:
    if start is not None and end is not None:
        return start, end
    available = available_versions(listing)
    if available is None:
        raise CorruptLogError(f"{storage.display()}: no version of this table can be rebuilt from its log")
    return (available[0] if start is None else start), (available[1] if end is None else end)


def _commit_facts(storage: Storage, version: int, pruner: _Pruner) -> tuple[str | None, list[tuple[str, Any]]]:
    """A commit's user, and the (path, partition values) of the files it added or removed with
    dataChange; the statistics its adds carry are kept for pruning later versions too."""
    user, touched = None, []
    for name, body in commit_actions(storage, version):
        if name == "commitInfo":
            who = body.get("userName") or body.get("userId")
            user = str(who)[:1000] if who is not None else None
        elif name in ("add", "remove") and isinstance(body.get("path"), str):
            ident = canonical_path(body["path"])
            if body.get("stats") is not None and (name == "add" or ident not in pruner.stats):
                pruner.stats[ident] = body["stats"]
            if body.get("dataChange", True) is not False:
                touched.append((body["path"], body.get("partitionValues") if "partitionValues" in body else None))
    return user, touched


def _start_files(storage: Storage, pruner: _Pruner, layout: RowLayout, version: int, listing: Any) -> list[StartFile]:
    """The files of `version`'s snapshot that could hold the key: partitions pruned first (once
    per distinct partition), then statistics (from the log's adds)."""
    snap = load_snapshot(storage, version, listing)
    files = snap.files
    if not files.num_rows:
        return []
    key_parts = [c for c in layout.partitions if any(k.name == c.name for k in pruner.keys)]
    if key_parts:
        which, parts = distinct_partitions(files, key_parts)
        keep = np.array([partition_may_hold(p, pruner.keys) for p in parts], dtype=bool)[which]
        for path in files.column("path").filter(pa.array(~keep)).to_pylist():
            pruner.skip(path)
        files = files.filter(pa.array(keep))
    # the snapshot keeps replay's columns only: the stats come from the adds in the log
    bodies, _found = log_add_actions(storage, snap, files)
    out = []
    for body in bodies:
        path = body["path"]
        if body.get("stats") is not None:
            pruner.stats[canonical_path(path)] = body["stats"]
        file = pruner.read(path, body.get("partitionValues"))
        if file is not None:
            out.append(StartFile(file, body.get("deletionVector")))
    return out


def _version_entries(
    pruner: _Pruner, changes: ChangePlan, version: int, entries: list[ChangeEntry], touched: list[tuple[str, Any]]
) -> list[EntryRead]:
    """The change entries of a version whose files could hold the key: its change data files
    when it has them (read only when one of its added or removed files could hold the key:
    they carry no statistics of their own), else its files with their row selections."""
    out = []
    if changes.versions[version - changes.start].source == "cdc":
        if touched and not any(pruner.may_hold(path, values) for path, values in touched):
            for e in entries:
                pruner.skip(e.path)
            return []
        for e in entries:
            if (file := pruner.read(e.path, e.partition_values, cdc=True)) is not None:
                out.append(EntryRead(file, None))
        return out
    for e in entries:
        if (file := pruner.read(e.path, e.partition_values)) is not None:
            out.append(EntryRead(file, e.change_type, e.rows, e.only))
    return out


def plan_row_history(
    location: str | Storage,
    key: Mapping[str, Any] | Iterable[tuple[str, Any]],
    start: int | None = None,
    end: int | None = None,
) -> RowPlan:
    """Which files of which versions the history of the row with `key` reads (see the module's
    rules), decided from the log alone; no data file is opened."""
    storage = as_storage(location)
    listing = list_log(storage)
    start, end = _range(storage, listing, start, end)
    changes = plan_changes(storage, start, end)
    for protocol in [*changes.protocols, changes.protocol]:
        check_reader_protocol(protocol, f"{storage.display()} between versions {start} and {end}")
    mode = mapping_mode(changes.metadata, changes.protocol)
    schema = changes.metadata.schema
    layout = RowLayout(schema.get("fields", []), mode, partition_columns(changes.metadata, mode))
    keys = parse_key(schema, mode, layout.partitions, _pairs(key))
    plan = RowPlan(storage, changes.metadata, changes.protocol, changes.protocols, layout, keys, start, end)
    pruner = _Pruner(plan)
    by_version: dict[int, list[ChangeEntry]] = {}
    for e in changes.entries:
        by_version.setdefault(e.version, []).append(e)
    for v in range(start, end + 1):
        with at_version(f"version {v}"):
            user, touched = _commit_facts(storage, v, pruner)
            step = VersionPlan(v, changes.timestamp(v), user)
            if v == start:
                step.start_files = _start_files(storage, pruner, layout, v, listing)
            else:
                step.entries = _version_entries(pruner, changes, v, by_version.get(v, []), touched)
        plan.versions.append(step)
    return plan


# --- replaying the plan on the rows read ------------------------------------------------------

# A data engine's answer for one planned file: its rows with the key, in file order, before
# any deletion vector or row selection.
ReadFile = Callable[[FileRead], list[Match]]


def _start_rows(plan: RowPlan, files: list[StartFile], read: ReadFile, dv_files: dict[str, bytes]) -> list[dict]:
    """The rows with the key at the start version: the files' rows less their deletion vectors
    (a vector is read only for a file that holds the key)."""
    rows: list[dict[str, Any]] = []
    for f in files:
        found = read(f.file)
        if found:
            where = f"{plan.storage.display()}/{f.file.path}"
            gone = read_deletion_vector(plan.storage, f.deletion_vector, where, dv_files)
            rows += [m.values for m in select(found, gone, only=False)]
    return rows


def _changes_of(entries: list[EntryRead], read: ReadFile) -> list[tuple[str | None, Match]]:
    """(change type, row) of the rows with the key a version changed."""
    out: list[tuple[str | None, Match]] = []
    for e in entries:
        found = read(e.file)
        if e.change_type is None:  # change data: every row, typed by its own _change_type
            out += [(m.change_type, m) for m in found]
        elif found:
            out += [(e.change_type, m) for m in select(found, e.rows, e.only)]
    return out


def replay(plan: RowPlan, read: ReadFile) -> RowHistory:
    """The history from the plan and the rows `read` gives for its files: the row carried from
    version to version, an event where its values change."""
    history = RowHistory({k.name: k.value for k in plan.keys}, plan.start, plan.end)
    dv_files: dict[str, bytes] = {}
    current: dict[str, Any] | None = None
    for step in plan.versions:
        v = step.version
        with at_version(f"version {v}"):
            if step.start_files is not None:
                rows = _start_rows(plan, step.start_files, read, dv_files)
                if len(rows) > 1:
                    raise _not_unique(plan.storage, plan.keys, len(rows), v)
                after = rows[0] if rows else None
            else:
                after = _next_row(plan.storage, plan.keys, current, _changes_of(step.entries, read), v)
        event = event_between(v, current, after, step.timestamp, step.user)
        if event is not None:
            history.events.append(event)
        current = after
    history.files_read, history.files_skipped = plan.files_read, plan.files_skipped
    return history


def row_history(
    location: str | Storage,
    key: Mapping[str, Any] | Iterable[tuple[str, Any]],
    start: int | None = None,
    end: int | None = None,
) -> RowHistory:
    """The history of the row with `key` (column -> value text) in versions start..end
    (default: the earliest version the log can rebuild .. the latest); see the module's rules.
    The planned files are read with pyarrow, each when the replay first needs it."""
    plan = plan_row_history(location, key, start, end)
    return replay(plan, ParquetKeyReader(plan.storage, plan.layout, plan.keys))
