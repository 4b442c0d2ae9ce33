"""Keyed row diff on Spark (tables.spark.jobs.rowdiff) on small tables written by delta-rs."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.errors import InvalidColumnsError
from tests.conftest import golden_path

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.usefixtures("diff_route")
from deltalake import write_deltalake  # noqa: E402

from tables.spark.jobs.rowdiff import keyed_diff, read_page  # noqa: E402

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("region", pa.string()),
        ("name", pa.string()),
        ("score", pa.float64()),
        ("tags", pa.map_(pa.string(), pa.int32())),
    ]
)


def rows(*items):
    return pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, r, strict=True)) for r in items],
        schema=SCHEMA,
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff") / "t"
    write_deltalake(
        str(root),
        rows(
            (1, "eu", "a", 1.0, [("x", 1)]),
            (2, "eu", "b", 2.0, None),
            (3, "us", "c", 3.0, None),
            (4, "us", "d", 4.0, [("x", 1), ("y", 2)]),
            (5, "us", "e", math.nan, None),
            (6, None, None, None, None),
        ),
    )
    write_deltalake(
        str(root),
        rows(
            (1, "eu", "a", 1.0, [("x", 1)]),  # same
            (2, "eu", "B", 2.0, None),  # name changed
            (4, "us", "d", 4.5, [("x", 1), ("y", 3)]),  # score and map changed
            (5, "us", "e", math.nan, None),  # NaN equals NaN
            (6, None, None, None, None),  # nulls equal nulls
            (7, "eu", "g", 7.0, None),  # added
        ),
        mode="overwrite",
    )
    return root


def test_added_removed_changed(spark, table, tmp_path) -> None:
    result = keyed_diff(spark, str(table), 0, 1, ["id"], tmp_path)
    assert result["counts"] == {"added": 1, "removed": 1, "changed": 2}
    assert result["total"] == 4 and result["compared"] == ["region", "name", "score", "tags"]
    got = pq.read_table(result["path"]).to_pylist()
    assert [r["id"] for r in got] == [2, 3, 4, 7]  # sorted by key
    by_id = {r["id"]: r for r in got}
    assert by_id[2]["_diff"] == "changed" and by_id[2]["_changed_columns"] == ["name"]
    assert (by_id[2]["_before"]["name"], by_id[2]["_after"]["name"]) == ("b", "B")
    assert by_id[4]["_changed_columns"] == ["score", "tags"]
    assert by_id[3]["_diff"] == "removed" and by_id[3]["_after"] is None and by_id[3]["_before"]["name"] == "c"
    assert by_id[7]["_diff"] == "added" and by_id[7]["_before"] is None and by_id[7]["_after"]["name"] == "g"

    page = read_page(result["path"], 1, 2)
    assert page["total"] == 4 and [r["id"] for r in page["rows"]] == [3, 4]
    json.dumps(page)
    four = page["rows"][1]
    assert four["_after"]["tags"] == [{"key": "x", "value": 1}, {"key": "y", "value": 3}]
    names = [c["name"] for c in result["columns"]]
    assert names == ["_diff", "id", "_changed_columns", "_before", "_after"]


def test_compound_keys_and_no_change(spark, table, tmp_path) -> None:
    same = keyed_diff(spark, str(table), 1, 1, ["id", "region"], tmp_path / "same")
    assert same["counts"] == {"added": 0, "removed": 0, "changed": 0}
    assert read_page(same["path"], 0, 10)["rows"] == []
    two = keyed_diff(spark, str(table), 0, 1, ["region", "id"], tmp_path / "two")
    assert two["counts"] == {"added": 1, "removed": 1, "changed": 2}
    got = pq.read_table(two["path"]).to_pylist()
    assert [(r["region"], r["id"]) for r in got] == [("eu", 2), ("eu", 7), ("us", 3), ("us", 4)]


def test_a_table_of_key_columns_only(spark, tmp_path) -> None:
    """Rows are only added and removed, their values in the keys: Parquet has no struct without
    fields, so before and after are null."""
    root = tmp_path / "ids"
    write_deltalake(str(root), pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    write_deltalake(str(root), pa.table({"id": pa.array([2, 3, 4], pa.int64())}), mode="overwrite")
    result = keyed_diff(spark, str(root), 0, 1, ["id"], tmp_path / "out")
    assert result["counts"] == {"added": 1, "removed": 1, "changed": 0} and result["compared"] == []
    got = [(r["id"], r["_diff"], r["_before"], r["_after"]) for r in read_page(result["path"], 0, 10)["rows"]]
    assert got == [(1, "removed", None, None), (4, "added", None, None)]


def test_bad_keys(spark, table, tmp_path) -> None:
    with pytest.raises(InvalidColumnsError, match="not unique in version 0"):
        keyed_diff(spark, str(table), 0, 1, ["region"], tmp_path / "dup")
    assert not (tmp_path / "dup" / "rowdiff").exists()
    with pytest.raises(InvalidColumnsError, match="nope"):
        keyed_diff(spark, str(table), 0, 1, ["nope"], tmp_path / "x")
    with pytest.raises(InvalidColumnsError, match="map"):
        keyed_diff(spark, str(table), 0, 1, ["tags"], tmp_path / "x")
    with pytest.raises(InvalidColumnsError):
        keyed_diff(spark, str(table), 0, 1, [], tmp_path / "x")


def test_diff_on_a_golden_deletion_vector_table(spark, tmp_path) -> None:
    result = keyed_diff(spark, str(golden_path("dv-with-columnmapping")), 0, 15, ["col1"], tmp_path)
    assert result["counts"] == {"added": 0, "removed": 15, "changed": 0}
    removed = [r["col1"] for r in pq.read_table(result["path"]).to_pylist()]
    assert removed == list(range(0, 30, 2))
