"""Tables written by delta-rs in the test itself, read back version by version.

For every version, our snapshot must show what delta-rs shows for the same version: the
active files (raw log paths, sizes, modification times, partition values), the protocol
and the metadata. The tables cover what writers do to a table over time: appends,
deletes, overwrites, restores, compaction, checkpoints followed by more commits, metadata
cleanup, partition values that need escaping, column mapping and table features.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta import errors
from tables.delta.snapshot.state import Snapshot, load_snapshot

deltalake = pytest.importorskip("deltalake")
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake  # noqa: E402

LOG = "_delta_log"


def rows(ids: list[int], parts: list[str | None] | None = None) -> pa.Table:
    cols: dict[str, pa.Array] = {"id": pa.array(ids, pa.int64())}
    if parts is not None:
        cols["p"] = pa.array(parts, pa.string())
    return pa.table(cols)


def rs_adds(dt: DeltaTable) -> pa.Table:
    return pa.table(dt.get_add_actions(flatten=True))


def _text(value: object) -> str | None:
    """delta-rs types partition values (int, date); the log holds them as strings."""
    return None if value is None else str(value)


def assert_same_as_deltars(path: Path, version: int | None = None) -> Snapshot:
    """Our snapshot at `version` (latest when None) equals delta-rs's, field by field."""
    rv = DeltaTable(str(path)) if version is None else DeltaTable(str(path), version=version)
    snap = load_snapshot(path, version)
    where = f"version {rv.version()}"
    assert snap.version == rv.version()

    adds = rs_adds(rv)
    assert snap.num_files == adds.num_rows, where
    ours = {
        r["path"]: r for r in snap.files.select(["path", "size", "modificationTime", "partitionValues"]).to_pylist()
    }
    theirs = {r["path"]: r for r in adds.to_pylist()}
    assert sorted(ours) == sorted(theirs), where
    assert len(ours) == snap.num_files, f"{where}: a path is active twice"
    for p, r in theirs.items():
        assert ours[p]["size"] == r["size_bytes"], f"{where}: {p}"
        assert ours[p]["modificationTime"] == r["modification_time"], f"{where}: {p}"
    assert snap.size_bytes == sum(r["size_bytes"] for r in theirs.values())

    proto = rv.protocol()
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (
        proto.min_reader_version,
        proto.min_writer_version,
    ), where
    assert sorted(snap.protocol.reader_features or []) == sorted(proto.reader_features or []), where
    assert sorted(snap.protocol.writer_features or []) == sorted(proto.writer_features or []), where

    md = rv.metadata()
    assert snap.metadata.id == md.id
    assert list(snap.metadata.partition_columns) == list(md.partition_columns)
    assert snap.metadata.configuration == dict(md.configuration), where
    assert (snap.metadata.name, snap.metadata.description) == (md.name, md.description)
    assert snap.metadata.created_time == md.created_time

    # partition values: ours are keyed as in the log (physical names under column mapping),
    # delta-rs names its columns partition.<logical name>
    logical = list(md.partition_columns)
    physical = snap.metadata.partition_keys()
    for p, r in theirs.items():
        pv = ours[p]["partitionValues"] or {}
        got = {name: pv.get(key) for name, key in zip(logical, physical, strict=True)}
        want = {name: _text(r[f"partition.{name}"]) for name in logical}
        assert got == want, f"{where}: {p}"
    return snap


def assert_every_version(path: Path) -> list[Snapshot]:
    """Compare every version, then the latest read without a version (uses _last_checkpoint)."""
    latest = DeltaTable(str(path)).version()
    snaps = [assert_same_as_deltars(path, v) for v in range(latest + 1)]
    assert assert_same_as_deltars(path).version == latest
    return snaps


def decoded_paths_exist(path: Path, snap: Snapshot) -> None:
    """file_paths() decodes the log's URL-encoded paths into the files on disk."""
    missing = [p for p in snap.file_paths() if not (path / p).is_file()]
    assert not missing


