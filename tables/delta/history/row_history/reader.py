"""Reading the key's rows of the files a row history's plan names: what every data engine
returns for a file (`Match`, `ReadFile`), and `ParquetKeyReader`, the one with pyarrow (a Spark
job reads the same files its own way: tables.spark.jobs.row_history).

Pure: storage only through tables.delta.storage; no Django, no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tables.delta.errors import StorageError
from tables.delta.history.row_history.key import KeyColumn, key_holds
from tables.delta.history.row_history.pruning import FileRead
from tables.delta.log.actions import bool_mask
from tables.delta.snapshot.partitions import PartitionColumn, parse_partition_value
from tables.delta.snapshot.schema.columnmapping import field_id, physical_name
from tables.delta.storage.api import Capability, Storage

CHANGE_TYPE_COLUMN = "_change_type"
FIELD_ID_KEY = b"PARQUET:field_id"


@dataclass(slots=True)
class Match:
    """A row of one file with the key: its index in the file, its values (logical names, schema
    order) and, in a change data file, its change type."""

    index: int
    values: dict[str, Any]
    change_type: str | None = None


ReadFile = Callable[[FileRead], list[Match]]


@dataclass(slots=True)
class RowLayout:
    """What reading a file's rows needs of the range's last metadata: its top-level fields,
    the column mapping mode and the partition columns."""

    fields: list[dict[str, Any]]
    mode: str
    partitions: list[PartitionColumn]


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
        opens = Capability.OPEN_INPUT in self.storage.capabilities
        try:
            return pq.ParquetFile(self.storage.open_input(key) if opens else pa.BufferReader(self.storage.read(key)))
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
