"""A version's files as the log wrote them: the add actions themselves (stats, tags, row
tracking and deletion vectors kept) for chosen paths, read back from the commits and the
checkpoint that hold them, and their live rows (numRecords less the deletion vector, else the
Parquet footer). RESTORE commits these adds; the diff, the row count and a row's history read them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.errors import CorruptCheckpointError, CorruptLogError
from tables.delta.log.checkpoint import open_parquet, plain_value, read_checkpoint_others, sidecar_key
from tables.delta.log.jsonline import loads_line
from tables.delta.log.listing import commit_name
from tables.delta.snapshot.replay import action_identity, identity_keys
from tables.delta.snapshot.state import Snapshot
from tables.delta.storage.api import Storage


def _clean_add(body: dict[str, Any]) -> dict[str, Any]:
    """An add body as JSON carries it: no absent optional fields, no parsed-stats columns."""
    out = {k: v for k, v in body.items() if v is not None and not k.endswith("_parsed")}
    dv = out.get("deletionVector")
    if isinstance(dv, dict):
        out["deletionVector"] = {k: v for k, v in dv.items() if v is not None}
    return out


def _commit_adds(storage: Storage, version: int, wanted: set[str]) -> dict[str, dict[str, Any]]:
    try:
        data = storage.read(commit_name(version))
    except FileNotFoundError:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for line in data.split(b"\n"):
        if b'"add"' not in line:
            continue
        try:
            obj = loads_line(line, "")
        except CorruptLogError:
            continue  # not a usable add (or too deep to carry): it is rebuilt from replay's columns
        body = obj.get("add") if isinstance(obj, dict) else None
        if isinstance(body, dict) and isinstance(body.get("path"), str):
            key = action_identity(body)
            if key in wanted:
                found[key] = body
    return found


def _parquet_adds(storage: Storage, rel: str, paths: pa.Array) -> list[dict[str, Any]]:
    pf = open_parquet(storage, rel)
    if "add" not in pf.schema_arrow.names:
        return []
    col = pf.read(columns=["add"]).column("add").combine_chunks()
    hit = pc.fill_null(pc.is_in(col.field("path"), value_set=paths), False)
    return [plain_value(v) for v in col.filter(hit).to_pylist() if v is not None]


def _json_adds(storage: Storage, rel: str) -> list[dict[str, Any]]:
    out = []
    name = storage.display(rel)
    for lineno, line in enumerate(storage.read(rel).split(b"\n"), start=1):
        if b'"add"' in line:
            obj = loads_line(line, name, lineno, CorruptCheckpointError)
            if isinstance(obj, dict) and isinstance(obj.get("add"), dict):
                out.append(obj["add"])
    return out


def _checkpoint_adds(storage: Storage, snap: Snapshot, wanted: set[str], paths: list[str]) -> dict[str, dict]:
    files = snap.segment.checkpoint or []
    value_set = pa.array(sorted(set(paths)), pa.string())
    bodies: list[dict[str, Any]] = []
    for f in files:
        bodies += _json_adds(storage, f.path) if f.fmt == "json" else _parquet_adds(storage, f.path, value_set)
    for name, body in read_checkpoint_others(storage, files):
        if name == "sidecar":
            rel = sidecar_key(storage, body["path"])
            bodies += _json_adds(storage, rel) if rel.endswith(".json") else _parquet_adds(storage, rel, value_set)
    found = {}
    for b in bodies:
        if isinstance(b.get("path"), str):
            key = action_identity(b)
            if key in wanted:
                found[key] = b
    return found


def _rebuilt_add(row: dict[str, Any], partition_keys: list[str]) -> dict[str, Any]:
    pv = row.get("partitionValues") or {}
    body = {
        "path": row["path"],
        "partitionValues": {k: pv.get(k) for k in partition_keys},
        "size": row["size"],
        "modificationTime": row["modificationTime"],
        "dataChange": True,
    }
    if row.get("deletionVector"):
        body["deletionVector"] = row["deletionVector"]
    return _clean_add(body)


def log_add_actions(storage: Storage, snap: Snapshot, rows: pa.Table) -> tuple[list[dict[str, Any]], int]:
    """The add actions the log holds for `rows` (a slice of snap.files), in row order, and
    how many were found there. The snapshot keeps only replay's columns; the commit (or
    checkpoint) that added a file also has its stats, tags and row-tracking fields, which a
    restore must carry (deletion vectors need numRecords; row IDs come back with the file).
    Files not found there (a checkpoint written without them) are rebuilt from the columns.
    """
    if rows.num_rows == 0:
        return [], 0
    keys = identity_keys(rows).to_pylist()
    versions = rows.column("version").to_pylist()
    seqs = rows.column("seq").to_pylist()
    by_version: dict[int, set[str]] = {}
    from_checkpoint: set[str] = set()
    cp_paths: list[str] = []
    raw_paths = rows.column("path").to_pylist()
    for k, v, s, p in zip(keys, versions, seqs, raw_paths, strict=True):
        if s < 0:
            from_checkpoint.add(k)
            cp_paths.append(p)
        else:
            by_version.setdefault(v, set()).add(k)
    found: dict[str, dict[str, Any]] = {}
    for v, wanted in sorted(by_version.items()):
        found.update(_commit_adds(storage, v, wanted))
    if from_checkpoint:
        found.update(_checkpoint_adds(storage, snap, from_checkpoint, cp_paths))
    partition_keys = snap.metadata.partition_keys()
    out, recovered = [], 0
    rebuilt_rows = None
    for i, k in enumerate(keys):
        body = found.get(k)
        if body is not None:
            recovered += 1
            out.append(_clean_add(body))
        else:
            if rebuilt_rows is None:
                rebuilt_rows = rows.select(
                    ["path", "size", "partitionValues", "modificationTime", "deletionVector"]
                ).to_pylist()
            out.append(_rebuilt_add(rebuilt_rows[i], partition_keys))
    return out, recovered


def file_rows(body: dict[str, Any]) -> int | None:
    """Live rows of one add (or remove carrying the add's fields): numRecords from its stats
    less its deletion vector's cardinality; None when the stats do not say."""
    stats = body.get("stats")
    if isinstance(stats, str):
        try:
            stats = orjson.loads(stats)
        except orjson.JSONDecodeError:
            return None
    n = stats.get("numRecords") if isinstance(stats, dict) else None
    if isinstance(n, bool) or not isinstance(n, int):
        return None
    dv = body.get("deletionVector")
    gone = dv.get("cardinality") if isinstance(dv, dict) else None
    return max(0, n - int(gone or 0))


FOOTER_TAIL = 64 * 1024  # one read takes the footer of almost every file


FOOTER_THREADS = 16


def footer_rows(storage: Storage, bodies: list[dict[str, Any]]) -> dict[str, int]:
    """Rows of the files whose adds carry no numRecords, from their Parquet footers (the file's
    last bytes only, read in parallel through the storage, so confined as any read), less their
    deletion vectors' cardinality; a file whose footer cannot be read is left out (unknown)."""
    todo = {b["path"]: b for b in bodies if isinstance(b.get("path"), str) and file_rows(b) is None}
    if not todo:
        return {}

    def one(body: dict[str, Any]) -> int | None:
        try:
            n = _footer_num_rows(storage, storage.resolve(body["path"]), body.get("size"))
        except Exception:  # a missing, unreadable or not-Parquet file: its rows stay unknown
            return None
        dv = body.get("deletionVector")
        gone = dv.get("cardinality") if isinstance(dv, dict) else None
        return max(0, n - int(gone or 0))

    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(todo))) as pool:
        counted = dict(zip(todo, pool.map(one, todo.values()), strict=True))
    return {path: n for path, n in counted.items() if n is not None}


def _footer_num_rows(storage: Storage, key: str, size: object) -> int:
    import pyarrow.parquet as pq  # only when a footer is read

    total = size if isinstance(size, int) and size > 12 else storage.head(key).size
    tail = storage.read(key, (max(0, total - FOOTER_TAIL), total))
    meta_len = int.from_bytes(tail[-8:-4], "little")
    if tail[-4:] != b"PAR1" or meta_len + 8 > total:
        raise ValueError("not a Parquet file")
    if meta_len + 8 > len(tail):  # a very wide schema: read the whole footer
        tail = storage.read(key, (total - meta_len - 8, total))
    return pq.ParquetFile(pa.BufferReader(tail[-(meta_len + 8) :])).metadata.num_rows
