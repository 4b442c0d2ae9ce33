"""Checkpoints we write are read back the same by us and by delta-rs."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from tables.delta.log.checkpoint import write_checkpoint
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.opening import open_storage

deltalake = pytest.importorskip("deltalake")


def rs_paths(path) -> list[str]:
    return sorted(pa.table(deltalake.DeltaTable(str(path)).get_add_actions(flatten=True)).column("path").to_pylist())


def test_checkpoint_with_deletion_vectors_replaces_the_commits(golden_copy) -> None:
    t = golden_copy("dv-partitioned-with-checkpoint")
    for f in (t / "_delta_log").glob("*checkpoint*"):
        f.unlink()
    (t / "_delta_log" / "_last_checkpoint").unlink(missing_ok=True)
    expected = load_snapshot(t, 12)
    write_checkpoint(open_storage(t), expected)
    for v in range(12):
        os.unlink(t / "_delta_log" / f"{v:020d}.json")  # only the checkpoint can rebuild 12 now
    ours = load_snapshot(t, 12)
    assert ours.segment.checkpoint_version == 12
    assert sorted(ours.files.column("path").to_pylist()) == sorted(expected.files.column("path").to_pylist())
    assert ours.files.column("deletionVector").to_pylist() == expected.files.column("deletionVector").to_pylist()
    latest = load_snapshot(t)
    assert sorted(latest.files.column("path").to_pylist()) == rs_paths(t)


def test_partitioned_checkpoint_keeps_partition_values(tmp_path) -> None:
    p = tmp_path / "t"
    deltalake.write_deltalake(str(p), pa.table({"x": [1, 2], "d": ["a b", None]}), partition_by=["d"])
    deltalake.write_deltalake(str(p), pa.table({"x": [3], "d": ["é%"]}), mode="append", partition_by=["d"])
    snap = load_snapshot(p)
    write_checkpoint(open_storage(p), snap)
    for v in range(2):
        os.unlink(p / "_delta_log" / f"{v:020d}.json")
    again = load_snapshot(p)
    assert again.segment.checkpoint_version == 1
    assert sorted(map(str, again.files.column("partitionValues").to_pylist())) == sorted(
        map(str, snap.files.column("partitionValues").to_pylist())
    )
    dt = deltalake.DeltaTable(str(p))
    assert sorted(dt.to_pyarrow_table().column("x").to_pylist()) == [1, 2, 3]
