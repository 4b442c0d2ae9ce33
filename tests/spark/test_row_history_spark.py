"""The history of one row on Spark (tables.spark.jobs.row_history) against the core's row_history.

The core's answers are themselves checked against delta-rs reading whole versions
(tests/core/test_row_history.py); here the Spark job must give the same events (versions,
changes, before and after, changed columns, timestamps, users) and read and skip the same
files, on:
- tables written by delta-rs with every kind of write a row sees (appends, updates, deletes,
  a merge, an update to the same value, compaction, an overwrite), with and without change
  data feed, partitioned and not; a few keys are also compared with delta-rs directly;
- deletion vectors: the golden table dv-partitioned-with-checkpoint (DELETEs through deletion
  vectors, a checkpoint) and a log written here whose vectors grow, shrink and move a row;
- column mapping by field id and by physical name (golden tables), where Spark matches
  Parquet field ids;
- a table in an object store (S3), read through the storage boundary by both routes (the
  files spooled by the driver, or read in the executors by the data source), as the table
  on disk gives it;
and the written result: newest first, before/after as the core's JSON, the summary's counts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tables.delta.errors import InvalidColumnsError
from tables.delta.history.row_history import row_history
from tests.conftest import golden_path, use_store_environment
from tests.core.test_row_history import _golden_rows, build, dv_table, expected, got, versions_rows  # noqa: F401

deltalake = pytest.importorskip("deltalake")

from tables.spark.jobs.row_history import EVENT_COLUMNS, row_history_on_spark, write_row_history  # noqa: E402


def assert_same(spark, path: Path | str, key: dict[str, str], start: int | None = None, end: int | None = None):
    """The Spark job's answer equals the core's: events, JSON form and files read/skipped."""
    ours = row_history_on_spark(spark, str(path), key, start, end)
    core = row_history(str(path), key, start, end)
    # compared as JSON: a NaN inside a struct or map is never equal to itself as an object
    assert ours.to_dict() == core.to_dict(), (key, start, end)
    assert (ours.files_read, ours.files_skipped) == (core.files_read, core.files_skipped)
    return ours


TABLE_KINDS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.fixture(scope="module", params=TABLE_KINDS, ids=["plain", "cdf", "partitioned", "cdf-partitioned"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    cdf, partitioned = request.param
    path = build(tmp_path_factory.mktemp("rows") / "t", cdf, partitioned)
    return path, versions_rows(path)


@pytest.mark.parametrize("key", [0, 3, 4, 5, 20, 30, 99])
def test_events_equal_the_cores_on_tables_written_by_delta_rs(spark, written, key: int) -> None:
    path, tables = written
    latest = len(tables) - 1
    for start, end in [(0, latest), (5, latest)]:
        ours = assert_same(spark, path, {"id": str(key)}, start, end)
        assert got(ours) == expected(tables, {"id": key}, start, end)  # and thus delta-rs's


def test_keys_of_partition_and_data_columns_together(spark, written) -> None:
    path, _tables = written
    for key in [{"region": "eu", "id": "3"}, {"region": "us", "id": "3"}, {"name": "renamed"}, {"day": "2024-01-06"}]:
        assert_same(spark, path, key)


def test_a_key_that_is_not_unique_is_refused_as_the_core_refuses_it(spark, written) -> None:
    path, _tables = written
    with pytest.raises(InvalidColumnsError) as core:
        row_history(str(path), {"region": "us"})
    with pytest.raises(InvalidColumnsError) as ours:
        row_history_on_spark(spark, str(path), {"region": "us"})
    assert str(ours.value) == str(core.value) and "not unique" in str(ours.value)


def test_deletion_vectors_on_a_golden_table(spark) -> None:
    path = golden_path("dv-partitioned-with-checkpoint")
    latest = max(int(f.name[:20]) for f in (path / "_delta_log").glob("*.json"))
    rows = _golden_rows(path)
    assert len(rows) == 50
    deleted = 0
    for row in rows[::3]:
        for start in (0, latest - 3):  # the second start is past the checkpoint
            ours = assert_same(spark, path, {"col1": str(row["col1"])}, start, latest)
            deleted += any(e.change == "delete" for e in ours.events)
    assert deleted >= 5  # some of the keys were deleted through a deletion vector


def test_deletion_vectors_that_grow_shrink_and_move_a_row(spark, dv_table: Path) -> None:  # noqa: F811
    for key in (0, 3, 5, 7):
        for start in (0, 2, 5):
            ours = assert_same(spark, dv_table, {"id": str(key)}, start, 6)
    three = assert_same(spark, dv_table, {"id": "3"})
    assert [(e.version, e.change, e.user) for e in three.events] == [
        (0, "insert", "ann"),
        (1, "delete", "bob"),
        (3, "insert", "cy"),
        (6, "delete", "fay"),
    ]
    assert ours.files_read >= 1


@pytest.mark.parametrize("name", ["table-with-columnmapping-mode-id", "table-with-columnmapping-mode-name"])
def test_column_mapping_by_id_and_by_name(spark, name: str) -> None:
    path = golden_path(name)
    found = 0
    for i in (-1, 0, 3, 7):
        ours = assert_same(spark, path, {"ByteType": str(i)})
        if ours.events:
            found += 1
            assert ours.events[0].after["nested_struct"] == {"aa": str(i), "ac": {"aca": i}}
    assert found >= 2


@pytest.mark.parametrize("route", ["spool", "datasource"])
def test_an_object_store_table_is_read_through_the_storage_boundary(
    spark, s3_server, monkeypatch, tmp_path: Path, route: str
) -> None:
    from tables.spark.reading.objectstore_source import ROUTE_ENV
    from tests.spark.objectstore_tables import upload_s3

    use_store_environment(monkeypatch, s3_server.env())
    monkeypatch.setenv(ROUTE_ENV, route)
    local = build(tmp_path / "t", True, True)
    uri = upload_s3(s3_server.boto3(), local, "row-history", f"{tmp_path.name}-{route}")
    for key in ({"id": "3"}, {"id": "4"}, {"region": "eu", "id": "3"}, {"id": "99"}):
        ours = assert_same(spark, uri, key)
        assert got(ours) == got(row_history(str(local), key)), key  # as the table on disk


def test_the_written_result_is_the_events_newest_first(spark, written, tmp_path: Path) -> None:
    path, tables = written
    started = time.perf_counter()
    summary = write_row_history(spark, str(path), {"id": "3"}, None, None, tmp_path)
    elapsed = time.perf_counter() - started
    core = row_history(str(path), {"id": "3"})
    rows = pq.read_table(summary["path"]).to_pylist()
    assert [c["name"] for c in summary["columns"]] == list(EVENT_COLUMNS)
    want = [e.to_dict() for e in reversed(core.events)]
    assert [r["version"] for r in rows] == sorted((e["version"] for e in want), reverse=True)
    for r, e in zip(rows, want, strict=True):
        assert (r["version"], r["change"], r["changed"], r["timestamp"], r["user"]) == (
            e["version"],
            e["change"],
            e["changed"],
            e["timestamp"],
            e["user"],
        )
        assert (r["before"] and json.loads(r["before"])) == e["before"]
        assert (r["after"] and json.loads(r["after"])) == e["after"]
    assert summary["total"] == len(rows) == 3 and summary["counts"] == {"insert": 1, "update": 2, "delete": 0}
    assert summary["files"] == {"read": core.files_read, "skipped": core.files_skipped}
    assert summary["key"] == {"id": 3} and summary["from"] == 0 and summary["to"] == len(tables) - 1
    assert elapsed < 60


def test_a_key_no_file_can_hold_runs_no_spark_job(spark, written, tmp_path: Path, monkeypatch) -> None:
    import tables.spark.jobs.row_history as module

    def no_scan(*args, **kwargs):
        raise AssertionError("Spark was asked to read files no file of which can hold the key")

    monkeypatch.setattr(module, "scan", no_scan)
    path, _tables = written
    summary = write_row_history(spark, str(path), {"id": "99"}, None, None, tmp_path)
    assert summary["total"] == 0 and summary["files"]["read"] == 0 and summary["files"]["skipped"] > 0
    assert pq.read_table(summary["path"]).num_rows == 0


def test_values_of_every_kind_come_back_as_the_core_reads_them(spark, tmp_path: Path) -> None:
    """Timestamps (UTC and without a zone), structs, arrays, maps, binary, NaN: the same JSON
    from Spark's rows as from pyarrow's."""
    from datetime import UTC, datetime

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("ntz", pa.timestamp("us")),
            ("s", pa.struct([("a", pa.string()), ("b", pa.list_(pa.int32()))])),
            ("m", pa.map_(pa.string(), pa.float64())),
            ("raw", pa.binary()),
            ("f", pa.float64()),
        ]
    )
    rows = [
        {
            "id": i,
            "ts": datetime(2024, 1, 2, 3, 4, 5, 600000 * (i % 2), tzinfo=UTC),
            "ntz": datetime(2024, 5, 6, 7, 8, i),
            "s": {"a": f"x{i}", "b": [i, None, 3]},
            "m": [("k", float("nan") if i == 1 else 0.5)],
            "raw": bytes([i, 255]),
            "f": float("nan") if i == 2 else i / 3,
        }
        for i in range(3)
    ]
    path = tmp_path / "kinds"
    write_deltalake(str(path), pa.Table.from_pylist(rows, schema=schema))
    DeltaTable(str(path)).update(updates={"f": "f + 1", "raw": "X'00'"}, predicate="id = 1")
    DeltaTable(str(path)).delete("id = 2")
    for key in ("0", "1", "2"):
        ours = assert_same(spark, path, {"id": key})
        json.dumps(ours.to_dict(), allow_nan=False)
    one = row_history_on_spark(spark, str(path), {"id": "1"}).to_dict()["events"]
    assert [e["change"] for e in one] == ["insert", "update"] and one[1]["changed"] == ["raw", "f"]