def test_append_delete_overwrite_restore(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(path, rows([1, 2, 3]))  # v0
    write_deltalake(path, rows([4, 5]), mode="append")  # v1
    DeltaTable(path).delete("id = 2")  # v2: rewrites the file that held id 2
    write_deltalake(path, rows([10]), mode="overwrite")  # v3
    DeltaTable(path).restore(1)  # v4
    write_deltalake(path, rows([6]), mode="append")  # v5

    snaps = assert_every_version(path)
    paths = [set(s.files.column("path").to_pylist()) for s in snaps]
    assert [len(p) for p in paths] == [1, 2, 2, 1, 2, 3]
    assert paths[3].isdisjoint(paths[2]), "overwrite replaces every file"
    assert paths[4] == paths[1], "restore brings back exactly version 1's files"
    assert paths[5] > paths[4]
    for s in snaps:
        decoded_paths_exist(path, s)


def test_partition_values_that_need_escaping(tmp_path: Path) -> None:
    path = tmp_path / "parts"
    values = ["a b", "x%y", "é", None, "a/b=c:d", "%20", "plain"]
    t = pa.table(
        {
            "id": pa.array(range(len(values)), pa.int64()),
            "p": pa.array(values, pa.string()),
            "n": pa.array([1, 2, None, 1, 2, 3, 1], pa.int32()),
            "d": pa.array([datetime.date(2024, 1, i + 1) for i in range(len(values))]),
        }
    )
    write_deltalake(path, t, partition_by=["p", "n", "d"])  # v0
    write_deltalake(path, t.slice(0, 3), mode="append")  # v1
    DeltaTable(path).delete("p = 'x%y'")  # v2
    DeltaTable(path).delete("p IS NULL")  # v3
    write_deltalake(path, t.slice(2, 2), mode="append")  # v4: a null partition again

    snaps = assert_every_version(path)
    assert [s.num_files for s in snaps] == [7, 10, 8, 7, 9]
    for s in snaps:
        decoded_paths_exist(path, s)
    latest = snaps[-1]
    by_p = sorted((f["partitionValues"]["p"] or "<null>") for f in latest.file_dicts())
    assert by_p == sorted(["a b", "a b", "é", "é", "é", "a/b=c:d", "%20", "plain", "<null>"])
    # the null partition value stays null (not the string "null" nor the Hive default name)
    nulls = [f for f in latest.file_dicts() if f["partitionValues"]["p"] is None]
    assert len(nulls) == 1 and "__HIVE_DEFAULT_PARTITION__" in nulls[0]["path"]
    assert nulls[0]["partitionValues"]["n"] == "1"


def test_checkpoint_then_more_commits(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_deltalake(path, rows([1, 2], ["a b", "é"]), partition_by=["p"])  # v0
    write_deltalake(path, rows([3], ["x%y"]), mode="append")  # v1
    DeltaTable(path).delete("p = 'a b'")  # v2
    write_deltalake(path, rows([4], [None]), mode="append")  # v3
    DeltaTable(path).create_checkpoint()
    assert (path / LOG / f"{3:020d}.checkpoint.parquet").is_file()
    write_deltalake(path, rows([5], ["a b"]), mode="append")  # v4
    DeltaTable(path).delete("p = 'é'")  # v5
    write_deltalake(path, rows([6, 7], ["q", "x%y"]), mode="append")  # v6

    snaps = assert_every_version(path)
    # versions older than the checkpoint come from the commits, the others from it
    assert [s.segment.checkpoint_version for s in snaps] == [None, None, None, 3, 3, 3, 3]
    assert [s.num_files for s in snaps] == [2, 3, 2, 3, 4, 3, 5]

    # a second checkpoint, then a commit, with _last_checkpoint left pointing at the first
    DeltaTable(path).create_checkpoint()  # at v6
    write_deltalake(path, rows([8], ["a b"]), mode="append")  # v7
    (path / LOG / "_last_checkpoint").write_text(json.dumps({"version": 3, "size": 1}))
    latest = assert_same_as_deltars(path)
    assert latest.version == 7 and latest.segment.checkpoint_version == 6
    assert assert_same_as_deltars(path, 5).segment.checkpoint_version == 3
    assert assert_same_as_deltars(path, 2).segment.checkpoint_version is None


def test_checkpoint_of_an_empty_table_state(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    write_deltalake(path, rows([1]))  # v0
    DeltaTable(path).delete("id = 1")  # v1: no active file left
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, rows([2]), mode="append")  # v2
    snaps = assert_every_version(path)
    assert [s.num_files for s in snaps] == [1, 0, 1]
    assert snaps[1].segment.checkpoint_version == 1


def test_optimize_compact(tmp_path: Path) -> None:
    path = tmp_path / "small"
    write_deltalake(path, rows([0], ["a"]), partition_by=["p"])
    for i in range(1, 5):
        write_deltalake(path, rows([i], ["a" if i % 2 else "b c"]), mode="append")
    metrics = DeltaTable(path).optimize.compact()
    assert metrics["numFilesRemoved"] > metrics["numFilesAdded"]
    write_deltalake(path, rows([9], ["a"]), mode="append")
    snaps = assert_every_version(path)
    assert snaps[4].num_files == 5
    assert snaps[5].num_files == 2, "one file per partition after compaction"
    assert snaps[6].num_files == 3
    decoded_paths_exist(path, snaps[-1])


def test_column_mapping_partitioned(tmp_path: Path) -> None:
    path = tmp_path / "cm"
    t = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "My Col": ["a b", "x/y=z", "c:d"]})
    write_deltalake(
        path, t, partition_by=["My Col"], configuration={"delta.columnMapping.mode": "name"}, name="nm", description="d"
    )
    write_deltalake(path, t, mode="append")
    write_deltalake(path, t.slice(0, 1), mode="overwrite", predicate="\"My Col\" = 'a b'")
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, t.slice(1, 1), mode="append")
    snaps = assert_every_version(path)
    latest = snaps[-1]
    assert latest.protocol.min_reader_version == 2
    # the log keys partition values by physical name
    (key,) = latest.metadata.partition_keys()
    assert key.startswith("col-") and all(set(f["partitionValues"]) == {key} for f in latest.file_dicts())
    assert (latest.metadata.name, latest.metadata.description) == ("nm", "d")


