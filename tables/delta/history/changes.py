"""Change data between versions start..end: which rows of which files changed, per version.

Rules (protocol "Add CDC File", SPEC section 3):
- A version with `cdc` actions is read only from its change data files; their
  `_change_type` column says what each row is (insert, delete, update_preimage,
  update_postimage). Its add and remove actions are ignored.
- A version without `cdc` actions: rows of files added with `dataChange=true` are inserts,
  rows of files removed with `dataChange=true` are deletes, each file's deletion vector
  (the add's or the remove's) leaving out the rows it already deleted. When the same path is
  removed and added again in one commit with a different deletion vector (a DELETE or
  RESTORE on a table with deletion vectors), only the difference changed: rows in the new
  vector but not the old are deletes, rows in the old but not the new are inserts.
- `_commit_version` is the version of the commit file; `_commit_timestamp` follows the
  commit timestamp rule (tables.delta.history.timestamps: In-Commit Timestamp for versions at or
  after the enablement version, monotonized file time before).
- Every commit file from start to end must still exist (they are the only record of cdc
  actions); a gap raises VersionNotFoundError naming the missing versions.
- Files are read with the end version's metadata (schema, partitioning, column mapping):
  physical names are stable across versions, columns a file lacks read as null.

`plan_changes` only decides: it returns the entries (file, selection, change type, version)
a data engine reads. Pure; no Spark, no Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tables.delta.errors import CorruptLogError, VersionNotFoundError
from tables.delta.history.timestamps import commit_times, format_ms
from tables.delta.log.actions import Metadata, Protocol, parse_actions
from tables.delta.log.listing import commit_name, list_log
from tables.delta.snapshot.dv import read_deletion_vector
from tables.delta.snapshot.replay import canonical_path
from tables.delta.snapshot.state import load_snapshot, load_table_config
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage

CHANGE_TYPES = ("insert", "delete", "update_preimage", "update_postimage")


@dataclass(slots=True)
class ChangeEntry:
    """Rows of one file that changed in one version. For a data file: `change_type` and a
    selection (`only`: just `rows`; else every row except `rows`). For a change data file
    (`cdc`): every row, typed by the file's own `_change_type` column."""

    version: int
    path: str  # as in the log: URL-encoded, relative to the root or absolute
    partition_values: dict[str, str | None] | None
    change_type: str | None
    cdc: bool = False
    rows: np.ndarray | None = None
    only: bool = False


@dataclass(slots=True)
class VersionChange:
    version: int
    timestamp: int  # ms since the epoch
    timestamp_source: str  # ict | file
    operation: str | None
    source: str  # cdc (change data files) | files (add/remove actions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": format_ms(self.timestamp),
            "timestampMs": self.timestamp,
            "timestampSource": self.timestamp_source,
            "operation": self.operation,
            "source": self.source,
        }


@dataclass(slots=True)
class ChangePlan:
    location: str
    start: int
    end: int
    metadata: Metadata  # as of `end`
    protocol: Protocol  # as of `end`
    protocols: list[Protocol]  # every protocol in force at some version of the range
    versions: list[VersionChange] = field(default_factory=list)
    entries: list[ChangeEntry] = field(default_factory=list)

    def timestamp(self, version: int) -> int:
        return self.versions[version - self.start].timestamp


def commit_actions(storage: Storage, version: int) -> list[tuple[str, dict[str, Any]]]:
    """(action name, body) of every action of a commit file, in file order."""
    rel = commit_name(version)
    try:
        data = storage.read(rel)
    except FileNotFoundError as exc:
        raise VersionNotFoundError(f"{storage.display()}: commit file {rel} is gone", version=version) from exc
    return parse_actions(data, storage.display(rel))


