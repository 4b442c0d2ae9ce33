"""Reading versions on Spark (tables.spark.reading.read) against delta-rs and known golden data.

What is compared, table by table:
- data-reader-partition-values, data-reader-primitives, data-reader-timestamp_ntz,
  basic-with-inserts-updates, basic-with-inserts-merge: every version equals delta-rs 1.6.6's
  `DeltaTable(p, version=v).to_pyarrow_table()` as a multiset of rows (column order ignored).
- table-with-columnmapping-mode-name / -id: delta-rs "reads" them (reader version 2) but
  ignores column mapping and returns nulls, so the rows are compared with the values the
  Delta Lake golden-table generator wrote (row i of 0..4 plus an all-null row).
- data-reader-timestamp_ntz-name-mode / -id-mode: delta-rs refuses columnMapping; they hold
  the same data as data-reader-timestamp_ntz, so they must equal delta-rs's read of that table.
- dv-with-columnmapping, dv-partitioned-with-checkpoint: delta-rs cannot read deletion
  vectors. Version 0 (no DVs) must hold the 50 generated rows (part = i % 10, col1 = i,
  col2 = "foo{i % 5}"); version v is version 0 minus the rows DELETEd by commits 1..v
  (col1 = 0, 2, ..., 2(v-1)), and its row count equals the log's sum of numRecords minus the
  sum of deletion vector cardinalities (versions 0, 1, 8-11 and 15: both sides of the
  checkpoint at 10).
- Inline deletion vectors (none in the golden tables) on a table written by delta-rs and
  given a DV commit here.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.errors import InvalidColumnsError, StorageError, UnsupportedFeatureError
from tables.delta.snapshot.dv import inline_descriptor
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.commit import commit
from tests.conftest import golden_path
from tests.spark.compare import multiset, norm, rows_of

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.reading.read import FILE_COL, ROW_COL, preview_rows, read_version  # noqa: E402

DELTA_RS_TABLES = [
    ("data-reader-partition-values", 0),
    ("data-reader-primitives", 0),
    ("data-reader-timestamp_ntz", 0),
    ("data-reader-timestamp_ntz", 1),
    ("basic-with-inserts-updates", 0),
    ("basic-with-inserts-updates", 1),
    ("basic-with-inserts-merge", 0),
    ("basic-with-inserts-merge", 1),
]


@pytest.mark.parametrize(("name", "version"), DELTA_RS_TABLES)
def test_version_equals_delta_rs(spark, name, version) -> None:
    path = golden_path(name)
    ours = read_version(spark, str(path), version).toArrow()
    theirs = DeltaTable(str(path), version=version).to_pyarrow_table()
    assert ours.num_rows == theirs.num_rows
    assert multiset(ours) == multiset(theirs)


def test_partition_values_are_typed(spark) -> None:
    df = read_version(spark, str(golden_path("data-reader-partition-values")))
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types["as_date"] == "date" and types["as_timestamp"] == "timestamp"
    assert types["as_big_decimal"] == "decimal(1,0)" and types["as_boolean"] == "boolean"
    row = next(r for r in df.toArrow().to_pylist() if r["as_int"] == 1)
    assert row["as_timestamp"] == datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC)  # log value read as UTC
    assert row["as_date"] == date(2021, 9, 8) and row["as_big_decimal"] == Decimal(1)
    assert row["as_string_lit_null"] == "null" and row["as_boolean"] is False


def generated_primitives() -> list[dict]:
    """The rows Delta Lake's golden generator wrote to the column mapping tables."""
    rows = []
    for i in range(5):
        rows.append(
            {
                "ByteType": i,
                "ShortType": i,
                "IntegerType": i,
                "LongType": i,
                "FloatType": float(i),
                "DoubleType": float(i),
                "decimal": Decimal(i).quantize(Decimal("0.01")),
                "BooleanType": i % 2 == 0,
                "StringType": str(i),
                "BinaryType": str(i).encode(),
                "DateType": date(2021, 11, 18),
                "TimestampType": datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=i),
                "nested_struct": {"aa": str(i), "ac": {"aca": i}},
                "array_of_prims": [i, i + 1],
                "array_of_arrays": [[i, i + 1], [i + 2, i + 3]],
                "array_of_map_of_arrays": [[(i, [2, 3]), (i + 1, [4, 5])]],
                "array_of_structs": [{"ab": i}, {"ab": i}],
                "struct_of_arrays_maps_of_structs": {"aa": [i, i + 1], "ab": [([i, i + 1], {"aca": i + 2})]},
                "map_of_prims": [(i, i + 1), (i + 2, i + 3)],
                "map_of_rows": [(i + 1, {"ab": i * 20})],
                "map_of_arrays": [(i, [i, None, i + 1]), (i + 1, [])],
                "map_of_maps": [(i, [(i, i)]), (i + 1, [(i + 2, i)])],
            }
        )
    rows.append(dict.fromkeys(rows[0]))
    return rows


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_tables(spark, mode) -> None:
    path = golden_path(f"table-with-columnmapping-mode-{mode}")
    snap = load_snapshot(path)
    assert snap.metadata.configuration["delta.columnMapping.mode"] == mode
    ours = read_version(spark, str(path)).toArrow()
    expected = generated_primitives()
    assert ours.column_names == list(expected[0])  # logical names, schema order
    assert multiset(ours)[1] == rows_of(expected)


