"""TIMESTAMP AS OF answered from the synced history rows, without listing the log.

Opening a log to resolve a time lists every commit file: 8 s on a 1,000,000-commit local log,
for an answer the synced rows already hold. A time before the last synced commit's has the
same answer whatever was committed since (a newer commit's timestamp is later: ICT increase,
file times are monotonized forward), so `stored_times` gives
`tables.delta.history.timestamps.resolve_timestamp` the rows' view of the log and the rule,
its search stays the core's. Later times, tables never synced, a row missing where the search
looks (a version the history never saw), a time out of range and an answer whose commit file is
gone go to the log, as before: it says why.

The file-time alternative of a version under In-Commit Timestamps is its recorded file time
made increasing from the commit before it (the log's own monotonization looks at every
earlier file time: the same unless a file time went backwards, which the History flags).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connections, router

from tables.delta.errors import TimestampOutOfRangeError
from tables.delta.history.timestamps import resolve_timestamp
from tables.delta.log.ict import IctConfig
from tables.delta.log.listing import commit_name
from tables.delta.storage.opening import as_storage
from tables.models import Commit, Table

_ROW_SQL = (
    "SELECT timestamp, timestamp_source, in_commit_timestamp, commit_info_timestamp, file_modification_time "
    "FROM {table} WHERE table_id = %s AND version = %s"
)


class NotStored(Exception):
    """The rows cannot answer: the log is asked instead."""


@dataclass(slots=True)
class _Read:
    """What `CommitTimes.reader.get(v)` gives resolve_timestamp."""

    timestamp: int | None
    in_commit_timestamp: int | None


class StoredTimes:
    """The parts of `CommitTimes` resolve_timestamp uses, answered from one table's rows (one
    indexed row read per version the bisection looks at)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.ict = IctConfig(table.ict_enabled, table.ict_enablement_version, table.ict_enablement_timestamp)
        self.earliest = table.earliest_version
        self.latest = table.last_synced_version
        self.reader = self
        self._rows: dict[int, tuple] = {}
        self._sql = _ROW_SQL.format(table=Commit._meta.db_table)
        self._db = router.db_for_read(Commit)

    def _row(self, version: int) -> tuple:
        row = self._rows.get(version)
        if row is None:
            with connections[self._db].cursor() as cursor:
                cursor.execute(self._sql, [self.table.pk, version])
                row = cursor.fetchone()
            if row is None:
                raise NotStored(version)
            self._rows[version] = row
        return row

    def get(self, version: int) -> _Read:
        row = self._row(version)
        return _Read(row[3], row[2])

    def timestamp(self, version: int) -> tuple[int | None, str]:
        row = self._row(version)
        return row[0], row[1]

    def file_time(self, version: int) -> int:
        ts, source, _ict, _info, raw = self._row(version)
        if source == "file":
            return ts  # stored monotonized
        ev = self.ict.enablement_version
        if ev is None or ev <= self.earliest:
            return raw
        before = self._row(ev - 1)
        return max(raw, before[0] + version - ev + 1) if before[1] == "file" else raw


def stored_times(table: Table, t: int) -> StoredTimes | None:
    """The rows' view of the log when they decide TIMESTAMP AS OF `t`: synced, and `t` before
    the last synced commit's timestamp. None: ask the log."""
    if table.last_synced_version is None or table.earliest_version is None:
        return None
    times = StoredTimes(table)
    try:
        last_ts, _source = times.timestamp(table.last_synced_version)
    except NotStored:
        return None
    if last_ts is None or t >= last_ts:
        return None
    return times


def resolve_stored(table: Table, t: int, **flags: bool) -> dict[str, Any] | None:
    """`resolve_timestamp(times, t, **flags)` on the rows, or None when they cannot answer. The answer's
    commit file is looked at (one stat, or a HEAD on an object store): a log cleaned up or taken
    away since the sync is the log's to explain, as is a time out of range."""
    times = stored_times(table, t)
    if times is None:
        return None
    try:
        out = resolve_timestamp(times, t, **flags)
    except (NotStored, TimestampOutOfRangeError):
        return None
    if not as_storage(table.location).exists(commit_name(out["version"])):
        return None
    return out
