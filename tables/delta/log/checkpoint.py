"""Read classic, multi-part and v2 checkpoints (with sidecars) into an ActionBatch.

File actions stay columnar (pyarrow, only the columns replay needs); the few non-file
actions come back as dicts with maps turned into plain dicts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tables.delta.errors import CorruptCheckpointError, CorruptLogError, DeltaError
from tables.delta.log.actions import (
    NON_FILE_ACTIONS,
    ActionBatch,
    bool_array,
    bool_mask,
    chunk_slices,
    empty_table,
    file_batch_schema,
    int64_array,
    read_json_actions,
    true_runs,
)
from tables.delta.log.jsonline import loads_line
from tables.delta.log.listing import LOG_DIR, LogFile
from tables.delta.storage.api import Storage

_FILE_FIELDS = {
    "add": ("path", "partitionValues", "size", "modificationTime", "dataChange", "deletionVector"),
    "remove": ("path", "partitionValues", "size", "deletionTimestamp", "dataChange", "deletionVector"),
}
_MAP_FIELDS = {"configuration", "options", "tags", "partitionValues"}


def plain_value(value: Any, key: str | None = None) -> Any:
    """pyarrow's to_pylist gives maps as lists of pairs; turn them into dicts."""
    if isinstance(value, dict):
        return {k: plain_value(v, k) for k, v in value.items()}
    if key in _MAP_FIELDS and isinstance(value, list):
        return {k: v for k, v in value}
    return value


def open_parquet(storage: Storage, rel: str, mapped: bool = False) -> pq.ParquetFile:
    """A checkpoint's Parquet file; `mapped`: over a memory map of a local file, so column
    chunks are decoded in place instead of being copied into memory first."""
    try:
        if mapped and not storage.remote:
            return pq.ParquetFile(pa.BufferReader(pa.py_buffer(storage.read_mapped(rel))))
        return pq.ParquetFile(storage.open_input(rel))
    except FileNotFoundError as exc:
        raise CorruptCheckpointError(f"{storage.display(rel)}: checkpoint file is missing", file=rel) from exc
    except (pa.ArrowException, OSError) as exc:
        raise CorruptCheckpointError(f"{storage.display(rel)}: unreadable checkpoint ({exc})", file=rel) from exc


# A field every action of the kind must have: where the footer's statistics count it null in
# every row of a row group, that row group holds no such action.
_KEY_FIELD = {
    "add": "path",
    "remove": "path",
    "metaData": "id",
    "protocol": "minReaderVersion",
    "txn": "appId",
    "domainMetadata": "domain",
    "sidecar": "path",
    "checkpointMetadata": "version",
}


