"""Which keyed diffs take the driver's route (tables.spark.jobs.rowdiff.small_inputs): local files of
at most DRIVER_BYTES together and at most DRIVER_ROWS rows by their footers; anything it cannot
measure takes the two passes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from tables.spark.jobs import rowdiff


def _files(tmp_path, rows_each: list[int]) -> list[str]:
    uris = []
    for i, n in enumerate(rows_each):
        path = tmp_path / f"part {i}%.parquet"  # a name a URI escapes
        pq.write_table(pa.table({"id": pa.array(range(n), pa.int64())}), path)
        uris.append(path.as_uri())
    return uris


def test_small_files_take_the_drivers_route(tmp_path) -> None:
    assert rowdiff.small_inputs(_files(tmp_path, [1000, 2000]))
    assert rowdiff.small_inputs([])  # versions without files


def test_too_many_rows_or_bytes_take_the_two_passes(tmp_path, monkeypatch) -> None:
    files = _files(tmp_path, [1000, 2000])
    monkeypatch.setattr(rowdiff, "DRIVER_ROWS", 2999)
    assert not rowdiff.small_inputs(files)
    monkeypatch.setattr(rowdiff, "DRIVER_ROWS", 3000)
    assert rowdiff.small_inputs(files)
    monkeypatch.setattr(
        rowdiff, "DRIVER_BYTES", sum((tmp_path / f"part {i}%.parquet").stat().st_size for i in (0, 1)) - 1
    )
    assert not rowdiff.small_inputs(files)


def test_what_cannot_be_measured_takes_the_two_passes(tmp_path) -> None:
    files = _files(tmp_path, [10])
    assert not rowdiff.small_inputs([*files, "s3://bucket/t/part-0.parquet"])  # read in the executors
    assert not rowdiff.small_inputs([*files, (tmp_path / "gone.parquet").as_uri()])
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    assert not rowdiff.small_inputs([*files, (tmp_path / "bad.parquet").as_uri()])
