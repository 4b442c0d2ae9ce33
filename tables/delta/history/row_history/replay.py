"""Replaying a row history's plan on the rows a data engine read: the row carried from
version to version (deletion vectors and row selections applied), an event where its values
change (see the package's rules).

Pure: storage only through tables.delta.storage; no Django, no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tables.delta.errors import InvalidColumnsError, at_version
from tables.delta.history.row_history.key import KeyColumn, key_text, same_value
from tables.delta.history.row_history.plan import EntryRead, RowPlan, StartFile
from tables.delta.history.row_history.reader import Match, ReadFile
from tables.delta.history.timestamps import format_ms
from tables.delta.json_values import json_value
from tables.delta.snapshot.dv import read_deletion_vector
from tables.delta.storage.api import Storage

_REMOVED = ("delete", "update_preimage")
_ADDED = ("insert", "update_postimage")


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
    changed = [n for n in names if not same_value(before.get(n), after.get(n))]
    return RowEvent(version, "update", before, after, changed, ts, user) if changed else None


def _not_unique(storage: Storage, keys: list[KeyColumn], count: int, version: int) -> InvalidColumnsError:
    return InvalidColumnsError(
        f"{storage.display()}: key {key_text(keys)} is not unique: {count} rows have it at version {version}; "
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


def select(matches: list[Match], rows: np.ndarray | None, only: bool) -> list[Match]:
    """The matches a change entry's selection keeps: only `rows`, or all but `rows`."""
    if rows is None or not matches:
        return [] if only else matches
    hit = np.isin(np.fromiter((m.index for m in matches), dtype=np.uint64, count=len(matches)), rows)
    return [m for m, h in zip(matches, hit, strict=True) if h == only]


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