class ParquetPart:
    """One Parquet checkpoint file (a part or a sidecar), opened once.

    Its footer says, per row group, how many rows hold each kind of action (the null count of
    the kind's key field): a checkpoint is mostly adds, so removes, txns, domain metadata and
    sidecars are usually absent and never decoded, and reading protocol and metaData stops
    once the counted rows were found.
    """

    def __init__(self, storage: Storage, rel: str) -> None:
        self.storage, self.rel = storage, rel
        self.file = open_parquet(storage, rel, mapped=True)
        self.meta = self.file.metadata
        self.names = set(self.file.schema_arrow.names)
        groups = self.meta.num_row_groups
        first = self.meta.row_group(0) if groups else None
        self._leaf = {first.column(i).path_in_schema: i for i in range(first.num_columns)} if first else {}
        self._pending: _Background | None = None

    def error(self, exc: Exception) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{self.storage.display(self.rel)}: unreadable checkpoint ({exc})", file=self.rel)

    def non_null(self, leaf: str) -> list[int | None]:
        """Per row group, the rows where the leaf column `leaf` (dotted) is set; None where
        the statistics do not say (or the column is not there)."""
        idx = self._leaf.get(leaf)
        out: list[int | None] = []
        for g in range(self.meta.num_row_groups):
            rg = self.meta.row_group(g)
            st = rg.column(idx).statistics if idx is not None else None
            out.append(rg.num_rows - st.null_count if st is not None and st.has_null_count else None)
        return out

    def counts(self, kind: str) -> list[int | None]:
        """Per row group, how many `kind` actions it holds (None: unknown, read to see)."""
        return self.non_null(f"{kind}.{_KEY_FIELD[kind]}")

    def others(self, only: tuple[str, ...] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Non-file actions; with `only` (one of each: protocol, metaData), reading stops at
        the batch where all were found, as it does once every counted action was found."""
        names = [n for n in (only or NON_FILE_ACTIONS) if n in self.names]
        counts = {n: self.counts(n) for n in names}
        names = [n for n in names if any(c != 0 for c in counts[n])]
        groups = [g for g in range(self.meta.num_row_groups) if any(counts[n][g] != 0 for n in names)]
        if not names or not groups:
            return []
        expected = {n: None if None in counts[n] else sum(c or 0 for c in counts[n]) for n in names}
        known = all(e is not None for e in expected.values())
        found = dict.fromkeys(names, 0)
        out = []
        try:
            # big batches: writers put protocol and metadata anywhere (delta-rs after the adds of
            # the older commits), and decoding these mostly-null columns costs the same whole
            for batch in self.file.iter_batches(batch_size=65536, row_groups=groups, columns=names):
                for name in names:
                    col = batch.column(name)
                    if col.null_count == len(col):
                        continue
                    bodies = [plain_value(v) for v in col.filter(col.is_valid()).to_pylist()]
                    found[name] += sum(1 for b in bodies if b.get(_KEY_FIELD[name]) is not None)
                    out.extend((name, b) for b in bodies)
                if only and {n for n, _b in out} >= set(names):
                    break
                if known and all(found[n] >= (expected[n] or 0) for n in names):
                    break
        except (pa.ArrowException, OSError) as exc:
            raise self.error(exc) from exc
        return out

    def all_null(self, leaf: str, groups: list[int]) -> bool:
        """Whether the statistics say the leaf column holds no value in these row groups
        (for a map's keys: every map empty)."""
        idx = self._leaf.get(leaf)
        if idx is None:
            return False
        for g in groups:
            col = self.meta.row_group(g).column(idx)
            st = col.statistics
            if st is None or not st.has_null_count or st.null_count != col.num_values:
                return False
        return True

    def _file_plan(self) -> tuple[list[str], list[tuple[str, list[str], bool]], list[int] | None]:
        """What to read of the adds and removes: the columns replay needs (never stats or
        tags), per kind the fields and whether its partition values are all empty maps (then
        not read), and the row groups that hold them (None: all)."""
        columns, kinds = [], []
        wanted_groups: set[int] = set()
        for kind, wanted in _FILE_FIELDS.items():
            if kind not in self.names:
                continue
            groups = [g for g, c in enumerate(self.counts(kind)) if c != 0]
            if not groups:
                continue
            fields = {c.name for c in self.file.schema_arrow.field(kind).type}
            present = [f for f in wanted if f in fields]
            no_pv = "partitionValues" in present and self.all_null(f"{kind}.partitionValues.key_value.key", groups)
            if no_pv:
                present.remove("partitionValues")  # unpartitioned: nothing to read
            if "deletionVector" in present and self.all_null(f"{kind}.deletionVector.storageType", groups):
                present.remove("deletionVector")  # no file of this kind has one
            columns += [f"{kind}.{f}" for f in present]
            kinds.append((kind, present, no_pv))
            wanted_groups.update(groups)
        return columns, kinds, None if len(wanted_groups) == self.meta.num_row_groups else sorted(wanted_groups)

    def _read(self, file: pq.ParquetFile, columns: list[str], groups: list[int] | None) -> pa.Table:
        try:
            return file.read(columns=columns) if groups is None else file.read_row_groups(groups, columns=columns)
        except (pa.ArrowException, OSError) as exc:
            raise self.error(exc) from exc

    def start_reading_files(self) -> None:
        """Read the file columns on a thread meanwhile (pyarrow decodes without the GIL; the
        columns do not depend on the partition keys the non-file actions decide). The
        thread opens the file again: one reader object is not shared between threads."""
        if self._pending is not None:
            return
        columns, kinds, groups = self._file_plan()
        if kinds:
            self._pending = _Background(
                lambda: (self._read(open_parquet(self.storage, self.rel, mapped=True), columns, groups), kinds)
            )

    def settle(self) -> None:
        """Wait for the read started on a thread, if any, and drop it (what it raised too)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.wait()

    def files(self, version: int, keys: list[str]) -> pa.Table:
        """Add and remove actions in the file batch schema."""
        pending, self._pending = self._pending, None
        if pending is not None:
            table, kinds = pending.result()
        else:
            columns, kinds, groups = self._file_plan()
            table = self._read(self.file, columns, groups) if kinds else None
        parts = [_action_rows(kind, table, present, version, keys, no_pv) for kind, present, no_pv in kinds]
        parts = [p for p in parts if p is not None]
        if not parts:
            return empty_table(file_batch_schema(keys))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


class _Background:
    """A call run on a thread; result() waits for it and raises what it raised."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._result = fn()
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._result


def _map_values(m: pa.MapArray, keys: list[str]) -> list[pa.Array]:
    """The value of each key in every row of a map<string,string> column.

    Writers put the same keys in the same order in every row, so the values are usually a
    strided (for one key: contiguous, zero-copy) view of the map's items; map_lookup is the
    general fallback.
    """
    k, n = len(keys), len(m)
    off = m.offsets.to_numpy()
    if n and m.null_count == 0 and np.all(np.diff(off) == k):
        flat_keys = m.keys.slice(off[0], n * k)
        flat_items = m.items.slice(off[0], n * k)
        out = []
        for j, key in enumerate(keys):
            idx = None if k == 1 else int64_array(np.arange(j, n * k, k))
            ks = flat_keys if idx is None else flat_keys.take(idx)
            if not _all_equal(ks, key):
                break
            out.append((flat_items if idx is None else flat_items.take(idx)).cast(pa.string()))
        else:
            return out
    return [pc.map_lookup(m, pa.scalar(key), "first").cast(pa.string()) for key in keys]


def _all_equal(strings: pa.Array, value: str) -> bool:
    """Whether every string (none null) is `value`, on the buffers: same lengths, and the
    data is `value` repeated (5x faster than equal + all on a checkpoint's 300,000 keys)."""
    want = value.encode()
    n, width = len(strings), len(want)
    if strings.null_count:
        return False
    if not isinstance(strings, pa.StringArray):
        return bool(pc.all(pc.equal(strings, value)).as_py()) if n else True
    _validity, offsets, data = strings.buffers()
    offs = np.frombuffer(offsets, np.int32, n + 1, strings.offset * 4)
    if not np.all(np.diff(offs) == width):
        return False
    if not width:
        return True
    raw = np.frombuffer(data, np.uint8, n * width, int(offs[0]))
    return bool(np.all(raw.reshape(n, width) == np.frombuffer(want, np.uint8)))


def _struct_of(table: pa.Table, kind: str, present: list[str]) -> tuple[dict[str, pa.ChunkedArray], Any]:
    """The selected fields of one action column, whichever form the reader gave them in (a
    struct column named after the action, or dotted columns), and which rows hold one (the
    action and its path set)."""
    if kind in table.column_names:
        struct = table.column(kind)
        cols = {f: pa.chunked_array([c.field(f) for c in struct.chunks], struct.type.field(f).type) for f in present}
        return cols, pc.and_(struct.is_valid(), cols["path"].is_valid())
    cols = {f: table.column(f"{kind}.{f}") for f in present}
    return cols, cols["path"].is_valid()


def _action_rows(
    kind: str, table: pa.Table, present: list[str], version: int, keys: list[str], no_pv: bool = False
) -> pa.Table | None:
    """The rows of one action column (add or remove) in the file batch schema.

    Checkpoint rows of one kind come in long runs: they are taken as zero-copy slices.
    """
    schema = file_batch_schema(keys)
    cols, valid = _struct_of(table, kind, present)
    runs = true_runs(bool_mask(valid))
    if not runs:
        return None
    n = sum(b - a for a, b in runs)

    def column(name: str, cast: bool = True) -> pa.ChunkedArray:
        typ = schema.field(name).type
        if name not in cols:
            return pa.chunked_array([pa.nulls(n, typ)])
        pieces = pa.chunked_array([piece for piece, _rows in chunk_slices(cols[name], runs)], cols[name].type)
        return pieces.cast(typ) if cast else pieces

    pv_type = schema.field("partitionValues").type
    if "partitionValues" in cols and keys:
        raw = column("partitionValues", cast=False)
        pv = pa.chunked_array(
            [pa.StructArray.from_arrays(_map_values(chunk, keys), names=keys) for chunk in raw.chunks], pv_type
        )
    elif keys and no_pv:  # every map empty: each key looked up is null
        pv = pa.chunked_array([pa.StructArray.from_arrays([pa.nulls(n, pa.string())] * len(keys), names=keys)])
    elif keys:
        pv = pa.chunked_array([pa.nulls(n, pv_type)])
    else:
        pv = pa.chunked_array([pa.Array.from_buffers(pv_type, n, [None])])  # n empty structs
    return pa.table(
        {
            "version": int64_array(np.full(n, version, dtype=np.int64)),
            "seq": int64_array(np.full(n, -1, dtype=np.int64)),
            "is_add": bool_array(np.full(n, kind == "add")),
            "path": column("path"),
            "size": column("size"),
            "modificationTime": column("modificationTime"),
            "dataChange": column("dataChange"),
            "deletionTimestamp": column("deletionTimestamp"),
            "partitionValues": pv,
            "deletionVector": column("deletionVector"),
        },
        schema=schema,
    )


def sidecar_key(storage: Storage, path: str) -> str:
    """A sidecar's key: relative to `_delta_log/_sidecars/` unless absolute (checked)."""
    if "://" in path or path.startswith(("file:", "/")):
        return storage.resolve(path)
    return storage.resolve(f"{LOG_DIR}/_sidecars/{path}")


_READS_AHEAD = 4  # Parquet files of one checkpoint read on threads at once


class CheckpointReader:
    """A checkpoint (its parts, or a v2 checkpoint and its sidecars) whose Parquet files are
    opened once for both reads: the non-file actions first (protocol and metadata decide the
    partition keys), then the file actions."""

    def __init__(self, storage: Storage, files: list[LogFile]) -> None:
        self.storage, self.files = storage, files
        self._parts: dict[str, ParquetPart] = {}
        self._started = 0

    def part(self, rel: str) -> ParquetPart:
        if rel not in self._parts:
            self._parts[rel] = ParquetPart(self.storage, rel)
        return self._parts[rel]

    def start_reading_files(self, others: Sequence[tuple[str, dict[str, Any]]] | None = None) -> None:
        """Start reading the file actions of the Parquet parts (or, given `others`, of the
        sidecars they name) on threads while the caller works on the rest of the log; the
        first few only (a checkpoint of hundreds of parts must not start hundreds of reads at
        once), the others are read when file_actions reaches them."""
        if others is None:
            rels = [f.path for f in self.files if f.fmt != "json"]
        else:
            rels = [body["path"] for name, body in others if name == "sidecar"]
        for rel in rels:
            if self._started >= _READS_AHEAD:
                return
            try:
                part = self.part(rel if others is None else sidecar_key(self.storage, rel))
            except DeltaError:
                continue  # raised again by file_actions, after the checks the load makes first
            part.start_reading_files()
            self._started += 1

    def settle(self) -> None:
        """Wait for the reads started on threads: a load that fails returns only once none is
        left running (one still inside pyarrow when the process exits aborts it)."""
        for part in self._parts.values():
            part.settle()

    def others(self, only: tuple[str, ...] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Non-file actions of the checkpoint, sidecar references included (or just `only`)."""
        storage = self.storage
        out: list[tuple[str, dict[str, Any]]] = []
        for f in self.files:
            if f.fmt != "json":
                out.extend(self.part(f.path).others(only))
                continue
            try:
                data = storage.read(f.path)
            except FileNotFoundError as exc:
                raise CorruptCheckpointError(
                    f"{storage.display(f.path)}: checkpoint file is missing", file=f.path
                ) from exc
            for lineno, line in enumerate(data.split(b"\n"), start=1):
                if not line.strip():
                    continue
                obj = loads_line(line, storage.display(f.path), lineno, CorruptCheckpointError)
                out.extend((name, obj[name]) for name in (only or NON_FILE_ACTIONS) if isinstance(obj.get(name), dict))
        return out

    def file_actions(self, others: list[tuple[str, dict[str, Any]]], keys: list[str]) -> pa.Table:
        """Add and remove actions of the checkpoint and its sidecars, columnar."""
        storage = self.storage
        version = self.files[0].version
        tables = []
        for f in self.files:
            if f.fmt == "json":
                try:
                    batch: ActionBatch = read_json_actions([(f.path, version, storage.read(f.path))], keys)
                except CorruptLogError as exc:
                    raise CorruptCheckpointError(
                        f"{storage.display(f.path)}: unreadable checkpoint ({exc})", file=f.path
                    ) from exc
                t = batch.files
                tables.append(t.set_column(1, "seq", int64_array(np.full(t.num_rows, -1, dtype=np.int64))))
            else:
                tables.append(self.part(f.path).files(version, keys))
        for name, body in others:
            if name == "sidecar":
                tables.append(self.part(sidecar_key(storage, body["path"])).files(version, keys))
        if not tables:
            return empty_table(file_batch_schema(keys))
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def read_checkpoint_others(
    storage: Storage, files: list[LogFile], only: tuple[str, ...] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Non-file actions of a checkpoint, sidecar references included (or just `only`)."""
    return CheckpointReader(storage, files).others(only)


def read_checkpoint_files(
    storage: Storage, files: list[LogFile], others: list[tuple[str, dict[str, Any]]], keys: list[str]
) -> pa.Table:
    """Add and remove actions of a checkpoint and its sidecars, columnar."""
    return CheckpointReader(storage, files).file_actions(others, keys)


_MAP = pa.map_(pa.string(), pa.string())
_CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", _MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("tags", _MAP),
                    (
                        "deletionVector",
                        pa.struct(
                            [
                                ("storageType", pa.string()),
                                ("pathOrInlineDv", pa.string()),
                                ("offset", pa.int32()),
                                ("sizeInBytes", pa.int32()),
                                ("cardinality", pa.int64()),
                            ]
                        ),
                    ),
                    ("stats", pa.string()),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", _MAP)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", _MAP),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
        (
            "domainMetadata",
            pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]),
        ),
    ]
)


