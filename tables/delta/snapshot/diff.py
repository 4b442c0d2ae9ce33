"""What changed between two snapshots: schema, partitioning, properties, protocol and files.

Plain Python over pyarrow (no Django, no Spark); the app adds the commits in between from
its cache, and a restore's plan comparison uses the schema and dict diffs too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.log.actions import Metadata
from tables.delta.snapshot.files import file_rows, footer_rows, log_add_actions
from tables.delta.snapshot.replay import identity_keys
from tables.delta.snapshot.state import Snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.text_bounds import echoed_path, echoed_values


def schema_fields(md: Metadata) -> dict[str, dict[str, Any]]:
    """The top-level columns of a schema by name."""
    return {f.get("name"): f for f in (md.schema.get("fields") or []) if isinstance(f, dict)}


def schema_changes(a: Metadata, b: Metadata) -> list[dict[str, Any]]:
    """Columns added, removed or changed from schema a to schema b, in column order."""
    fa, fb = schema_fields(a), schema_fields(b)
    out = []
    for name in list(fa) + [n for n in fb if n not in fa]:
        if name not in fb:
            out.append({"column": name, "change": "removed", "from": fa[name], "to": None})
        elif name not in fa:
            out.append({"column": name, "change": "added", "from": None, "to": fb[name]})
        elif fa[name] != fb[name]:
            out.append({"column": name, "change": "changed", "from": fa[name], "to": fb[name]})
    return out


def dict_diff(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Keys added, removed or changed from a to b, sorted by key."""
    out = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            change = "added" if k not in a else "removed" if k not in b else "changed"
            out.append({"key": k, "change": change, "from": a.get(k), "to": b.get(k)})
    return out


def _summary(t: pa.Table) -> dict[str, Any]:
    parts = set()
    if t.num_rows and t.schema.field("partitionValues").type.num_fields:
        for pv in t.column("partitionValues").to_pylist():
            parts.add(tuple(sorted((pv or {}).items())))
    size = int(pc.sum(t.column("size")).as_py() or 0) if t.num_rows else 0
    return {
        "count": t.num_rows,
        "bytes": size,
        # a null partition value (the __HIVE_DEFAULT_PARTITION__) sorts first, never against a str
        "partitions": [dict(p) for p in sorted(parts, key=lambda p: [(k, v is not None, v or "") for k, v in p])][:200],
        "partitionCount": len(parts),
    }


def sample_files(storage: Storage, snap: Snapshot, rows: pa.Table) -> list[dict[str, Any]]:
    """path, size, partitionValues and numRecords of some of a snapshot's files. The snapshot
    keeps only replay's columns, so the stats come from the commit (or checkpoint) that added
    each file; an add without stats is counted from its Parquet footer, as the Overview's row
    count and a restore plan count it; numRecords is None when neither can be read (a file
    gone)."""
    out = []
    bodies = log_add_actions(storage, snap, rows)[0]
    # the footers' rows as written (no deletion vector taken off, as the stats' numRecords)
    footers = footer_rows(storage, [{"path": b.get("path"), "size": b.get("size")} for b in bodies])
    for body in bodies:
        counted = file_rows({"stats": body.get("stats")})
        out.append(
            {
                "path": echoed_path(unquote(body["path"])),
                "size": body.get("size"),
                "partitionValues": echoed_values(body.get("partitionValues")),
                # the stats' numRecords as written (a deletion vector's rows are not taken off)
                "numRecords": counted if counted is not None else footers.get(body.get("path")),
            }
        )
    return out


def snapshot_diff(
    a: Snapshot,
    b: Snapshot,
    sample: int = 50,
    storage: Storage | str | None = None,
    *,
    added_from: int = 0,
    removed_from: int = 0,
) -> dict[str, Any]:
    """What changed from snapshot a to snapshot b (files by identity: path + deletion vector).
    Each side lists `sample` files twice, its first ones or those from `added_from` /
    `removed_from` on (`sampleFrom`; pages of a long list): `sample` as bare paths,
    `sampleFiles` with size, partition values and row count (read from the log through
    `storage`; when not given, each side through its own snapshot's location: a version
    kept elsewhere, a pin's kept table, reads its adds there)."""
    ka, kb = identity_keys(a.files), identity_keys(b.files)
    added = b.files.filter(pc.invert(pc.is_in(kb, value_set=ka))) if b.num_files else b.files
    removed = a.files.filter(pc.invert(pc.is_in(ka, value_set=kb))) if a.num_files else a.files
    stores = {snap.location: as_storage(snap.location) for snap in (a, b)} if storage is None else {}
    given = as_storage(storage) if storage is not None else None

    def files_of(snap: Snapshot, t: pa.Table, start: int) -> dict[str, Any]:
        store = given if given is not None else stores[snap.location]
        start = max(0, min(start, t.num_rows))
        head = t.slice(start, sample)
        return {
            **_summary(t),
            "sampleFrom": start,
            "sample": [echoed_path(unquote(p)) for p in head.column("path").to_pylist()],
            "sampleFiles": sample_files(store, snap, head),
        }

    return {
        "from": a.version,
        "to": b.version,
        "schema": schema_changes(a.metadata, b.metadata),
        "partitionColumns": {"from": list(a.metadata.partition_columns), "to": list(b.metadata.partition_columns)},
        "properties": dict_diff(a.metadata.configuration, b.metadata.configuration),
        "protocol": dict_diff(a.protocol.to_dict(), b.protocol.to_dict()),
        "filesAdded": files_of(b, added, added_from),
        "filesRemoved": files_of(a, removed, removed_from),
        "numFiles": {"from": a.num_files, "to": b.num_files},
        "sizeBytes": {"from": a.size_bytes, "to": b.size_bytes},
    }
