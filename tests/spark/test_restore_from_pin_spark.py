"""RESTORE from a pin on Spark: after delta-rs's zero-retention VACUUM and log cleanup of a
golden deletion-vector table (partitioned), Spark plans the restore to the pinned version on
the pin's kept table exactly as the pure planner does (same fingerprint, same plan, the same
files to bring back from the pin), and its run copies them back and commits: delta-rs reads the
version's rows. A partial restore by partition plans the same on both engines."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.restore.plan import plan_restore
from tables.delta.snapshot.dv import deletion_vector_file
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage import api as storage
from tables.delta.write.keep import keep_version
from tables.spark.jobs.restore import run_restore, spark_plan_restore
from tests.core.builders import writable

deltalake = pytest.importorskip("deltalake")

NOW = 1_700_000_000_000
VERSION = 5


def rows(path: Path, version: int | None = None) -> list[tuple]:
    table = deltalake.DeltaTable(str(path), version=version)
    batches = deltalake.QueryBuilder().register("t", table).execute("select * from t").read_all()
    return sorted((tuple(sorted(r.items())) for r in pa.table(batches).to_pylist()), key=repr)


def _age(path: Path) -> None:
    for name in os.listdir(path / "_delta_log"):
        os.utime(path / "_delta_log" / name, (time.time() - 90 * 86_400,) * 2)


@pytest.fixture
def pinned(tmp_path, golden_copy) -> tuple[Path, Path, list[tuple]]:
    """(table, kept table of version 5, version 5's rows before the VACUUM)."""
    storage.set_roots_provider(lambda: [str(tmp_path)])  # reset by the confinement fixture
    table = writable(golden_copy("dv-partitioned-with-checkpoint"))
    expected = rows(table, VERSION)
    kept = tmp_path / "pins" / "1"
    keep_version(str(table), VERSION, str(kept))
    _age(table)
    dt = deltalake.DeltaTable(str(table))
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    live = {deletion_vector_file(d) for d in load_snapshot(str(table)).files.column("deletionVector").to_pylist()}
    for name in os.listdir(table):  # what Delta Lake's VACUUM deletes too (delta-rs leaves them)
        if name.startswith("deletion_vector_") and name not in live:
            os.unlink(table / name)
    deltalake.DeltaTable(str(table)).create_checkpoint()
    _age(table)
    deltalake.DeltaTable(str(table)).cleanup_metadata()
    return table, kept, expected


@pytest.mark.parametrize("where", [None, "part = 2"])
def test_spark_plans_from_the_pin_as_the_core_does(spark, pinned, where) -> None:
    table, kept, _expected = pinned
    ours = spark_plan_restore(spark, table, version=VERSION, pinned=str(kept), clock=lambda: NOW, where=where)
    pure = plan_restore(table, version=VERSION, pinned=str(kept), clock=lambda: NOW, where=where)
    assert ours.fingerprint == pure.fingerprint and ours.to_dict() == pure.to_dict()
    assert ours.from_pin is not None and ours.from_pin["count"] >= 1
    kinds = {f["kind"] for f in ours.from_pin["files"]}
    assert kinds == {"data", "dv"}
    assert all(not (table / f["path"]).exists() for f in ours.from_pin["files"])  # planning copies nothing


def test_spark_run_brings_files_back_and_commits(spark, pinned) -> None:
    table, kept, expected = pinned
    approved = plan_restore(table, version=VERSION, pinned=str(kept)).to_dict()
    result = run_restore(spark, table, approved, "restore-from-pin-1", pinned=str(kept))
    assert result["stale"] is False and result["verified"]
    assert result["fromPin"]["copied"] == approved["fromPin"]["count"]
    assert result["fromPin"]["bytes"] == approved["fromPin"]["bytes"]
    assert rows(table) == expected
