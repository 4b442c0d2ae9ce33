"""Tables whose pinned versions outlive a VACUUM, for the tests of the readers that follow pins
(Spark's, Delta Sharing's): the table registered and synced, delta-rs's zero-retention VACUUM
and log cleanup then a sync, and the rows delta-rs reads of a version (the peer)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")
OLD = 90 * 86_400  # past the log's 30 days of retention


def peer_table(path: Path, version: int | None = None) -> pa.Table:
    """The version as delta-rs reads it (its SQL engine: deletion vectors and column mapping)."""
    table = deltalake.DeltaTable(str(path), version=version)
    return pa.table(deltalake.QueryBuilder().register("t", table).execute("select * from t").read_all())


def register(path: Path):
    """The table registered under its directory's name and synced."""
    from tables.services.catalog import registration
    from tables.services.sync import store as sync

    table = registration.register_table(path.name, str(path))
    sync.sync_table(table.pk)
    table.refresh_from_db()
    return table


def vacuum(path: Path, table, *, age_log: bool) -> None:
    """delta-rs's VACUUM with no retention and its log cleanup (the log aged past its 30 days
    when `age_log`, so commits before the last checkpoint go), then a sync."""
    from tables.services.sync import store as sync
    from tables.services.versions import read as versions

    if age_log:
        for name in os.listdir(path / "_delta_log"):
            os.utime(path / "_delta_log" / name, (time.time() - OLD,) * 2)
    dt = deltalake.DeltaTable(str(path))
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt.cleanup_metadata()
    sync.sync_table(table.pk)
    table.refresh_from_db()
    versions._SNAPSHOTS.clear()