def write_checkpoint(storage: Storage, snapshot: Any) -> str:
    """Write a classic single-file checkpoint of `snapshot` and point `_last_checkpoint` at it.

    Tombstones are left out (allowed: they only serve VACUUM's retention), so the file holds
    protocol, metadata, txns, domain metadata and every active add.
    """
    import io

    def row(**cols: Any) -> dict[str, Any]:
        return {name: cols.get(name) for name in _CHECKPOINT_SCHEMA.names}

    md = snapshot.metadata.to_dict()
    md["format"] = {
        "provider": md["format"].get("provider", "parquet"),
        "options": list((md["format"].get("options") or {}).items()),
    }
    md["configuration"] = list(md["configuration"].items())
    rows = [row(protocol=snapshot.protocol.to_dict()), row(metaData=md)]
    rows += [row(txn=t) for t in snapshot.txns.values()]
    rows += [row(domainMetadata=d) for d in snapshot.domains.values()]
    head = pa.Table.from_pylist(rows, schema=_CHECKPOINT_SCHEMA)
    files = snapshot.files
    n = files.num_rows
    if n:
        pv = files.column("partitionValues").combine_chunks()
        keys = [f.name for f in pv.type]
        pairs = (
            [
                [(k, v) for k, v in zip(keys, vals, strict=True)]
                for vals in zip(*(pv.field(k).to_pylist() for k in keys), strict=True)
            ]
            if keys
            else [[] for _ in range(n)]
        )
        add = pa.StructArray.from_arrays(
            [
                files.column("path").combine_chunks(),
                pa.array(pairs, type=_MAP),
                files.column("size").combine_chunks(),
                files.column("modificationTime").combine_chunks(),
                pa.array(np.zeros(n, dtype=bool)),
                pa.nulls(n, _MAP),
                files.column("deletionVector").combine_chunks(),
                pa.nulls(n, pa.string()),
            ],
            fields=list(_CHECKPOINT_SCHEMA.field("add").type),
        )
        body = pa.table(
            {
                name: (add if name == "add" else pa.nulls(n, _CHECKPOINT_SCHEMA.field(name).type))
                for name in _CHECKPOINT_SCHEMA.names
            },
            schema=_CHECKPOINT_SCHEMA,
        )
        head = pa.concat_tables([head, body])
    buf = io.BytesIO()
    pq.write_table(head, buf)
    rel = f"{LOG_DIR}/{snapshot.version:020d}.checkpoint.parquet"
    storage.put(rel, buf.getvalue())
    hint = {"version": snapshot.version, "size": head.num_rows, "sizeInBytes": len(buf.getvalue()), "numOfAddFiles": n}
    storage.put(f"{LOG_DIR}/_last_checkpoint", orjson.dumps(hint))
    return rel


