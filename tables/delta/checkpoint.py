"""Read classic, multi-part and v2 checkpoints (with sidecars) into an ActionBatch.

File actions stay columnar (pyarrow, only the columns replay needs); the few non-file
actions come back as dicts with maps turned into plain dicts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .actions import NON_FILE_ACTIONS, ActionBatch, chunk_slices, file_batch_schema, read_json_actions, true_runs
from .errors import CorruptCheckpointError, CorruptLogError
from .log import LOG_DIR, LogFile
from .storage import Storage

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


def open_parquet(storage: Storage, rel: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(storage.open_input(rel))
    except FileNotFoundError as exc:
        raise CorruptCheckpointError(f"{storage.display(rel)}: checkpoint file is missing", file=rel) from exc
    except (pa.ArrowException, OSError) as exc:
        raise CorruptCheckpointError(f"{storage.display(rel)}: unreadable checkpoint ({exc})", file=rel) from exc


def _parquet_others(
    storage: Storage, rel: str, only: tuple[str, ...] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Non-file actions of a parquet checkpoint; with `only` (one of each: protocol,
    metaData), reading stops at the batch where all were found."""
    pf = open_parquet(storage, rel)
    names = [n for n in (only or NON_FILE_ACTIONS) if n in pf.schema_arrow.names]
    if not names:
        return []
    out = []
    try:
        for batch in pf.iter_batches(batch_size=8192, columns=names):
            for name in names:
                col = batch.column(name)
                out.extend((name, plain_value(v)) for v in col.filter(col.is_valid()).to_pylist())
            if only and {n for n, _b in out} >= set(names):
                break
    except (pa.ArrowException, OSError) as exc:
        raise CorruptCheckpointError(f"{storage.display(rel)}: unreadable checkpoint ({exc})", file=rel) from exc
    return out


def _parquet_files(storage: Storage, rel: str, version: int, keys: list[str]) -> pa.Table:
    pf = open_parquet(storage, rel)
    top = pf.schema_arrow
    parts = []
    for kind, wanted in _FILE_FIELDS.items():
        if kind not in top.names:
            continue
        present = [f for f in wanted if f in {c.name for c in top.field(kind).type}]
        try:
            table = pf.read(columns=[f"{kind}.{f}" for f in present])
        except (pa.ArrowException, OSError) as exc:
            raise CorruptCheckpointError(f"{storage.display(rel)}: unreadable checkpoint ({exc})", file=rel) from exc
        part = _action_rows(kind, table, present, version, keys)
        if part is not None:
            parts.append(part)
    schema = file_batch_schema(keys)
    return pa.concat_tables(parts) if parts else schema.empty_table()


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
            idx = None if k == 1 else pa.array(np.arange(j, n * k, k))
            ks = flat_keys if idx is None else flat_keys.take(idx)
            if not pc.all(pc.equal(ks, key)).as_py():
                break
            out.append((flat_items if idx is None else flat_items.take(idx)).cast(pa.string()))
        else:
            return out
    return [pc.map_lookup(m, pa.scalar(key), "first").cast(pa.string()) for key in keys]


def _action_rows(kind: str, table: pa.Table, present: list[str], version: int, keys: list[str]) -> pa.Table | None:
    """The rows of one action column (add or remove) in the file batch schema.

    Checkpoint rows of one kind come in long runs: they are taken as zero-copy slices.
    """
    schema = file_batch_schema(keys)
    if table.num_columns == 1 and table.column_names[0] == kind:
        # nested selection may come back as one struct column named after the action
        struct = table.column(0)
        cols = {f: pa.chunked_array([c.field(f) for c in struct.chunks], struct.type.field(f).type) for f in present}
        valid = pc.and_(struct.is_valid(), cols["path"].is_valid())
    else:
        cols = {f: table.column(f) for f in present}
        valid = cols["path"].is_valid()
    runs = true_runs(
        valid.to_numpy(zero_copy_only=False)
        if isinstance(valid, pa.Array)
        else np.concatenate([c.to_numpy(zero_copy_only=False) for c in valid.chunks])
        if valid.num_chunks
        else np.zeros(0, bool)
    )
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
    else:
        pv = pa.chunked_array([pa.array([{}] * n, pv_type) if not keys else pa.nulls(n, pv_type)])
    return pa.table(
        {
            "version": pa.array(np.full(n, version, dtype=np.int64)),
            "seq": pa.array(np.full(n, -1, dtype=np.int64)),
            "is_add": pa.array(np.full(n, kind == "add")),
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


def read_checkpoint_others(
    storage: Storage, files: list[LogFile], only: tuple[str, ...] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Non-file actions of a checkpoint, sidecar references included (or just `only`)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for f in files:
        if f.fmt == "json":
            try:
                data = storage.read(f.path)
            except FileNotFoundError as exc:
                raise CorruptCheckpointError(
                    f"{storage.display(f.path)}: checkpoint file is missing", file=f.path
                ) from exc
            for lineno, line in enumerate(data.split(b"\n"), start=1):
                if not line.strip():
                    continue
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise CorruptCheckpointError(
                        f"{storage.display(f.path)}: line {lineno} is not valid JSON", file=f.path, line=lineno
                    ) from exc
                out.extend((name, obj[name]) for name in (only or NON_FILE_ACTIONS) if isinstance(obj.get(name), dict))
        else:
            out.extend(_parquet_others(storage, f.path, only))
    return out


def read_checkpoint_files(
    storage: Storage, files: list[LogFile], others: list[tuple[str, dict[str, Any]]], keys: list[str]
) -> pa.Table:
    """Add and remove actions of a checkpoint and its sidecars, columnar."""
    version = files[0].version
    tables = []
    for f in files:
        if f.fmt == "json":
            try:
                batch: ActionBatch = read_json_actions([(f.path, version, storage.read(f.path))], keys)
            except CorruptLogError as exc:
                raise CorruptCheckpointError(
                    f"{storage.display(f.path)}: unreadable checkpoint ({exc})", file=f.path
                ) from exc
            t = batch.files
            tables.append(t.set_column(1, "seq", pa.array(np.full(t.num_rows, -1, dtype=np.int64))))
        else:
            tables.append(_parquet_files(storage, f.path, version, keys))
    for name, body in others:
        if name == "sidecar":
            tables.append(_parquet_files(storage, sidecar_key(storage, body["path"]), version, keys))
    if not tables:
        return file_batch_schema(keys).empty_table()
    return pa.concat_tables(tables)


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
