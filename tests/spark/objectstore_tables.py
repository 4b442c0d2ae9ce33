"""Tables the object-store Spark tests read: one delta-rs writes on disk (create, append,
delete, update, with change data), uploaded to the S3 server (boto3) or Azurite (the Azure
SDK), and the standard environment variables of one server alone."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa


def write_history_table(root: Path, partitioned: bool = False) -> Path:
    """Versions 0..3: four rows, one appended, id 2 deleted, id 3 updated (change data on)."""
    from deltalake import DeltaTable, write_deltalake

    first = {"id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"]}
    more = {"id": pa.array([5], pa.int64()), "v": ["e"]}
    if partitioned:
        first["p"], more["p"] = ["x", "y", "x", "y"], ["x"]
    write_deltalake(
        root,
        pa.table(first),
        partition_by=["p"] if partitioned else None,
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    write_deltalake(root, pa.table(more), mode="append")
    dt = DeltaTable(root)
    dt.delete("id = 2")
    dt.update(updates={"v": "'z'"}, predicate="id = 3")
    return root


def upload_s3(client, root: Path, bucket: str, prefix: str) -> str:
    if bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=bucket)
    for f in sorted(root.rglob("*")):
        if f.is_file():
            client.upload_file(str(f), bucket, f"{prefix}/{f.relative_to(root).as_posix()}")
    return f"s3://{bucket}/{prefix}"


def upload_azure(server, root: Path, container: str, prefix: str) -> str:
    cont = server.blob_service().get_container_client(container)
    if not cont.exists():
        cont.create_container()
    for f in sorted(root.rglob("*")):
        if f.is_file():
            with open(f, "rb") as fh:
                cont.upload_blob(f"{prefix}/{f.relative_to(root).as_posix()}", fh, overwrite=True)
    return f"abfss://{container}@{server.account}.dfs.core.windows.net/{prefix}"


def assert_data_jobs_equal(spark, local: Path, uri: str, storage_options: dict[str, str], tmp_path: Path) -> None:
    """Rows, a preview, change data and a keyed diff of `uri` equal those of the same table
    on disk (Spark's own reader there) and delta-rs reading the store."""
    from deltalake import DeltaTable

    from tables.spark.jobs.changes import change_data, read_page
    from tables.spark.jobs.rowdiff import keyed_diff
    from tables.spark.jobs.rowdiff import read_page as diff_page
    from tables.spark.reading.read import preview_rows, read_version
    from tests.spark.compare import multiset

    theirs = DeltaTable(uri, storage_options=storage_options).to_pyarrow_table()
    ours = read_version(spark, uri).toArrow()
    assert multiset(ours) == multiset(theirs) and ours.num_rows == 4
    assert preview_rows(spark, uri, 1, 1, 3)["rows"] == preview_rows(spark, str(local), 1, 1, 3)["rows"]
    a = change_data(spark, str(local), 1, None, tmp_path / "a")
    b = change_data(spark, uri, 1, None, tmp_path / "b")
    assert b["counts"] == a["counts"] and b["total"] == a["total"] > 0

    def rows(path: str) -> list[dict]:  # commit times are the objects' (upload) times
        return [{k: v for k, v in r.items() if k != "_commit_timestamp"} for r in read_page(path, 0, 100)["rows"]]

    assert rows(b["path"]) == rows(a["path"])
    da = keyed_diff(spark, str(local), 0, 3, ["id"], tmp_path / "da")
    db = keyed_diff(spark, uri, 0, 3, ["id"], tmp_path / "db")
    diffs = diff_page(db["path"], 0, 100)["rows"]
    assert diffs == diff_page(da["path"], 0, 100)["rows"] and len(diffs) == 3  # ids 1, 3 and 5
    assert db["counts"] == da["counts"]
