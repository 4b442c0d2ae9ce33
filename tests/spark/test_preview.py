"""The cached preview (tables.spark.jobs.preview): the first rows of a version in (file, row index)
order and its row count, read from only the files those rows come from."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.conftest import golden_path

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.jobs.preview import write_preview  # noqa: E402
from tables.spark.reading.read import FILE_COL, ROW_COL, read_version  # noqa: E402


def ordered_rows(spark, root: str, version: int) -> list[dict]:
    """Every row of the version in (file, row index) order, read in full by Spark."""
    df = read_version(spark, root, version, with_position=True)
    return [r.asDict(recursive=True) for r in df.orderBy(FILE_COL, ROW_COL).drop(FILE_COL, ROW_COL).collect()]


@pytest.mark.parametrize(
    ("name", "version", "count"),
    [
        # the golden deletion-vector tables: 50 generated rows, version v deleted v of them
        ("dv-partitioned-with-checkpoint", 15, 35),
        ("dv-with-columnmapping", 9, 41),
        ("basic-with-inserts-merge", 1, 140),
    ],
)
def test_first_rows_and_total_equal_a_full_read(spark, tmp_path, name, version, count) -> None:
    root = str(golden_path(name))
    expected = ordered_rows(spark, root, version)
    assert len(expected) == count
    for limit in (1, 7, count // 2, count, count + 10):
        out = write_preview(spark, root, version, tmp_path / f"{limit}", limit=limit)
        got = pq.read_table(out["path"]).to_pylist()
        assert got == expected[:limit], limit
        assert out["total"] == count and out["rows"] == min(limit, count)


def test_rows_span_files(spark, tmp_path) -> None:
    """Three appends of 5 rows and a delete that rewrites two of the files: the first 9 rows
    come from several files, in Spark's file order. (Deletion vectors: the golden tables.)"""
    import pyarrow as pa

    root = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(root), pa.table({"id": list(range(i * 5, i * 5 + 5))}), mode="append")
    DeltaTable(str(root)).delete("id IN (0, 1, 6)")  # delta-rs rewrites the files it touches
    version = DeltaTable(str(root)).version()
    expected = ordered_rows(spark, str(root), version)
    assert sorted(r["id"] for r in expected) == [i for i in range(15) if i not in (0, 1, 6)]
    out = write_preview(spark, str(root), version, tmp_path / "out", limit=9)
    assert pq.read_table(out["path"]).to_pylist() == expected[:9]
    assert out["total"] == 12 and out["rows"] == 9


def test_empty_version(spark, tmp_path) -> None:
    import pyarrow as pa

    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": pa.array([], pa.int64())}))
    out = write_preview(spark, str(root), 0, tmp_path / "out")
    assert out["total"] == 0 and out["rows"] == 0
