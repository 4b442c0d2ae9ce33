"""The plan of a row history: which files of which versions are read.

Every decision here is made from the log alone (partition values, statistics, change
entries), before any data file is opened: a data engine then reads exactly `RowPlan.reads`
(pyarrow in `reader`, Spark in tables.spark.jobs.row_history) and `replay` turns its rows into
events.

Pure: storage only through tables.delta.storage; no Django, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tables.delta.errors import CorruptLogError, at_version
from tables.delta.history.changes import ChangeEntry, ChangePlan, commit_actions, plan_changes
from tables.delta.history.row_history.key import KeyColumn, key_pairs, parse_key
from tables.delta.history.row_history.pruning import FileRead, Pruner, partition_may_hold
from tables.delta.history.row_history.reader import RowLayout
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.log.listing import available_versions, list_log
from tables.delta.snapshot.files import log_add_actions
from tables.delta.snapshot.partitions import distinct_partitions, partition_columns
from tables.delta.snapshot.replay import canonical_path
from tables.delta.snapshot.schema.columnmapping import mapping_mode
from tables.delta.snapshot.state import check_reader_protocol, load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage


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


def _range(storage: Storage, listing: Any, start: int | None, end: int | None) -> tuple[int, int]:
    if start is not None and end is not None:
        return start, end
    available = available_versions(listing)
    if available is None:
        raise CorruptLogError(f"{storage.display()}: no version of this table can be rebuilt from its log")
    return (available[0] if start is None else start), (available[1] if end is None else end)


def _commit_facts(storage: Storage, version: int, pruner: Pruner) -> tuple[str | None, list[tuple[str, Any]]]:
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


def _start_files(storage: Storage, pruner: Pruner, layout: RowLayout, version: int, listing: Any) -> list[StartFile]:
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
    pruner: Pruner, changes: ChangePlan, version: int, entries: list[ChangeEntry], touched: list[tuple[str, Any]]
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
    """Which files of which versions the history of the row with `key` reads (see the package's
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
    keys = parse_key(schema, mode, layout.partitions, key_pairs(key))
    plan = RowPlan(storage, changes.metadata, changes.protocol, changes.protocols, layout, keys, start, end)
    pruner = Pruner(plan.keys, plan.reads, plan.seen)
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
