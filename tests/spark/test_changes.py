"""Change data on Spark (tables.spark.jobs.changes) against delta-rs's load_cdf and the ICT rule.

- A table written by delta-rs with delta.enableChangeDataFeed=true (create, append, delete,
  DeltaTable.update, merge): our rows equal `load_cdf(starting_version, ending_version)`'s
  as multisets, column order ignored, over the whole range and a sub-range. Type differences
  are normalized: delta-rs gives `_commit_version` as uint64 and `_commit_timestamp` as a
  naive timestamp[ms] (UTC), we give long and a UTC timestamp[us]. delta-rs takes
  `_commit_timestamp` from commitInfo.timestamp, the protocol (and we) from the commit file's
  modification time, so the test first sets each commit file's time to its commitInfo
  timestamp; a second test moves the file times and checks that only we follow them.
- dv-partitioned-with-checkpoint (no cdc files, DELETEs with deletion vectors, some removing
  a file whose last rows go): each version's changes are exactly the rows it deletes.
- An ICT table enabled in the middle (delta-rs appends, enable_ict, then commits of Parquet
  files written here with pyarrow): `_commit_timestamp` is the file time before the
  enablement version and the inCommitTimestamp from it on, even with file times moved.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.errors import VersionNotFoundError
from tables.delta.history.changes import plan_changes
from tables.delta.history.timestamps import commit_times
from tables.delta.write.commit import commit, enable_ict
from tests.conftest import golden_path
from tests.spark.compare import multiset

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.jobs.changes import change_data, read_page  # noqa: E402

LOG = "_delta_log"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def commit_file(root: Path, v: int) -> Path:
    return root / LOG / f"{v:020d}.json"


def set_mtime(root: Path, v: int, ms: int) -> None:
    os.utime(commit_file(root, v), ns=(ms * 1_000_000, ms * 1_000_000))


def info_timestamp(root: Path, v: int) -> int:
    for line in commit_file(root, v).read_text().splitlines():
        if line.strip() and "commitInfo" in json.loads(line):
            return json.loads(line)["commitInfo"]["timestamp"]
    raise AssertionError(f"no commitInfo in version {v}")


@pytest.fixture(scope="module")
def cdf_table(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cdf") / "cdf"
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("part", pa.string())])
    first = pa.table({"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"], "part": ["x", "x", "y", "y"]}, schema=schema)
    write_deltalake(str(root), first, partition_by=["part"], configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(
        str(root), pa.table({"id": [5, 6], "name": ["e", "f"], "part": ["x", "z"]}, schema=schema), mode="append"
    )
    DeltaTable(str(root)).delete("id = 2")
    DeltaTable(str(root)).update(updates={"name": "'C'"}, predicate="id = 3")
    source = pa.table({"id": [4, 7], "name": ["D", "g"], "part": ["y", "x"]}, schema=schema)
    (
        DeltaTable(str(root))
        .merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert DeltaTable(str(root)).version() == 4
    for v in range(5):  # file time = commitInfo.timestamp, the time delta-rs reports
        set_mtime(root, v, info_timestamp(root, v))
    return root


def delta_rs_cdf(root: Path, start: int, end: int) -> pa.Table:
    reader = DeltaTable(str(root)).load_cdf(starting_version=start, ending_version=end)
    t = pa.RecordBatchReader.from_stream(reader).read_all()
    ts = pa.array(
        [None if x is None else x.replace(tzinfo=UTC) for x in t.column("_commit_timestamp").to_pylist()],
        pa.timestamp("us", tz="UTC"),
    )
    t = t.set_column(t.schema.get_field_index("_commit_timestamp"), "_commit_timestamp", ts)
    return t.set_column(
        t.schema.get_field_index("_commit_version"), "_commit_version", t.column("_commit_version").cast(pa.int64())
    )


@pytest.mark.parametrize(("start", "end"), [(0, 4), (2, 4)])
def test_change_data_equals_delta_rs_load_cdf(spark, cdf_table, tmp_path, start, end) -> None:
    result = change_data(spark, str(cdf_table), start, end, tmp_path)
    ours = pq.read_table(result["path"])
    theirs = delta_rs_cdf(cdf_table, start, end)
    assert ours.num_rows == theirs.num_rows == result["total"]
    assert multiset(ours) == multiset(theirs)
    assert [c["name"] for c in result["columns"]] == [
        "id",
        "name",
        "part",
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
    ]
    by_version = {(c["version"], c["changeType"]): c["rows"] for c in result["counts"]}
    if start == 0:
        assert by_version[(0, "insert")] == 4 and by_version[(1, "insert")] == 2
    assert by_version[(2, "delete")] == 1
    assert by_version[(3, "update_preimage")] == by_version[(3, "update_postimage")] == 1
    assert by_version[(4, "insert")] == 1 and by_version[(4, "update_postimage")] == 1
    assert [v["source"] for v in result["versions"]][-3:] == ["cdc", "cdc", "cdc"]


def test_commit_timestamp_is_the_file_time_not_commit_info(spark, cdf_table, tmp_path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(cdf_table, moved)
    base = 1_500_000_000_000
    for v in range(5):
        set_mtime(moved, v, base + v * 1000)
    result = change_data(spark, str(moved), 0, 4, tmp_path / "out")
    ours = pq.read_table(result["path"]).to_pylist()
    stamps = {r["_commit_version"]: r["_commit_timestamp"] for r in ours}
    assert stamps == {v: EPOCH + timedelta(milliseconds=base + v * 1000) for v in range(5)}
    theirs = delta_rs_cdf(moved, 0, 4).to_pylist()
    assert {r["_commit_version"]: r["_commit_timestamp"] for r in theirs} != stamps  # delta-rs: commitInfo
    without = ("_commit_timestamp",)
    assert multiset(pq.read_table(result["path"]), without) == multiset(delta_rs_cdf(moved, 0, 4), without)


def test_pages_of_the_result(spark, cdf_table, tmp_path) -> None:
    result = change_data(spark, str(cdf_table), 0, 4, tmp_path)
    whole = read_page(result["path"], 0, 100)
    assert whole["total"] == 12 and len(whole["rows"]) == 12
    versions = [r["_commit_version"] for r in whole["rows"]]
    assert versions == sorted(versions)
    pages = [read_page(result["path"], off, 5)["rows"] for off in (0, 5, 10)]
    assert [r for p in pages for r in p] == whole["rows"]
    assert read_page(result["path"], 12, 5)["rows"] == []
    json.dumps(whole)
    assert whole["rows"][0]["_commit_timestamp"].endswith("Z")


def test_deletion_vector_deletes_without_cdc_files(spark, tmp_path) -> None:
    path = golden_path("dv-partitioned-with-checkpoint")
    plan = plan_changes(path, 1, 15)
    assert all(not e.cdc and e.change_type == "delete" for e in plan.entries)
    # a DV replaced by a larger one deletes the difference; a last row deleted removes the file
    assert {e.version for e in plan.entries if e.only} == {1, 2, 3, 4, 5, 6, 7, 8, 14, 15}
    result = change_data(spark, str(path), 0, 15, tmp_path)
    rows = pq.read_table(result["path"]).to_pylist()
    inserts = [r for r in rows if r["_commit_version"] == 0]
    assert len(inserts) == 50 and {r["_change_type"] for r in inserts} == {"insert"}
    deletes = sorted((r["_commit_version"], r["col1"], r["part"], r["col2"]) for r in rows if r["_commit_version"] > 0)
    assert deletes == [(v, 2 * (v - 1), (2 * (v - 1)) % 10, f"foo{(2 * (v - 1)) % 5}") for v in range(1, 16)]
    assert all(r["_change_type"] == "delete" for r in rows if r["_commit_version"] > 0)


@pytest.fixture
def ict_table(tmp_path) -> Path:
    """delta-rs writes versions 0 and 1, ICT is enabled at 2, versions 3 and 4 are commits of
    this project adding Parquet files written with pyarrow."""
    root = tmp_path / "ict"
    schema = pa.schema([("id", pa.int64())])
    write_deltalake(str(root), pa.table({"id": [0]}, schema=schema))
    write_deltalake(str(root), pa.table({"id": [1]}, schema=schema), mode="append")
    set_mtime(root, 0, 1_600_000_000_000)
    set_mtime(root, 1, 1_600_000_001_000)
    assert enable_ict(root)["version"] == 2
    for v in (3, 4):
        name = f"part-ict-{v}.parquet"
        pq.write_table(pa.table({"id": [v * 10, v * 10 + 1]}, schema=schema), root / name)
        add = {
            "path": name,
            "partitionValues": {},
            "size": (root / name).stat().st_size,
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps({"numRecords": 2}),
        }
        commit(root, [{"add": add}], "WRITE", is_blind_append=True)
    for v in (2, 3, 4):  # move the file times far away: ICT must win from version 2 on
        set_mtime(root, v, 1_000_000_000_000 + v)
    return root


def test_commit_timestamps_follow_ict_after_the_boundary(spark, ict_table, tmp_path) -> None:
    times = commit_times(ict_table)
    assert times.ict.enablement_version == 2
    result = change_data(spark, str(ict_table), 0, 4, tmp_path)
    rows = pq.read_table(result["path"]).to_pylist()
    stamps = {r["_commit_version"]: r["_commit_timestamp"] for r in rows}
    assert set(stamps) == {0, 1, 3, 4}  # version 2 only sets properties
    assert stamps[0] == EPOCH + timedelta(milliseconds=1_600_000_000_000)
    assert stamps[1] == EPOCH + timedelta(milliseconds=1_600_000_001_000)
    for v in (3, 4):
        ict = times.reader.get(v).in_commit_timestamp
        assert ict is not None and stamps[v] == EPOCH + timedelta(milliseconds=ict)
        assert ict != 1_000_000_000_000 + v
    sources = {v["version"]: v["timestampSource"] for v in result["versions"]}
    assert sources == {0: "file", 1: "file", 2: "ict", 3: "ict", 4: "ict"}
    assert sorted(r["id"] for r in rows) == [0, 1, 30, 31, 40, 41]


def test_range_errors(spark, cdf_table, tmp_path) -> None:
    with pytest.raises(VersionNotFoundError):
        change_data(spark, str(cdf_table), 3, 9, tmp_path)
    with pytest.raises(VersionNotFoundError):
        change_data(spark, str(cdf_table), 3, 2, tmp_path)
