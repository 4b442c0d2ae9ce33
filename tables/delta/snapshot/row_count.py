"""A snapshot's row count without reading its data: each active file's numRecords from the
stats of the add that put it there (the log's commit or checkpoint), else the row count of its
Parquet footer (its last bytes only), less the rows its deletion vector marks deleted.

The same reading RESTORE's row impact does (tables.delta.restore.actions: `log_add_actions`,
`file_rows`, `footer_rows`); a file neither can count is reported, never counted as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from tables.delta.snapshot.files import file_rows, footer_rows, log_add_actions
from tables.delta.snapshot.state import Snapshot
from tables.delta.storage.api import Storage


@dataclass(frozen=True)
class RowCount:
    """The rows of a version's active files, and how each file was counted."""

    version: int
    files: int
    rows: int  # the rows of the files counted (all of them when `unknown_files` is 0)
    from_stats: int  # files counted from their add's numRecords
    from_footers: int  # files counted from their Parquet footer
    unknown_files: int  # files neither could count (a missing or unreadable file)

    @property
    def complete(self) -> bool:
        return self.unknown_files == 0

    def to_dict(self) -> dict[str, int | bool]:
        return {
            "version": self.version,
            "files": self.files,
            "rows": self.rows,
            "fromStats": self.from_stats,
            "fromFooters": self.from_footers,
            "unknownFiles": self.unknown_files,
            "complete": self.complete,
        }


def row_count(storage: Storage, snap: Snapshot) -> RowCount:
    """The live rows of `snap` (numRecords less deletion-vector cardinality, per file), read
    through `storage` (the table's, so every file it opens is confined to the allowed roots)."""
    if snap.num_files == 0:
        return RowCount(snap.version, 0, 0, 0, 0, 0)
    bodies, _found = log_add_actions(storage, snap, snap.files)
    counted = footer_rows(storage, bodies)  # only the files whose add has no numRecords
    rows = stats = footers = unknown = 0
    for body in bodies:
        n = file_rows(body)
        if n is not None:
            stats += 1
        else:
            n = counted.get(body.get("path"))
            if n is None:
                unknown += 1
                continue
            footers += 1
        rows += n
    return RowCount(snap.version, len(bodies), rows, stats, footers, unknown)
