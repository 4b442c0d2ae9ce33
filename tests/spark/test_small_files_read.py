"""Many small local files are read by pyarrow in the executors (tables/spark/reading/local_source.py):
the rows, their order and positions equal Spark's own Parquet reader's, for change data
(data and change data files, deletes as row selections) and for a table version with column
mapping (physical names) and a column some files lack."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

import tables.spark.reading.read as read  # noqa: E402
from tables.spark.jobs.changes import change_data  # noqa: E402
from tables.spark.reading.read import FILE_COL, ROW_COL, read_version  # noqa: E402

from .compare import multiset  # noqa: E402


def _both_routes(monkeypatch, run):
    """`run()` with the pyarrow route forced (every read counts as many small files), then
    with Spark's reader only."""
    monkeypatch.setattr(read, "SMALL_FILES", 1)
    small = run("small")
    monkeypatch.setattr(read, "SMALL_FILES", 10**9)
    return small, run("spark")


def test_change_data_same_rows_in_same_order(spark, tmp_path, monkeypatch) -> None:
    root = str(tmp_path / "t")
    write_deltalake(
        root, pa.table({"id": [0, 1], "v": ["a", None]}), configuration={"delta.enableChangeDataFeed": "true"}
    )
    for i in range(2, 12):
        if i % 4 == 0:
            DeltaTable(root).delete(f"id = {i - 2}")
        elif i % 4 == 1:
            DeltaTable(root).update(updates={"v": "'u'"}, predicate=f"id = {i - 3}")
        else:
            write_deltalake(root, pa.table({"id": [i, i + 100], "v": [f"v{i}", None]}), mode="append")
    end = DeltaTable(root).version()

    def run(tag: str) -> pa.Table:
        result = change_data(spark, root, 0, end, tmp_path / tag)
        return pq.read_table(result["path"])

    small, big = _both_routes(monkeypatch, run)
    assert small.num_rows == big.num_rows > 0
    assert small.equals(big)
    theirs = pa.RecordBatchReader.from_stream(DeltaTable(root).load_cdf(starting_version=0, ending_version=end))
    drop = ("_commit_timestamp",)  # file times here, commitInfo in delta-rs (by design)
    assert multiset(small, drop) == multiset(theirs.read_all(), drop)


def test_version_with_column_mapping_and_missing_column(spark, tmp_path, monkeypatch) -> None:
    mapped, merged = str(tmp_path / "cm"), str(tmp_path / "merged")
    config = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}
    write_deltalake(mapped, pa.table({"id": [1, 2], "name": ["a", "b"]}), configuration=config)
    write_deltalake(merged, pa.table({"id": [1, 2], "name": ["a", "b"]}))
    for i in range(3, 6):
        write_deltalake(mapped, pa.table({"id": [i], "name": [f"n{i}"]}), mode="append")
        batch = pa.table({"id": [i], "name": [f"n{i}"], "extra": [i * 1.5]})
        write_deltalake(merged, batch, mode="append", schema_mode="merge")

    def run(_tag: str) -> list[list[dict]]:
        frames = [read_version(spark, t, None, with_position=True).orderBy(FILE_COL, ROW_COL) for t in (mapped, merged)]
        return [[r.asDict() for r in df.collect()] for df in frames]

    small, big = _both_routes(monkeypatch, run)
    assert small == big
    assert sorted(r["name"] for r in small[0]) == ["a", "b", "n3", "n4", "n5"]
    assert [r["extra"] for r in small[1] if r["id"] in (1, 2)] == [None, None]


def test_a_missing_file_is_named_before_any_task_runs(spark, tmp_path, monkeypatch) -> None:
    from tables.delta.errors import StorageError

    root = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(root), pa.table({"id": [i]}), mode="append")
    gone = sorted(root.glob("*.parquet"))[1]
    gone.unlink()
    monkeypatch.setattr(read, "SMALL_FILES", 1)
    with pytest.raises(StorageError, match=r"1 data file\(s\) are missing: .*" + gone.name):
        read_version(spark, str(root), None)
