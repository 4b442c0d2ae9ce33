"""Spark jobs on an object-store table (a real S3-compatible server on loopback, moto): Spark
has no Hadoop connectors here, so the data files are fetched through the storage layer into
the driver's spool and read there. Rows, previews, change data and keyed row diffs equal
those of the same table on disk and delta-rs reading the bucket; the spool is bounded and a
missing file is named."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta import storage as storage_module
from tables.delta.errors import MissingFilesError, StorageError
from tables.delta.restore import plan_restore
from tests.conftest import golden_path
from tests.spark.compare import multiset

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("obstore")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.changes import change_data, read_page  # noqa: E402
from tables.spark.read import SPOOL_ENV, SPOOL_LIMIT_ENV, ObjectStoreReadTooLargeError, preview_rows, read_version  # noqa: E402
from tables.spark.restore import run_restore, spark_plan_restore  # noqa: E402
from tables.spark.rowdiff import keyed_diff  # noqa: E402
from tables.spark.rowdiff import read_page as diff_page  # noqa: E402

BUCKET = "spark-tables"


def upload(client, root: Path, prefix: str) -> str:
    for f in sorted(root.rglob("*")):
        if f.is_file():
            client.upload_file(str(f), BUCKET, f"{prefix}/{f.relative_to(root).as_posix()}")
    return f"s3://{BUCKET}/{prefix}"


@pytest.fixture
def s3(s3_server, monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith(("AWS_", "AZURE_", "GOOGLE_")):
            monkeypatch.delenv(name)
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(storage_module.ROOTS_ENV, raising=False)
    monkeypatch.setenv(SPOOL_ENV, str(tmp_path / "spool"))
    client = s3_server.boto3()
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    return s3_server


@pytest.fixture
def history_table(s3, tmp_path, request):
    """A table delta-rs wrote on disk (append, delete, update, with change data), uploaded."""
    root = tmp_path / "local"
    write_deltalake(
        root,
        pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"]}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    write_deltalake(root, pa.table({"id": pa.array([5], pa.int64()), "v": ["e"]}), mode="append")
    dt = DeltaTable(root)
    dt.delete("id = 2")
    dt.update(updates={"v": "'z'"}, predicate="id = 3")
    return root, upload(s3.boto3(), root, f"history/{request.node.name[:40]}")


def test_a_version_read_on_spark_equals_deltars_on_the_bucket(spark, s3) -> None:
    uri = upload(s3.boto3(), golden_path("data-reader-partition-values"), "golden-partitions")
    ours = read_version(spark, uri).toArrow()
    theirs = DeltaTable(uri, storage_options=s3.storage_options()).to_pyarrow_table()
    assert ours.num_rows == theirs.num_rows > 0 and multiset(ours) == multiset(theirs)
    # deletion vectors (which delta-rs does not read): the same as the table on disk
    uri = upload(s3.boto3(), golden_path("dv-partitioned-with-checkpoint"), "golden-dv")
    assert multiset(read_version(spark, uri).toArrow()) == multiset(
        read_version(spark, str(golden_path("dv-partitioned-with-checkpoint"))).toArrow()
    )
    local = preview_rows(spark, str(golden_path("dv-partitioned-with-checkpoint")), None, 3, 7)
    remote = preview_rows(spark, uri, None, 3, 7)
    assert remote == local  # the same rows in the same (file, row) order


def test_change_data_and_a_keyed_diff_equal_the_local_table(spark, history_table, tmp_path) -> None:
    local, uri = history_table
    a = change_data(spark, str(local), 1, None, tmp_path / "a")
    b = change_data(spark, uri, 1, None, tmp_path / "b")
    assert b["counts"] == a["counts"] and b["total"] == a["total"] > 0

    # commit times are the files' times: the upload's on the bucket, so compare the rest
    def rows(path: str) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "_commit_timestamp"} for r in read_page(path, 0, 100)["rows"]]

    assert rows(b["path"]) == rows(a["path"])
    da = keyed_diff(spark, str(local), 0, 3, ["id"], tmp_path / "da")
    db = keyed_diff(spark, uri, 0, 3, ["id"], tmp_path / "db")
    rows = diff_page(db["path"], 0, 100)["rows"]
    assert rows == diff_page(da["path"], 0, 100)["rows"] and len(rows) == 3  # 2 gone, 3 changed, 5 new


def test_the_spool_is_bounded_and_missing_files_are_named(spark, s3, history_table, monkeypatch) -> None:
    _local, uri = history_table
    monkeypatch.setenv(SPOOL_LIMIT_ENV, "100")
    with pytest.raises(ObjectStoreReadTooLargeError, match=SPOOL_LIMIT_ENV):
        read_version(spark, uri, 0).count()
    monkeypatch.delenv(SPOOL_LIMIT_ENV)
    dt = DeltaTable(uri, storage_options=s3.storage_options())
    gone = dt.file_uris()[0].split(f"{uri}/", 1)[1]
    s3.boto3().delete_object(Bucket=BUCKET, Key=f"{uri.split(BUCKET + '/', 1)[1]}/{gone}")
    with pytest.raises(StorageError, match=r"data file\(s\) are missing") as info:
        read_version(spark, uri).count()
    assert gone in str(info.value)


def test_a_restore_on_spark_commits_to_the_bucket_and_deltars_reads_it(spark, s3, history_table) -> None:
    _local, uri = history_table
    opts = s3.storage_options()
    ours = spark_plan_restore(spark, uri, version=0)
    assert ours.fingerprint == plan_restore(uri, version=0).fingerprint  # the pure planner agrees
    result = run_restore(spark, uri, ours.to_dict(), "txn-objectstore-1")
    assert result["stale"] is False
    dt = DeltaTable(uri, storage_options=opts)
    assert dt.version() == result["version"] == 4 and dt.history(1)[0]["operation"] == "RESTORE"
    assert multiset(dt.to_pyarrow_table()) == multiset(
        DeltaTable(uri, version=0, storage_options=opts).to_pyarrow_table()
    )

    # a file the restore would add is gone: refused, named as the core names it, nothing written
    added = set(DeltaTable(uri, version=1, storage_options=opts).file_uris()) - set(dt.file_uris())
    key = f"{uri.split(BUCKET + '/', 1)[1]}/{added.pop().rsplit('/', 1)[1]}"
    s3.boto3().delete_object(Bucket=BUCKET, Key=key)
    with pytest.raises(MissingFilesError) as info:
        spark_plan_restore(spark, uri, version=1)
    with pytest.raises(MissingFilesError) as core:
        plan_restore(uri, version=1)
    assert str(info.value) == str(core.value) and key.rsplit("/", 1)[1] in str(info.value)
    assert DeltaTable(uri, storage_options=opts).version() == 4
