"""Tables whose pinned versions outlive a VACUUM, for the tests of the readers that follow pins
(Spark's, Delta Sharing's) and of the pages that show them: the allowed root and pin store, a
table whose overwrites leave files for VACUUM to delete, the table registered and synced,
delta-rs's zero-retention VACUUM and log cleanup then a sync, and the rows delta-rs reads of a
version (the peer)."""

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


def pin_place(settings, tmp_path: Path) -> Path:
    """The allowed root `tables/` under tmp_path (returned) and the pin store `pins/` beside it."""
    src = tmp_path / "tables"
    src.mkdir()
    settings.DELTAWEB_ALLOWED_ROOTS = [str(src)]
    settings.DELTAWEB_PIN_STORE = str(tmp_path / "pins")
    return src


def orders_table(path: Path, configuration: dict[str, str] | None = None) -> Path:
    """Versions 0-5 by delta-rs: appends, and overwrites at 2 and 4 (what they replace VACUUM
    deletes); `configuration` is the table's, set at version 0."""
    for i in range(6):
        mode = "overwrite" if i in (2, 4) else "append"
        ids = pa.array(range(i * 100, i * 100 + 8 + i), pa.int64())
        data = pa.table({"id": ids, "name": pa.array([f"r{v}" for v in ids.to_pylist()])})
        deltalake.write_deltalake(str(path), data, mode=mode, configuration=configuration if i == 0 else None)
    time.sleep(0.05)  # a VACUUM with retention 0 "now" lies after every removal
    return path


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
