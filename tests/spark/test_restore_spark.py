"""RESTORE on Spark: the same plan as the pure planner, then run_restore's commit or stale.

Every planning test compares spark_plan_restore with tables.delta.restore.plan.plan_restore on the
same table and clock: same fingerprint, same file identities, same metrics, and the whole
plan (actions in the same order) equal. Tables: Delta Lake's golden restore table (cut back to
version 2, as tests/core/test_restore.py does), a golden deletion-vector table, tables written
by delta-rs in the test, and small hand-written logs for absolute and file-URI paths.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tables.delta.errors import MissingFilesError
from tables.delta.restore.commit import commit_restore
from tables.delta.restore.plan import plan_restore
from tables.delta.snapshot.dv import deletion_vector_file
from tables.delta.snapshot.replay import action_identity, identity_keys
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.commit import commit
from tables.spark.jobs.restore import run_restore, spark_plan_restore
from tests.core import builders
from tests.core.builders import writable

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

LOG = "_delta_log"
NOW = 1_700_000_000_000
STAGES = ["loading snapshots", "comparing file lists", "checking files exist", "computing metrics"]


def clock() -> int:
    return NOW


# --- helpers ---------------------------------------------------------------------------------


def log_versions(table: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (table / LOG).glob("*.json") if p.name[:20].isdigit())


def commit_lines(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / LOG / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def identities(table: Path, version: int | None = None) -> set[str]:
    snap = load_snapshot(table, version)
    return set(identity_keys(snap.files).to_pylist()) if snap.num_files else set()


def ids(actions: list[dict[str, Any]]) -> set[str]:
    return {action_identity(a) for a in actions}


def same_plan(spark, table: Path, **kwargs: Any):
    """(Spark plan, pure plan), checked equal; also the stages Spark reported."""
    stages: list[tuple[str, int, int | None]] = []
    ours = spark_plan_restore(spark, table, clock=clock, progress=lambda *s: stages.append(s), **kwargs)
    pure = plan_restore(table, clock=clock, **kwargs)
    assert ours.fingerprint == pure.fingerprint
    assert ids(ours.adds) == ids(pure.adds) and ids(ours.removes) == ids(pure.removes)
    assert ours.metrics == pure.metrics
    assert ours.to_dict() == pure.to_dict()
    return ours, pure, stages


def rows(ids_: range | list[int], part: str = "a") -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids_), pa.int64()),
            "part": pa.array([part] * len(ids_), pa.string()),
        }
    )


def rs_table(tmp_path: Path, name: str = "rs") -> Path:
    """delta-rs, partitioned by `part`: 0 create, 1 append, 2 overwrite, 3 append, 4 delete."""
    t = tmp_path / name
    write_deltalake(str(t), rows(range(0, 6), "a"), partition_by=["part"])
    write_deltalake(str(t), rows(range(6, 12), "b"), mode="append")
    write_deltalake(str(t), rows(range(100, 104), "c"), mode="overwrite")
    write_deltalake(str(t), rows(range(104, 108), "a"), mode="append")
    DeltaTable(str(t)).delete("id < 102")
    assert DeltaTable(str(t)).version() == 4
    return t


def rs_paths(table: Path, version: int | None = None) -> set[str]:
    dt = DeltaTable(str(table)) if version is None else DeltaTable(str(table), version=version)
    return set(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())


def rs_rows(table: Path, version: int | None = None) -> int:
    dt = DeltaTable(str(table)) if version is None else DeltaTable(str(table), version=version)
    return dt.to_pyarrow_table().num_rows


# --- the same plan as the pure planner -------------------------------------------------------


def test_golden_restore_same_plan_and_delta_lakes_metrics(spark, golden_copy) -> None:
    t = writable(golden_copy("basic-with-inserts-overwrite-restore"))
    theirs = commit_lines(t, 3)[0]["commitInfo"]  # Delta Lake's RESTORE TO VERSION 1
    for f in (t / LOG).iterdir():
        if (f.name[:20].isdigit() and int(f.name[:20]) > 2) or f.name == "_last_checkpoint":
            f.unlink()
    ours, _pure, stages = same_plan(spark, t, version=1)
    assert ours.metrics == theirs["operationMetrics"]
    assert ours.read_version == 2 and ours.target_version == 1
    names = [s[0] for s in stages]
    assert list(dict.fromkeys(names)) == STAGES  # each stage reported, in this order
    checks = [s for s in stages if s[0] == "checking files exist"]
    n = len(ours.adds)
    assert checks[0][1:] == (0, n) and checks[-1][1:] == (n, n)


def _dv_changed(table: Path) -> tuple[int, str, str]:
    """(version, identity there, identity at latest) of a path whose deletion vector changed
    since (on this golden table: the path had none then, and has one now)."""
    latest = {k.split("\x00")[0]: k for k in identities(table)}
    for v in range(load_snapshot(table).version - 1, -1, -1):
        for k in sorted(identities(table, v)):
            path = k.split("\x00")[0]
            if path in latest and latest[path] != k:
                return v, k, latest[path]
    raise AssertionError("the golden table has no version with another deletion vector")


def test_deletion_vectors_path_readded_with_its_old_vector(spark, golden_copy) -> None:
    t = writable(golden_copy("dv-partitioned-with-checkpoint"))
    head = load_snapshot(t).version
    v, old, new = _dv_changed(t)
    assert old.split("\x00")[0] == new.split("\x00")[0]  # the same path, another vector
    ours, _pure, _ = same_plan(spark, t, version=v)
    assert old in ids(ours.adds) and new in ids(ours.removes)
    assert commit_restore(t, ours)["verified"]  # head + 1: the path with its vector of version v

    # back to the old head: the path is re-added with the vector it had there
    back, _pure, _ = same_plan(spark, t, version=head)
    assert new in ids(back.adds) and old in ids(back.removes)
    victim = next(a for a in back.adds if action_identity(a) == new)
    assert victim["deletionVector"] and json.loads(victim["stats"])["numRecords"] > 0

    # the vector's file must exist too: missing, it is listed, as by the pure planner
    dv_file = deletion_vector_file(victim["deletionVector"])
    (t / dv_file).unlink()
    with pytest.raises(MissingFilesError) as ours_exc:
        spark_plan_restore(spark, t, version=head)
    with pytest.raises(MissingFilesError) as pure_exc:
        plan_restore(t, version=head)
    assert dv_file in ours_exc.value.files
    assert ours_exc.value.files == pure_exc.value.files and str(ours_exc.value) == str(pure_exc.value)
    skipped, _pure, _ = same_plan(spark, t, version=head, ignore_missing_files=True)
    assert new not in ids(skipped.adds) and dv_file in skipped.missing_files


def test_deltars_partitioned_table_same_plan(spark, tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    for version in (1, 3):
        ours, _pure, _ = same_plan(spark, t, version=version)
        assert {a["path"] for a in ours.adds} <= rs_paths(t, version)
        assert all(a["partitionValues"].get("part") for a in ours.adds)
    unchecked, _pure, stages = same_plan(spark, t, version=1, check_files=False)
    assert not unchecked.files_checked and "checking files exist" not in [s[0] for s in stages]


def test_absolute_and_file_uri_paths_resolve_as_in_the_core(spark, tmp_path: Path) -> None:
    """Paths the log holds as absolute, file URIs and URL-encoded, checked on Spark's workers
    (the data lies beside the table, so both are under the allowed root)."""
    from tables.delta.storage import api as storage

    storage.set_roots_provider(lambda: [str(tmp_path)])  # reset by the confinement fixture
    t = tmp_path / "abs"
    data = tmp_path / "data dir"
    data.mkdir()
    (data / "a#1.parquet").write_bytes(b"x")
    (data / "b 2.parquet").write_bytes(b"x")
    encoded = str(data).replace(" ", "%20")
    a_path = f"{encoded}/a%231.parquet"  # absolute, encoded
    b_path = f"file://{encoded}/b%202.parquet"  # a file URI
    gone = f"{encoded}/gone%231.parquet"  # never written
    adds = [builders.add(p) for p in (a_path, b_path, gone)]
    builders.write_commit(t, 0, 1000, actions=[builders.protocol(False), builders.metadata(), *adds])
    removes = [{"remove": {"path": p, "deletionTimestamp": 1, "dataChange": True}} for p in (a_path, b_path, gone)]
    builders.write_commit(t, 1, 2000, actions=[*removes, builders.add("c.parquet")])
    with pytest.raises(MissingFilesError) as ours_exc:
        spark_plan_restore(spark, t, version=0)
    with pytest.raises(MissingFilesError) as pure_exc:
        plan_restore(t, version=0)
    assert ours_exc.value.files == pure_exc.value.files == [f"{data}/gone#1.parquet"]
    assert str(ours_exc.value) == str(pure_exc.value)
    ours, _pure, _ = same_plan(spark, t, version=0, ignore_missing_files=True)
    assert {a["path"] for a in ours.adds} == {a_path, b_path}


@pytest.mark.parametrize("empty", ["target", "latest", "diff"])
def test_empty_file_lists(spark, tmp_path: Path, empty: str) -> None:
    t = tmp_path / "t"
    first = [builders.protocol(False), builders.metadata()]
    if empty == "target":  # restoring to before the first file: everything is removed
        builders.write_commit(t, 0, 1000, actions=first)
        builders.write_commit(t, 1, 2000, actions=[builders.add("a.parquet")])
    elif empty == "latest":  # every file was removed since: everything comes back
        builders.write_commit(t, 0, 1000, actions=[*first, builders.add("a.parquet")])
        builders.write_commit(t, 1, 2000, actions=[{"remove": {"path": "a.parquet", "dataChange": True}}])
        (t / "a.parquet").write_bytes(b"x")
    else:  # only the metadata changed since: no file to add or remove
        builders.write_commit(t, 0, 1000, actions=[*first, builders.add("a.parquet")])
        builders.write_commit(t, 1, 2000, actions=[builders.metadata({"delta.appendOnly": "true"})])
    ours, _pure, stages = same_plan(spark, t, version=0)
    counts = {"target": (0, 1), "latest": (1, 0), "diff": (0, 0)}[empty]
    assert (len(ours.adds), len(ours.removes)) == counts
    assert ("checking files exist" in [s[0] for s in stages]) == bool(counts[0])


# --- missing files -------------------------------------------------------------------------------


def test_missing_files_fail_or_are_left_out(spark, tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    plan = plan_restore(t, version=1)
    victims = sorted(a["path"] for a in plan.adds)[:2]
    for v in victims:
        (t / v).unlink()
    with pytest.raises(MissingFilesError) as exc:
        spark_plan_restore(spark, t, version=1)
    assert exc.value.code == "restore_missing_files"
    assert sorted(exc.value.files) == victims and exc.value.details["count"] == 2
    with pytest.raises(MissingFilesError) as pure_exc:
        plan_restore(t, version=1)
    assert str(exc.value) == str(pure_exc.value)

    ours, _pure, _ = same_plan(spark, t, version=1, ignore_missing_files=True)
    assert sorted(ours.missing_files) == victims
    assert not {a["path"] for a in ours.adds} & set(victims)
    assert ours.metrics["numRestoredFiles"] == str(len(plan.adds) - 2)
    assert ours.metrics["numOfFilesAfterRestore"] == str(len(rs_paths(t, 1)) - 2)


def test_missing_files_listed_up_to_100(spark, tmp_path: Path) -> None:
    t = tmp_path / "many"
    names = [f"part-{i:03d}.parquet" for i in range(120)]  # never written
    builders.write_commit(
        t, 0, 1000, actions=[builders.protocol(False), builders.metadata(), *map(builders.add, names)]
    )
    removes = [{"remove": {"path": n, "deletionTimestamp": 1, "dataChange": True}} for n in names]
    builders.write_commit(t, 1, 2000, actions=[*removes, builders.add("new.parquet")])
    with pytest.raises(MissingFilesError) as exc:
        spark_plan_restore(spark, t, version=0)
    assert exc.value.files == names[:100] and exc.value.details["count"] == 120
    assert "showing 100 of 120" in str(exc.value)


# --- run_restore -------------------------------------------------------------------------------


def test_run_restore_commits_once_and_deltars_reads_it(spark, tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    approved = plan_restore(t, version=1).to_dict()
    stages: list[str] = []
    result = run_restore(spark, t, approved, "restore-request-7", lambda s, d, n: stages.append(s))
    assert result["stale"] is False and result["version"] == 5 and result["verified"]
    assert result["txnId"] == "restore-request-7" and not result["alreadyCommitted"]
    assert result["fingerprint"] == approved["fingerprint"]
    assert result["metrics"] == approved["metrics"]
    assert list(dict.fromkeys(stages)) == [*STAGES, "committing"]
    assert commit_lines(t, 5)[0]["commitInfo"]["txnId"] == "restore-request-7"

    dt = DeltaTable(str(t))
    assert dt.version() == 5 and dt.history(1)[0]["operation"] == "RESTORE"
    assert rs_paths(t) == rs_paths(t, 1)
    assert rs_rows(t) == rs_rows(t, 1) == 12

    again = run_restore(spark, t, approved, "restore-request-7")  # a retried job
    assert again["alreadyCommitted"] and again["version"] == 5 and again["verified"]
    assert log_versions(t) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("competing", ["delete", "overwrite"])
def test_changed_table_gives_stale_without_committing(spark, tmp_path: Path, competing: str) -> None:
    t = rs_table(tmp_path)
    approved = plan_restore(t, version=1).to_dict()
    dt = DeltaTable(str(t))
    if competing == "delete":
        dt.delete("id = 106")  # version 5 rewrites a file the approved plan removes
    else:
        write_deltalake(str(t), rows([1], "a"), mode="overwrite")  # version 5 removes every file
    result = run_restore(spark, t, approved, "restore-request-8")
    assert result["stale"] is True, result
    assert result["fingerprint"] != approved["fingerprint"] == result["approvedFingerprint"]
    assert result["plan"]["readVersion"] == 5 and result["plan"]["targetVersion"] == 1
    assert log_versions(t) == [0, 1, 2, 3, 4, 5]


def test_head_moved_with_the_same_change_commits_on_top(spark, tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    approved = plan_restore(t, version=1).to_dict()
    commit(t, [{"txn": {"appId": "stream", "version": 1}}], "STREAMING UPDATE")  # version 5: no file change
    write_deltalake(str(t), rows([500], "d"), mode="append")  # version 6: a file the plan does not touch
    appended = rs_paths(t) - rs_paths(t, 5)
    result = run_restore(spark, t, approved, "restore-request-9")
    assert result["stale"] is False and result["version"] == 7 and result["verified"]
    assert result["readVersion"] == 6 and result["fingerprint"] == approved["fingerprint"]
    assert rs_paths(t) == rs_paths(t, 1) | appended  # the approved change; the append is kept
    assert result["metrics"]["numOfFilesAfterRestore"] == str(len(rs_paths(t, 1)) + 1)


# --- the session -------------------------------------------------------------------------------


def test_session_is_cached_and_configured(spark) -> None:
    from tables.spark.engine.conf import session_conf
    from tables.spark.session import get_spark

    assert get_spark() is spark
    # Python workers run this interpreter, on every master
    assert spark.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect() == [sys.executable]
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.sql.shuffle.partitions") == "4"
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    local = session_conf("local[*]")
    assert local["spark.driver.bindAddress"] == "127.0.0.1" and local["spark.driver.host"] == "127.0.0.1"
    cluster = session_conf("spark://spark-master:7077")
    assert cluster["spark.master"] == "spark://spark-master:7077"
    assert not {"spark.driver.bindAddress", "spark.driver.host"} & set(cluster)
    assert cluster["spark.pyspark.python"] == local["spark.pyspark.python"] == sys.executable
    loopback = session_conf("spark://127.0.0.1:7077")
    assert loopback["spark.driver.host"] == loopback["spark.driver.bindAddress"] == "127.0.0.1"
    assert not any("jars" in k or "packages" in k for k in {**local, **cluster})