class _Rows:
    """Deletion vectors read once per descriptor; DV files read once per plan."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.cache: dict[str, bytes] = {}

    def __call__(self, action: dict[str, Any]) -> np.ndarray:
        dv = action.get("deletionVector")
        if not dv:
            return np.empty(0, dtype=np.uint64)
        return read_deletion_vector(self.storage, dv, f"{self.storage.display()}/{action.get('path')}", self.cache)


def _data_change(action: dict[str, Any] | None) -> bool:
    return bool(action) and action.get("dataChange", True) is not False  # type: ignore[union-attr]


# Long on purpose: one pass over the range's commits; its cases (adds, removes, deletion
# vectors, change-data files) share the pass's state.
def plan_changes(location: str | Storage, start: int, end: int | None = None) -> ChangePlan:
    """What changed in versions start..end (end: latest when None); see the module's rules."""
    storage = as_storage(location)
    listing = list_log(storage)
    times = commit_times(storage, listing)
    latest = times.latest
    end = latest if end is None else end
    if start < 0 or end < start or end > latest:
        raise VersionNotFoundError(
            f"{storage.display()}: change data needs 0 <= start <= end <= {latest} (the latest version); got {start}..{end}",
            version=end if end > latest else start,
        )
    present = {c.version for c in listing.commits}
    missing = [v for v in range(start, end + 1) if v not in present]
    if missing:
        raise VersionNotFoundError(
            f"{storage.display()}: change data from {start} to {end} needs every commit file, but versions "
            f"{', '.join(map(str, missing[:20]))}{' ...' if len(missing) > 20 else ''} are gone",
            version=missing[0],
        )
    config = load_table_config(storage, listing, end)
    first = load_table_config(storage, listing, start)
    plan = ChangePlan(storage.display(), start, end, config.metadata, config.protocol, [first.protocol])
    rows_of = _Rows(storage)
    known: dict[str, dict[str, str | None] | None] | None = None  # path -> partitionValues

    def prior_values(path: str, version: int) -> dict[str, str | None] | None:
        """Partition values of a file removed at `version` by a remove without them (rare):
        from the snapshot before, kept current with the adds of later versions."""
        nonlocal known
        if known is None:
            known = {}
            if version > 0:
                snap = load_snapshot(storage, version - 1, listing)
                for r in snap.files.select(["path", "partitionValues"]).to_pylist():
                    known[canonical_path(r["path"])] = r["partitionValues"]
        return known.get(canonical_path(path))

    times.warm(start, end)
    for v in range(start, end + 1):
        ts, source = times.timestamp(v)
        if ts is None:
            raise CorruptLogError(
                f"{storage.display()}: version {v} has no inCommitTimestamp although In-Commit Timestamps apply to it",
                version=v,
            )
        actions = commit_actions(storage, v)
        cdc = [b for n, b in actions if n == "cdc"]
        adds = {canonical_path(b["path"]): b for n, b in actions if n == "add" and isinstance(b.get("path"), str)}
        removes = {canonical_path(b["path"]): b for n, b in actions if n == "remove" and isinstance(b.get("path"), str)}
        operation = next((b.get("operation") for n, b in actions if n == "commitInfo"), None)
        for n, b in actions:
            if n == "protocol" and v > start:
                plan.protocols.append(Protocol.from_dict(b))
        plan.versions.append(VersionChange(v, ts, source, operation, "cdc" if cdc else "files"))
        if cdc:
            for b in cdc:
                plan.entries.append(ChangeEntry(v, b["path"], b.get("partitionValues"), None, cdc=True))
        else:
            for key in sorted(set(adds) | set(removes)):
                add, rem = adds.get(key), removes.get(key)
                if add is not None and rem is not None:
                    if not (_data_change(add) or _data_change(rem)):
                        continue
                    before, after = rows_of(rem), rows_of(add)  # rows deleted before / after
                    pv = add.get("partitionValues")
                    deleted = np.setdiff1d(after, before)
                    inserted = np.setdiff1d(before, after)
                    if len(deleted):
                        plan.entries.append(ChangeEntry(v, add["path"], pv, "delete", rows=deleted, only=True))
                    if len(inserted):
                        plan.entries.append(ChangeEntry(v, add["path"], pv, "insert", rows=inserted, only=True))
                elif add is not None and _data_change(add):
                    dropped = rows_of(add)
                    plan.entries.append(
                        ChangeEntry(
                            v, add["path"], add.get("partitionValues"), "insert", rows=dropped if len(dropped) else None
                        )
                    )
                elif rem is not None and _data_change(rem):
                    dropped = rows_of(rem)
                    pv = rem.get("partitionValues") if "partitionValues" in rem else prior_values(rem["path"], v)
                    plan.entries.append(
                        ChangeEntry(v, rem["path"], pv, "delete", rows=dropped if len(dropped) else None)
                    )
        if known is not None:
            for key, add in adds.items():
                known[key] = add.get("partitionValues")
    return plan