@pytest.mark.parametrize("mode", ["name", "id"])
def test_timestamp_ntz_with_column_mapping_equals_plain_table(spark, mode) -> None:
    plain = str(golden_path("data-reader-timestamp_ntz"))
    mapped = str(golden_path(f"data-reader-timestamp_ntz-{mode}-mode"))
    for version in (0, 1):
        ours = read_version(spark, mapped, version).toArrow()
        theirs = DeltaTable(plain, version=version).to_pyarrow_table()
        assert multiset(ours) == multiset(theirs)
    types = {f.name: f.dataType.simpleString() for f in read_version(spark, mapped).schema.fields}
    assert types == {"id": "int", "tsNtz": "timestamp_ntz", "tsNtzPartition": "timestamp_ntz"}


def log_stats(root: Path) -> dict[str, int]:
    """numRecords of every data file any add of the log describes."""
    out = {}
    for f in sorted((root / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            add = json.loads(line).get("add") if line.strip() else None
            if add and add.get("stats"):
                out[add["path"]] = json.loads(add["stats"])["numRecords"]
    return out


@pytest.mark.parametrize("name", ["dv-with-columnmapping", "dv-partitioned-with-checkpoint"])
def test_deletion_vector_tables(spark, name) -> None:
    path = golden_path(name)
    records = log_stats(path)
    generated = Counter((i % 10, i, f"foo{i % 5}") for i in range(50))
    for version in (0, 1, 8, 9, 10, 11, 15):  # around the checkpoint at 10
        snap = load_snapshot(path, version)
        files = snap.files.select(["path", "deletionVector"]).to_pylist()
        expected_count = sum(records[f["path"]] for f in files) - sum(
            (f["deletionVector"] or {}).get("cardinality", 0) for f in files
        )
        deleted = {2 * j for j in range(version)}
        expected = Counter({row: n for row, n in generated.items() if row[1] not in deleted})
        got = Counter(tuple(r) for r in read_version(spark, str(path), version).collect())
        assert sum(got.values()) == expected_count == 50 - version
        assert got == expected, f"version {version}"


def test_unsupported_reader_feature_is_named(spark) -> None:
    path = golden_path("type-widening")
    with pytest.raises(UnsupportedFeatureError, match="typeWidening-preview") as info:
        read_version(spark, str(path))
    assert info.value.code == "unsupported_feature"


def test_columns_projection_and_unknown_columns(spark) -> None:
    path = str(golden_path("data-reader-partition-values"))
    df = read_version(spark, path, columns=["value", "as_date"])
    assert df.columns == ["value", "as_date"]
    assert sorted(r["value"] for r in df.collect()) == ["0", "1", "2"]
    with pytest.raises(InvalidColumnsError, match="nope"):
        read_version(spark, path, columns=["nope"])


def test_preview_pages_are_deterministic_and_json_safe(spark) -> None:
    path = str(golden_path("basic-with-inserts-merge"))
    full = preview_rows(spark, path, 1, 0, 1000)
    assert full["total"] == 140 and len(full["rows"]) == 140
    assert full["columns"] == [{"name": "id", "type": "integer"}, {"name": "str", "type": "string"}]
    pages = [preview_rows(spark, path, 1, off, 50)["rows"] for off in (0, 50, 100)]
    assert [r for p in pages for r in p] == full["rows"]
    ordered = read_version(spark, path, 1, with_position=True).orderBy(FILE_COL, ROW_COL).collect()
    assert [r["id"] for r in ordered] == [r["id"] for r in full["rows"]]
    assert preview_rows(spark, path, 1, 200, 10)["rows"] == []

    prim = preview_rows(spark, str(golden_path("table-with-columnmapping-mode-name")), None, 0, 10)
    json.dumps(prim)  # every value JSON-safe
    types = {c["name"]: c["type"] for c in prim["columns"]}
    assert types["decimal"] == "decimal(10,2)" and types["TimestampType"] == "timestamp"
    assert types["map_of_prims"] == "map<integer,long>"
    one = next(r for r in prim["rows"] if r["IntegerType"] == 1)
    assert one["decimal"] == "1.00" and one["BinaryType"] == "MQ==" and one["TimestampType"].endswith("Z")
    assert one["map_of_prims"] == [{"key": 1, "value": 2}, {"key": 3, "value": 4}]


@pytest.fixture
def dv_table(tmp_path) -> Path:
    """A table written by delta-rs (two files, one with a space in its partition directory),
    then given deletion vectors inline, by a commit of this project."""
    root = tmp_path / "inline dv"
    data = pa.table({"id": pa.array(range(10), pa.int64()), "p": ["a b"] * 5 + ["c"] * 5})
    write_deltalake(str(root), data, partition_by=["p"])
    snap = load_snapshot(root)
    adds = snap.file_dicts()
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors"],
    }
    actions: list[dict] = [{"protocol": protocol}]
    for a in adds:
        raw = next(r for r in snap.files.to_pylist() if r["path"].endswith(Path(a["path"]).name))
        dv = inline_descriptor([0, 2] if a["partitionValues"]["p"] == "a b" else [4])
        actions.append({"remove": {"path": raw["path"], "dataChange": True, "deletionTimestamp": 1}})
        actions.append(
            {
                "add": {
                    "path": raw["path"],
                    "partitionValues": a["partitionValues"],
                    "size": a["size"],
                    "modificationTime": 1,
                    "dataChange": True,
                    "deletionVector": dv,
                }
            }
        )
    commit(root, actions, "DELETE")
    return root


def test_inline_deletion_vectors(spark, dv_table) -> None:
    before = read_version(spark, str(dv_table), 0).toArrow()
    after = read_version(spark, str(dv_table), 1, with_position=True).toArrow()
    assert before.num_rows == 10 and after.num_rows == 7
    gone = {(r["p"], r["id"]) for r in before.to_pylist()} - {(r["p"], r["id"]) for r in after.to_pylist()}
    by_part = {p: sorted(i for q, i in gone if q == p) for p in ("a b", "c")}
    assert len(by_part["a b"]) == 2 and len(by_part["c"]) == 1
    positions = {r[ROW_COL] for r in after.to_pylist() if r["p"] == "a b"}
    assert positions == {1, 3, 4}  # rows 0 and 2 of that file are deleted
    assert all(r[FILE_COL].startswith("file:/") and "%20" in r[FILE_COL] for r in after.to_pylist() if r["p"] == "a b")


def test_empty_version_and_missing_table(spark, tmp_path) -> None:
    root = tmp_path / "empty"
    write_deltalake(str(root), pa.table({"x": pa.array([], pa.int32())}))
    df = read_version(spark, str(root))
    assert df.columns == ["x"] and df.count() == 0
    assert preview_rows(spark, str(root), 0)["rows"] == []
    shutil.rmtree(root)
    with pytest.raises(Exception, match="not a Delta table"):
        read_version(spark, str(root))
    assert norm(float("nan")) == "NaN"


def test_file_names_with_glob_and_escaped_characters(spark, tmp_path) -> None:
    """Spark takes paths as glob patterns and reports them URL-encoded: names with [ ] { } * ?
    \\ % + spaces and non-ASCII letters must still be read, and matched to their deletion vectors."""
    root = tmp_path / "names"
    (root / "_delta_log").mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors"],
    }
    meta = {
        "id": "names",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": 0,
    }
    actions: list[dict] = [{"protocol": protocol}, {"metaData": meta}]
    names = ["a [1]/x{y}*?.parquet", "b%25 c+d/é ü.parquet", "back\\slash.parquet", "plain.parquet"]
    for i, name in enumerate(names):
        full = root / name
        full.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([10 * i, 10 * i + 1, 10 * i + 2], pa.int64())}), full)
        add = {
            "path": quote(name),
            "partitionValues": {},
            "size": full.stat().st_size,
            "modificationTime": 0,
            "dataChange": True,
            "deletionVector": inline_descriptor([1]),
        }
        actions.append({"add": add})
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    got = sorted(r["id"] for r in read_version(spark, str(root)).collect())
    assert got == sorted(10 * i + k for i in range(len(names)) for k in (0, 2))


def test_missing_data_file_is_a_clear_error(spark, golden_copy) -> None:
    root = golden_copy("basic-with-inserts-updates")
    victim = root / load_snapshot(root).file_paths()[0]
    root.chmod(0o755)  # golden copies keep the originals' read-only modes
    victim.unlink()
    with pytest.raises(StorageError, match=f"1 data file\\(s\\) are missing: .*{victim.name}"):
        read_version(spark, str(root))
