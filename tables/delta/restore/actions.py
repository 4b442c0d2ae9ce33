"""The actions of a RESTORE commit: the log's own add actions for the files to add (stats,
tags and row tracking kept), the removes, and the check that the files to add still exist."""

from __future__ import annotations

import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.errors import MissingFilesError
from tables.delta.snapshot.dv import deletion_vector_file
from tables.delta.snapshot.files import file_rows, footer_rows, log_add_actions
from tables.delta.snapshot.replay import identity_keys
from tables.delta.snapshot.state import Snapshot
from tables.delta.storage.api import Storage

MAX_LISTED_MISSING = 100


# --- identities ----------------------------------------------------------------------------


def diff_files(latest: pa.Table, target: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(rows of `target` to add, rows of `latest` to remove): anti-joins on file identity."""
    lk, tk = identity_keys(latest), identity_keys(target)
    to_add = target.filter(pc.invert(pc.is_in(tk, value_set=lk))) if target.num_rows else target
    to_remove = latest.filter(pc.invert(pc.is_in(lk, value_set=tk))) if latest.num_rows else latest
    return to_add, to_remove


# --- the log's own add actions ---------------------------------------------------------------


def restore_add(add: dict[str, Any]) -> dict[str, Any]:
    """A target file re-added by the restore: the log's add with dataChange=true."""
    return {**add, "dataChange": True}


def restore_remove(add: dict[str, Any], deletion_timestamp: int) -> dict[str, Any]:
    """A latest file removed by the restore (Delta Lake's AddFile.removeWithTimestamp)."""
    out: dict[str, Any] = {
        "path": add["path"],
        "deletionTimestamp": deletion_timestamp,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add.get("partitionValues") or {},
        "size": add.get("size"),
    }
    for k in ("tags", "deletionVector", "baseRowId", "defaultRowCommitVersion", "stats"):
        if add.get(k) is not None:
            out[k] = add[k]
    return out


# --- existence of the files to add -------------------------------------------------------------


LIST_AT = 1000  # keys of one directory from which a listing (1,000 objects a request) beats a HEAD each
SIZE_THREADS = 16  # concurrent HEADs on an object store


def file_sizes(storage: Storage, keys: list[str]) -> dict[str, int | None]:
    """{key: its size, None when absent} of confined keys. On an object store, a directory
    holding at least LIST_AT of the keys is listed once (its objects and their sizes, a page of
    1,000 a request) instead of a HEAD per key; the other keys get a HEAD each, concurrently.
    On local disk, a stat each."""
    out: dict[str, int | None] = {}
    remote = storage.remote
    if remote:
        by_dir: dict[str, list[str]] = {}
        for key in keys:
            by_dir.setdefault(posixpath.dirname(key), []).append(key)
        for directory, some in by_dir.items():
            if len(some) < LIST_AT:
                continue
            try:
                listed = {f.path: f.size for f in storage.list_from(directory)}
            except FileNotFoundError:
                listed = {}
            out.update((k, listed.get(k)) for k in some)
    rest = [k for k in dict.fromkeys(keys) if k not in out]

    def one(key: str) -> tuple[str, int | None]:
        try:
            return key, int(storage.head(key).size)
        except FileNotFoundError:
            return key, None

    threads = min(SIZE_THREADS, max(1, len(rest))) if remote else 1
    with ThreadPoolExecutor(max_workers=threads) as pool:
        out.update(pool.map(one, rest))
    return out


def missing_files(storage: Storage, adds: list[dict[str, Any]]) -> tuple[list[str], set[int]]:
    """(missing data and deletion-vector files, indexes of the adds they belong to). Every
    path is resolved (refused outside the allowed roots) before any is probed."""
    wanted: list[tuple[int, str, str]] = []  # (add index, key, path as the log names it)
    for i, a in enumerate(adds):
        wanted.append((i, storage.resolve(a["path"]), a["path"]))
        dv_file = deletion_vector_file(a.get("deletionVector"))
        if dv_file is not None:
            wanted.append((i, storage.resolve(dv_file), dv_file))
    sizes = file_sizes(storage, [key for _i, key, _p in wanted])
    missing: list[str] = []
    bad: set[int] = set()
    for i, key, path in wanted:
        if sizes[key] is None:
            missing.append(unquote(path))
            bad.add(i)
    return missing, bad


def missing_error(location: str, version: int, missing: list[str]) -> MissingFilesError:
    shown = missing[:MAX_LISTED_MISSING]
    more = f" (showing {len(shown)} of {len(missing)})" if len(missing) > len(shown) else ""
    return MissingFilesError(
        f"{location}: not all files of version {version} are available: {len(missing)} missing{more}: "
        f"{', '.join(shown)}. Restore a more recent version, or ignore missing files to restore "
        f"the table without them.",
        files=shown,
        version=version,
        count=len(missing),
    )


# --- impact in rows ------------------------------------------------------------------------------

MAX_LISTED_PARTITIONS = 100


def _partition_of(body: dict[str, Any], keys: list[str]) -> tuple[str | None, ...]:
    pv = body.get("partitionValues") or {}
    return tuple((pv.get(k) if pv.get(k) != "" else None) for k in keys)


def row_impact(
    storage: Storage,
    latest: Snapshot,
    adds: list[dict[str, Any]],
    removes: list[dict[str, Any]],
    pin: Storage | None = None,
) -> dict[str, Any]:
    """How many rows a plan changes, from the files' statistics: the latest's rows now and
    after, the rows added back and removed; for a partitioned table the same per partition
    the plan changes (the first MAX_LISTED_PARTITIONS in partition order). A file without
    numRecords is counted from its Parquet footer; `estimate` is true only when a file's rows
    could be had from neither (it then counts as 0 rows). `pin`: where the files to add are
    read when the table lacks them (the kept table of a pin, restore/from_pin.py)."""
    names = list(latest.metadata.partition_columns)
    keys = latest.metadata.partition_keys()
    current, _found = log_add_actions(storage, latest, latest.files)
    from_footers = footer_rows(storage, current + adds)  # where the stats say nothing
    if pin is not None:  # files VACUUM took: their footers are in the pin store
        from_footers = {**footer_rows(pin, [a for a in adds if a.get("path") not in from_footers]), **from_footers}
    totals = {"rowsNow": 0, "rowsAdded": 0, "rowsRemoved": 0}
    per: dict[tuple[str | None, ...], dict[str, Any]] = {}
    no_stats = 0

    def count(bodies: list[dict[str, Any]], what: str, changes: bool) -> None:
        nonlocal no_stats
        for b in bodies:
            n = file_rows(b)
            if n is None:
                n = from_footers.get(b.get("path"))
            part = _partition_of(b, keys)
            slot = per.get(part)
            if slot is None:
                slot = per[part] = {"rowsNow": 0, "rowsAdded": 0, "rowsRemoved": 0, "estimate": False, "changed": False}
            slot["changed"] = slot["changed"] or changes
            if n is None:
                no_stats += what != "rowsRemoved"  # a removed file is one of the latest's, counted
                slot["estimate"] = True
                n = 0
            slot[what] += n
            totals[what] += n

    count(current, "rowsNow", False)
    count(adds, "rowsAdded", True)
    count(removes, "rowsRemoved", True)
    out: dict[str, Any] = {
        **totals,
        "rowsAfter": totals["rowsNow"] - totals["rowsRemoved"] + totals["rowsAdded"],
        "estimate": no_stats > 0,
        "filesWithoutStats": no_stats,
    }
    if names:
        changed = sorted(
            (p for p, slot in per.items() if slot["changed"]),
            key=lambda p: tuple((v is not None, v or "") for v in p),
        )
        listed = []
        for p in changed[:MAX_LISTED_PARTITIONS]:
            slot = per[p]
            listed.append(
                {
                    "partition": dict(zip(names, p, strict=True)),
                    "rowsNow": slot["rowsNow"],
                    "rowsAfter": slot["rowsNow"] - slot["rowsRemoved"] + slot["rowsAdded"],
                    "rowsAdded": slot["rowsAdded"],
                    "rowsRemoved": slot["rowsRemoved"],
                    "estimate": slot["estimate"],
                }
            )
        out["partitions"] = listed
        out["numPartitionsChanged"] = len(changed)
        out["partitionsTruncated"] = len(changed) > len(listed)
    return out
