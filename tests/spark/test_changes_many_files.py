"""Change data over a range of more than SINGLE_TASK_FILES small files: read in parallel, then
sorted by one task; the rows equal delta-rs's load_cdf and come in version order."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.jobs.changes import SINGLE_TASK_FILES, change_data  # noqa: E402

from .compare import multiset  # noqa: E402


def test_many_small_files_equal_load_cdf(spark, tmp_path) -> None:
    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"id": [0], "v": ["x"]}), configuration={"delta.enableChangeDataFeed": "true"})
    commits = SINGLE_TASK_FILES + 12
    for i in range(1, commits + 1):
        if i % 20 == 0:
            DeltaTable(root).delete(f"id = {i - 3}")  # a change data file, a rewritten data file
        else:
            write_deltalake(root, pa.table({"id": [i, i + 10_000], "v": [f"v{i}", None]}), mode="append")
    end = DeltaTable(root).version()
    result = change_data(spark, root, 0, end, tmp_path / "out")
    ours = pq.read_table(result["path"])
    theirs = pa.RecordBatchReader.from_stream(DeltaTable(root).load_cdf(starting_version=0, ending_version=end))
    # the commit timestamps differ by design (file times here, commitInfo in delta-rs)
    drop = ("_commit_timestamp",)
    assert multiset(ours, drop) == multiset(theirs.read_all(), drop)
    versions = ours.column("_commit_version").to_pylist()
    assert versions == sorted(versions) and len(set(versions)) == end + 1
    assert result["total"] == ours.num_rows > 2 * SINGLE_TASK_FILES