def test_table_features_protocol(tmp_path: Path) -> None:
    path = tmp_path / "features"
    write_deltalake(path, rows([1, 2, 3]), configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable(path).delete("id = 2")
    write_deltalake(path, rows([4]), mode="append")
    snaps = assert_every_version(path)
    proto = snaps[-1].protocol
    assert (proto.min_reader_version, proto.min_writer_version) == (3, 7)
    assert "deletionVectors" in (proto.reader_features or ())


def test_change_data_feed_files_are_not_table_files(tmp_path: Path) -> None:
    path = tmp_path / "cdf"
    write_deltalake(
        path, rows([1, 2, 3], ["a", "a", "b"]), partition_by=["p"], configuration={"delta.enableChangeDataFeed": "true"}
    )
    DeltaTable(path).delete("id = 2")
    DeltaTable(path).update({"id": "id + 100"}, predicate="p = 'b'")
    snaps = assert_every_version(path)
    assert snaps[-1].protocol.min_writer_version == 4
    for s in snaps:
        assert not any(p.startswith("_change_data") for p in s.file_paths())


def test_app_transactions_and_table_properties(tmp_path: Path) -> None:
    path = tmp_path / "txn"

    def commit(app: str, version: int) -> CommitProperties:
        return CommitProperties(app_transactions=[Transaction(app, version, 1_700_000_000_000 + version)])

    write_deltalake(path, rows([1]), configuration={"delta.appendOnly": "false"}, commit_properties=commit("app-a", 1))
    write_deltalake(path, rows([2]), mode="append", commit_properties=commit("app-b", 5))
    DeltaTable(path).alter.set_table_properties({"delta.logRetentionDuration": "interval 7 days"})
    write_deltalake(path, rows([3]), mode="append", commit_properties=commit("app-a", 2))
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, rows([4]), mode="append", commit_properties=commit("app-b", 6))

    snaps = assert_every_version(path)
    assert "delta.logRetentionDuration" not in snaps[1].metadata.configuration
    assert snaps[2].metadata.configuration["delta.logRetentionDuration"] == "interval 7 days"
    for v, snap in enumerate(snaps):
        rv = DeltaTable(str(path), version=v)
        for app in ("app-a", "app-b"):
            got = snap.txns.get(app, {}).get("version")
            assert got == rv.transaction_version(app), f"version {v}: {app}"
    assert {a: t["version"] for a, t in snaps[-1].txns.items()} == {"app-a": 2, "app-b": 6}
    assert snaps[-1].txns["app-a"]["lastUpdated"] == 1_700_000_000_002


def test_metadata_cleanup_leaves_versions_from_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "cleaned"
    write_deltalake(path, rows([0]), configuration={"delta.logRetentionDuration": "interval 0 days"})
    for i in range(1, 6):
        write_deltalake(path, rows([i]), mode="append")
    DeltaTable(path).create_checkpoint()  # at v5
    old = time.time() - 3 * 86400
    for name in os.listdir(path / LOG):
        os.utime(path / LOG / name, (old, old))
    write_deltalake(path, rows([6]), mode="append")  # v6
    DeltaTable(path).cleanup_metadata()
    assert not (path / LOG / f"{0:020d}.json").exists(), "delta-rs should have cleaned up commit 0"

    for v in range(5):
        with pytest.raises(errors.VersionNotFoundError) as exc:
            load_snapshot(path, v)
        assert "available versions are 5 to 6" in str(exc.value)
        with pytest.raises(Exception):  # noqa: B017 - delta-rs cannot rebuild it either
            DeltaTable(str(path), version=v)
    assert assert_same_as_deltars(path, 5).num_files == 6
    assert assert_same_as_deltars(path).num_files == 7


def test_log_compaction_file_does_not_change_state(tmp_path: Path) -> None:
    path = tmp_path / "compacted"
    write_deltalake(path, rows([0], ["a"]), partition_by=["p"])
    write_deltalake(path, rows([1], ["b"]), mode="append")
    DeltaTable(path).delete("p = 'a'")
    write_deltalake(path, rows([2], ["a"]), mode="append")
    write_deltalake(path, rows([3], ["c"]), mode="append")
    DeltaTable(path).compact_logs(1, 3)
    assert (path / LOG / f"{1:020d}.{3:020d}.compacted.json").is_file()
    snaps = assert_every_version(path)
    assert [s.num_files for s in snaps] == [1, 2, 1, 2, 3]