# a checkpoint of whole actions: the add as its commit wrote it (stats, tags, row tracking)
_ADD_FULL = pa.struct(
    [
        *_CHECKPOINT_SCHEMA.field("add").type,
        pa.field("baseRowId", pa.int64()),
        pa.field("defaultRowCommitVersion", pa.int64()),
        pa.field("clusteringProvider", pa.string()),
    ]
)
_FULL_SCHEMA = pa.schema([pa.field("add", _ADD_FULL) if f.name == "add" else f for f in _CHECKPOINT_SCHEMA])


def _as_map(value: Any) -> list[tuple[str, str | None]] | None:
    if not isinstance(value, dict):
        return None
    return [(str(k), None if v is None else str(v)) for k, v in value.items()]


def _checkpoint_row(action: dict[str, Any]) -> dict[str, Any] | None:
    """One action as a checkpoint row (maps as key/value pairs), None for one a checkpoint
    does not keep (commitInfo, removes, cdc)."""
    (name, body), *_ = action.items()
    if name not in _FULL_SCHEMA.names or not isinstance(body, dict):
        return None
    body = dict(body)
    if name == "add":
        body["partitionValues"] = _as_map(body.get("partitionValues")) or []
        body["tags"] = _as_map(body.get("tags"))
    elif name == "metaData":
        fmt = body.get("format") or {}
        body["format"] = {"provider": fmt.get("provider", "parquet"), "options": _as_map(fmt.get("options")) or []}
        body["configuration"] = _as_map(body.get("configuration")) or []
    return {n: (body if n == name else None) for n in _FULL_SCHEMA.names}


def write_actions_checkpoint(storage: Storage, version: int, actions: list[dict[str, Any]]) -> str:
    """Write a classic single-file (V1 spec, allowed on every table) checkpoint of `version`
    holding `actions` as given (each `{name: body}`; protocol, metaData, txn, domainMetadata
    and add kept whole, with their stats), and point `_last_checkpoint` at it."""
    import io

    rows = [r for r in (_checkpoint_row(a) for a in actions) if r is not None]
    table = pa.Table.from_pylist(rows, schema=_FULL_SCHEMA)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    rel = f"{LOG_DIR}/{version:020d}.checkpoint.parquet"
    storage.put(rel, buf.getvalue(), overwrite=True)
    adds = sum(1 for r in rows if r["add"] is not None)
    hint = {"version": version, "size": table.num_rows, "sizeInBytes": len(buf.getvalue()), "numOfAddFiles": adds}
    storage.put(f"{LOG_DIR}/_last_checkpoint", orjson.dumps(hint), overwrite=True)
    return rel
