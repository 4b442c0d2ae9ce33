"""The schema's timeline on golden tables written by Spark and on tables delta-rs writes,
against delta-rs as the independent answer: the schema at every version must be delta-rs's,
and the events a user checks (which column was widened from what to what, at which version,
in which commit; which was renamed, added, dropped) must be the ones the log records.
Renames and drops under column mapping are commits appended by hand to a copy of Spark's
column-mapping tables (Spark's RENAME COLUMN / DROP COLUMN metaData: same id and physical
name, a new logical name), which delta-rs reads back too."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from tables.delta.errors import CorruptLogError, VersionNotFoundError
from tables.delta.history.schema_timeline import (
    MAX_EVENTS,
    column_rows,
    diff_versions,
    extend,
    schema_at,
    schema_timeline,
    state_at,
    timeline_answer,
)
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.snapshot.schema.ddl import create_table_ddl, quote_identifier, sql_string, sql_type
from tables.delta.snapshot.schema.schema_diff import is_widening, parse_schema, path_text
from tests.conftest import golden_path

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

GOLDEN_TABLES = [
    "type-widening",
    "type-widening-nested",
    "table-with-columnmapping-mode-name",
    "table-with-columnmapping-mode-id",
    "time-travel-schema-changes-a",
    "time-travel-schema-changes-b",
]


# --- helpers ---------------------------------------------------------------------------------


def rs_schema(path: Path, version: int) -> dict[str, Any]:
    """delta-rs's schema of a version, as the log's JSON."""
    return json.loads(DeltaTable(str(path), version=version).schema().to_json())


def rs_rows(schema: dict[str, Any]) -> list[tuple[tuple[str, ...], bool]]:
    """(path, nullable) of every struct field, depth first: a walk of delta-rs's schema
    written here, not the module's."""
    out: list[tuple[tuple[str, ...], bool]] = []

    def walk(t: Any, path: tuple[str, ...]) -> None:
        if not isinstance(t, dict):
            return
        if t["type"] == "struct":
            for f in t["fields"]:
                out.append(((*path, f["name"]), f["nullable"]))
                walk(f["type"], (*path, f["name"]))
        elif t["type"] == "array":
            walk(t["elementType"], (*path, "element"))
        elif t["type"] == "map":
            walk(t["keyType"], (*path, "key"))
            walk(t["valueType"], (*path, "value"))

    walk(schema, ())
    return out


def events_of(answer: dict[str, Any], kind: str | None = None) -> list[dict[str, Any]]:
    """Every event of a timeline answer (its column's key added), oldest first."""
    out = [{**e, "column": c["key"]} for c in answer["columns"] for e in c["events"]]
    out.sort(key=lambda e: e["version"])
    return [e for e in out if kind is None or e["kind"] == kind]


def column(answer: dict[str, Any], *path: str) -> dict[str, Any]:
    return next(c for c in answer["columns"] if tuple(c["path"]) == path)


def check_against_delta_rs(path: Path) -> None:
    """At every version: the schema, its rows and partitioning are delta-rs's."""
    tl = schema_timeline(path)
    dt = DeltaTable(str(path))
    assert (tl.start, tl.latest) == (0, dt.version())
    for v in range(tl.latest + 1):
        expected = rs_schema(path, v)
        state = state_at(tl, v)
        assert parse_schema(state.metadata) == expected, f"version {v}"
        rows = column_rows(state)
        assert [(tuple(r["path"]), r["nullable"]) for r in rows] == rs_rows(expected), f"version {v}"
        answer = schema_at(tl, v)
        md = DeltaTable(str(path), version=v).metadata()
        assert answer["partitionColumns"] == list(md.partition_columns)
        assert answer["properties"] == dict(md.configuration)
        for f in expected["fields"]:
            assert quote_identifier(f["name"]) + " " + sql_type(f["type"]) in answer["ddl"], (v, f["name"])


def write_commit(path: Path, version: int, actions: list[dict[str, Any]], operation: str = "WRITE") -> None:
    info = {"timestamp": 1_700_000_000_000 + version * 1000, "operation": operation, "userName": "ana"}
    lines = [json.dumps({"commitInfo": info})] + [json.dumps(a) for a in actions]
    (path / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def metadata_of(path: Path, version: int = 0) -> dict[str, Any]:
    """The metaData action of a commit, as a dict."""
    for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
        obj = json.loads(line)
        if "metaData" in obj:
            return obj["metaData"]
    raise AssertionError(f"no metaData in commit {version}")


def with_schema(md: dict[str, Any], schema: dict[str, Any], **config: str) -> dict[str, Any]:
    return {"metaData": {**md, "schemaString": json.dumps(schema), "configuration": {**md["configuration"], **config}}}


def find_field(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in schema["fields"] if f["name"] == name)


# --- golden tables: the schema at every version is delta-rs's ---------------------------------


@pytest.mark.parametrize("name", GOLDEN_TABLES)
def test_schema_at_every_version_is_delta_rs(name: str) -> None:
    check_against_delta_rs(golden_path(name))


def test_type_widening_names_each_column_its_types_and_the_commit() -> None:
    path = golden_path("type-widening")
    answer = timeline_answer(schema_timeline(path))
    widened = {tuple(e["path"]): e for e in events_of(answer, "type_widened")}
    expected = {
        "byte_long": ("byte", "long"),
        "int_long": ("integer", "long"),
        "float_double": ("float", "double"),
        "byte_double": ("byte", "double"),
        "short_double": ("short", "double"),
        "int_double": ("integer", "double"),
        "decimal_decimal_same_scale": ("decimal(10,2)", "decimal(20,2)"),
        "decimal_decimal_greater_scale": ("decimal(10,2)", "decimal(20,5)"),
        "byte_decimal": ("byte", "decimal(11,1)"),
        "short_decimal": ("short", "decimal(11,1)"),
        "int_decimal": ("integer", "decimal(11,1)"),
        "long_decimal": ("long", "decimal(21,1)"),
        "date_timestamp_ntz": ("date", "timestamp_ntz"),
    }
    assert {p[0]: (e["fromType"], e["toType"]) for p, e in widened.items()} == expected
    assert all(e["version"] == 2 and e["recorded"] and e["fieldPath"] == "" for e in widened.values())
    # the independent answer: delta-rs's types at versions 1 and 2
    before, after = rs_schema(path, 1), rs_schema(path, 2)
    for name, (a, b) in expected.items():
        assert (find_field(before, name)["type"], find_field(after, name)["type"]) == (a, b)
    assert not events_of(answer, "type_changed") and not events_of(answer, "dropped")
    # version 1 changed properties and protocol only: no column event, but its commit is known
    assert {e["version"] for e in events_of(answer)} == {0, 2}
    commit = next(c for c in answer["commits"] if c["version"] == 2)
    assert commit["operation"] == "WRITE" and commit["timestamp"] == 1727266116833
    assert column(answer, "byte_long")["type"] == "long" and column(answer, "byte_long")["added"] == 0


def test_nested_widening_names_the_position_inside_the_field() -> None:
    path = golden_path("type-widening-nested")
    answer = timeline_answer(schema_timeline(path))
    got = {(tuple(e["path"]), e["fieldPath"]): (e["fromType"], e["toType"], e["version"]) for e in events_of(answer)
           if e["kind"] == "type_widened"}  # fmt: skip
    assert got == {
        (("struct", "a"), ""): ("integer", "long", 2),
        (("map",), "key"): ("integer", "long", 2),
        (("map",), "value"): ("integer", "long", 2),
        (("array",), "element"): ("integer", "long", 2),
    }
    after = rs_schema(path, 2)
    assert find_field(after, "map")["type"]["keyType"] == "long"
    assert find_field(after, "array")["type"]["elementType"] == "long"
    assert column(answer, "struct", "a")["key"] == "name:struct.a"
    ddl = schema_at(schema_timeline(path), 2)["ddl"]
    assert "`map` MAP<BIGINT, BIGINT>" in ddl and "`struct` STRUCT<`a`: BIGINT>" in ddl
    assert "`map` MAP<INT, INT>" in schema_at(schema_timeline(path), 1)["ddl"]


def test_time_travel_schema_changes_b_adds_part_at_version_1() -> None:
    answer = timeline_answer(schema_timeline(golden_path("time-travel-schema-changes-b")))
    part = column(answer, "part")
    assert part["added"] == 1 and [e["kind"] for e in part["events"]] == ["added"]
    assert part["type"] == "long" and part["nullable"] is True
    assert column(answer, "id")["added"] == 0
    commit = next(c for c in answer["commits"] if c["version"] == 1)
    assert commit["timestamp"] == 1603724024783 and commit["operation"] == "WRITE"
    only = timeline_answer(schema_timeline(golden_path("time-travel-schema-changes-a")))
    assert [c["path"] for c in only["columns"]] == [["id"]] and only["latestVersion"] == 0


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_tables_key_columns_by_id(mode: str) -> None:
    path = golden_path(f"table-with-columnmapping-mode-{mode}")
    tl = schema_timeline(path)
    answer = timeline_answer(tl)
    assert answer["columnMapping"] == mode
    rows = schema_at(tl, 0)["columns"]
    ids = {tuple(r["path"]): r["fieldId"] for r in rows}
    assert all(isinstance(i, int) for i in ids.values()) and len(set(ids.values())) == len(ids)
    assert {c["key"] for c in answer["columns"]} == {f"id:{i}" for i in ids.values()}
    assert all(r["physicalName"].startswith("col-") for r in rows)
    assert f"'delta.columnMapping.mode' = '{mode}'" in schema_at(tl, 0)["ddl"]
    assert "delta.columnMapping.maxColumnId" not in schema_at(tl, 0)["ddl"]


# --- column mapping: renames and drops, appended as Spark writes them --------------------------


def renamed_table(src: Path, dst: Path) -> Path:
    """Spark's column-mapping table, then v1 RENAME COLUMN ByteType TO byte_col (and the nested
    nested_struct.ac.aca to inner), v2 DROP COLUMN ShortType, v3 ADD COLUMN ShortType again
    (a new id), v4 ALTER COLUMN IntegerType SET NOT NULL."""
    shutil.copytree(src, dst)
    md = metadata_of(dst)
    schema = json.loads(md["schemaString"])
    find_field(schema, "ByteType")["name"] = "byte_col"
    inner = find_field(find_field(schema, "nested_struct")["type"], "ac")["type"]
    find_field(inner, "aca")["name"] = "inner"
    write_commit(dst, 1, [with_schema(md, schema)], "RENAME COLUMN")
    schema = copy.deepcopy(schema)
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "ShortType"]
    write_commit(dst, 2, [with_schema(md, schema)], "DROP COLUMNS")
    schema = copy.deepcopy(schema)
    new_id = int(md["configuration"].get("delta.columnMapping.maxColumnId", "100")) + 1
    meta = {"delta.columnMapping.id": new_id, "delta.columnMapping.physicalName": "col-new-short"}
    schema["fields"].append({"name": "ShortType", "type": "short", "nullable": True, "metadata": meta})
    write_commit(dst, 3, [with_schema(md, schema, **{"delta.columnMapping.maxColumnId": str(new_id)})], "ADD COLUMNS")
    schema = copy.deepcopy(schema)
    find_field(schema, "IntegerType")["nullable"] = False
    write_commit(dst, 4, [with_schema(md, schema, **{"delta.columnMapping.maxColumnId": str(new_id)})], "CHANGE COLUMN")
    return dst


@pytest.mark.parametrize("mode", ["name", "id"])
def test_renames_drops_and_a_name_added_again(mode: str, tmp_path: Path) -> None:
    path = renamed_table(golden_path(f"table-with-columnmapping-mode-{mode}"), tmp_path / "t")
    check_against_delta_rs(path)
    tl = schema_timeline(path)
    answer = timeline_answer(tl)
    byte = column(answer, "byte_col")
    assert byte["key"] == "id:1" and byte["added"] == 0 and byte["dropped"] is None
    (rename,) = [e for e in byte["events"] if e["kind"] == "renamed"]
    assert (rename["version"], rename["fromName"], rename["toName"]) == (1, "ByteType", "byte_col")
    inner = column(answer, "nested_struct", "ac", "inner")
    assert [(e["kind"], e["version"]) for e in inner["events"]] == [("added", 0), ("renamed", 1)]
    assert inner["events"][1]["fromPath"] == ["nested_struct", "ac", "aca"]
    # the old ShortType (id 2) was dropped at 2; the one added at 3 is another column
    shorts = [c for c in answer["columns"] if c["name"] == "ShortType"]
    assert [(c["key"], c["added"], c["dropped"]) for c in shorts] == [("id:2", 0, 2), (shorts[1]["key"], 3, None)]
    assert shorts[1]["key"] != "id:2"
    nullability = events_of(answer, "nullability_changed")
    assert [(e["path"], e["version"], e["from"], e["to"]) for e in nullability] == [(["IntegerType"], 4, True, False)]
    commit = next(c for c in answer["commits"] if c["version"] == 1)
    assert commit["operation"] == "RENAME COLUMN" and commit["userName"] == "ana"
    # the diff of two versions names the renames as renames (matched by id), the re-added name as new
    diff = diff_versions(tl, 0, 4)
    assert diff["matchedBy"] == "columnMapping"
    kinds = {(c["kind"], tuple(c["path"])) for c in diff["changes"]}
    assert ("renamed", ("byte_col",)) in kinds and ("renamed", ("nested_struct", "ac", "inner")) in kinds
    assert ("dropped", ("ShortType",)) in kinds and ("added", ("ShortType",)) in kinds
    assert ("nullability_changed", ("IntegerType",)) in kinds
    assert "`byte_col` TINYINT" in schema_at(tl, 1)["ddl"] and "`ByteType`" not in schema_at(tl, 1)["ddl"]
    assert "`IntegerType` INT NOT NULL" in schema_at(tl, 4)["ddl"]


def test_without_column_mapping_a_new_name_is_a_drop_and_an_add(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": pa.array([1], pa.int64()), "b": ["x"]}))
    md = metadata_of(path)
    schema = json.loads(md["schemaString"])
    find_field(schema, "b")["name"] = "c"
    write_commit(path, 1, [with_schema(md, schema)], "RENAME COLUMN")
    check_against_delta_rs(path)
    diff = diff_versions(schema_timeline(path), 0, 1)
    assert diff["matchedBy"] == "name"
    assert [(c["kind"], c["path"]) for c in diff["changes"]] == [("added", ["c"]), ("dropped", ["b"])]


def test_turning_column_mapping_on_is_no_drop_and_add(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": pa.array([1], pa.int64()), "b": ["x"]}))
    md = metadata_of(path)
    schema = json.loads(md["schemaString"])
    for i, f in enumerate(schema["fields"], start=1):
        f["metadata"] = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f["name"]}
    protocol = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}
    on = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    write_commit(path, 1, [protocol, with_schema(md, schema, **on)], "SET TBLPROPERTIES")
    renamed = copy.deepcopy(schema)
    find_field(renamed, "b")["name"] = "bee"
    write_commit(path, 2, [with_schema(md, renamed, **on)], "RENAME COLUMN")
    check_against_delta_rs(path)
    answer = timeline_answer(schema_timeline(path))
    assert [(e["kind"], e["version"]) for e in events_of(answer) if e["version"] > 0] == [("renamed", 2)]
    assert answer["tableEvents"] == [{"version": 1, "kind": "column_mapping_changed", "from": "none", "to": "name"}]
    assert column(answer, "bee")["key"] == "name:b" and column(answer, "bee")["added"] == 0


def test_a_type_that_is_no_widening_is_a_type_change(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": pa.array([1], pa.int64()), "b": pa.array([1], pa.int32())}))
    md = metadata_of(path)
    schema = json.loads(md["schemaString"])
    find_field(schema, "a")["type"] = "string"
    find_field(schema, "b")["type"] = "long"  # a widening, though no delta.typeChanges says so
    write_commit(path, 1, [with_schema(md, schema)], "CREATE OR REPLACE TABLE")
    answer = timeline_answer(schema_timeline(path))
    got = [(e["kind"], e["path"], e["fromType"], e["toType"], e["recorded"]) for e in events_of(answer)
           if e["kind"].startswith("type_")]  # fmt: skip
    assert got == [("type_changed", ["a"], "long", "string", False), ("type_widened", ["b"], "integer", "long", False)]


# --- tables delta-rs writes with schema_mode="merge" -------------------------------------------


def merged_table(path: Path) -> Path:
    """v0 id; v1 adds name; v2 adds struct s<a>; v3 adds s.b; v4 an append with no new column."""
    write_deltalake(str(path), pa.table({"id": pa.array([1], pa.int64())}))
    write_deltalake(str(path), pa.table({"id": pa.array([2], pa.int64()), "name": ["x"]}), mode="append",
                    schema_mode="merge")  # fmt: skip
    s1 = pa.struct([("a", pa.int32())])
    write_deltalake(str(path), pa.table({"id": pa.array([3], pa.int64()), "s": pa.array([{"a": 1}], s1)}),
                    mode="append", schema_mode="merge")  # fmt: skip
    s2 = pa.struct([("a", pa.int32()), ("b", pa.string())])
    write_deltalake(str(path), pa.table({"s": pa.array([{"a": 1, "b": "q"}], s2)}), mode="append", schema_mode="merge")
    write_deltalake(str(path), pa.table({"id": pa.array([4], pa.int64())}), mode="append", schema_mode="merge")
    return path


def test_merged_columns_appear_where_delta_rs_added_them(tmp_path: Path) -> None:
    path = merged_table(tmp_path / "m")
    check_against_delta_rs(path)
    answer = timeline_answer(schema_timeline(path))
    added = {tuple(e["path"]): e["version"] for e in events_of(answer, "added")}
    assert added == {("id",): 0, ("name",): 1, ("s",): 2, ("s", "a"): 2, ("s", "b"): 3}
    # the independent answer: the first version whose delta-rs schema has each column
    for p, v in added.items():
        assert p in {r[0] for r in rs_rows(rs_schema(path, v))}
        assert v == 0 or p not in {r[0] for r in rs_rows(rs_schema(path, v - 1))}
    assert not events_of(answer, "dropped") and not any(e["atLogStart"] for e in events_of(answer, "added"))
    assert column(answer, "s")["type"] == "struct<a:integer,b:string>"
    assert {c["version"] for c in answer["commits"]} == {0, 1, 2, 3}
    assert all(c["operation"] in ("WRITE", "CREATE TABLE") for c in answer["commits"])
    diff = diff_versions(schema_timeline(path), 1, 4)
    assert [(c["kind"], c["path"]) for c in diff["changes"]] == [("added", ["s"]), ("added", ["s", "a"]),
                                                                 ("added", ["s", "b"])]  # fmt: skip


def test_extend_reads_only_new_commits_and_equals_a_fresh_walk(tmp_path: Path) -> None:
    path = tmp_path / "m"
    write_deltalake(str(path), pa.table({"id": pa.array([1], pa.int64())}))
    write_deltalake(str(path), pa.table({"id": pa.array([2], pa.int64()), "name": ["x"]}), mode="append",
                    schema_mode="merge")  # fmt: skip
    first = schema_timeline(path)
    assert extend(first, path) is first  # nothing new
    write_deltalake(str(path), pa.table({"z": pa.array([1.5])}), mode="append", schema_mode="merge")
    write_deltalake(str(path), pa.table({"id": pa.array([3], pa.int64())}), mode="append", schema_mode="merge")
    later = extend(first, path)
    assert timeline_answer(later) == timeline_answer(schema_timeline(path))
    assert later.latest == 3 and first.latest == 1  # the first is unchanged
    assert column(timeline_answer(later), "z")["added"] == 2


def test_a_cleaned_up_log_starts_at_its_checkpoint(tmp_path: Path) -> None:
    path = merged_table(tmp_path / "m")
    DeltaTable(str(path)).create_checkpoint()
    for v in range(4):
        (path / "_delta_log" / f"{v:020d}.json").unlink()
    tl = schema_timeline(path)
    assert (tl.start, tl.latest) == (4, 4)
    answer = timeline_answer(tl)
    assert all(e["atLogStart"] and e["version"] == 4 for e in events_of(answer, "added"))
    assert parse_schema(state_at(tl, 4).metadata) == rs_schema(path, 4)
    with pytest.raises(VersionNotFoundError, match="versions 4 to 4"):
        schema_at(tl, 3)
    with pytest.raises(VersionNotFoundError):
        schema_at(tl, 5)


def test_widenings_recorded_before_the_log_start_are_shown(tmp_path: Path) -> None:
    src = golden_path("type-widening-nested")
    path = tmp_path / "t"
    shutil.copytree(src, path)
    DeltaTable(str(path)).create_checkpoint()
    for v in range(2):
        (path / "_delta_log" / f"{v:020d}.json").unlink()
    answer = timeline_answer(schema_timeline(path))
    widened = events_of(answer, "type_widened")
    assert {(tuple(e["path"]), e["fieldPath"]) for e in widened} == {
        (("struct", "a"), ""),
        (("map",), "key"),
        (("map",), "value"),
        (("array",), "element"),
    }
    assert all(e["atLogStart"] and e["version"] == 2 for e in widened)


# --- the statement, and a log as untrusted input ------------------------------------------------


def test_ddl_escapes_names_and_values_and_keeps_what_matters() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"name": "we`ird", "type": "long", "nullable": False, "metadata": {"comment": "it's\nhere \\ too"}},
            {"name": "g", "type": "long", "nullable": True, "metadata": {"delta.generationExpression": "`we``ird` + 1"}},
            {"name": "i", "type": "long", "nullable": False,
             "metadata": {"delta.identity.start": 1, "delta.identity.step": 2, "delta.identity.allowExplicitInsert": True}},
            {"name": "d", "type": "string", "nullable": True, "metadata": {"CURRENT_DEFAULT": "'x'"}},
            {"name": "p", "type": "date", "nullable": True, "metadata": {}},
            {"name": "evil", "type": "int); DROP TABLE x; --", "nullable": True, "metadata": {}},
            {"name": "c", "type": "string", "nullable": True, "metadata": {"__COLLATIONS": {"c": "spark.UTF8_LCASE"}}},
        ],
    }  # fmt: skip
    md = Metadata(
        id="x",
        name=None,
        description="the 'orders'",
        format={"provider": "parquet"},
        schema_string=json.dumps(schema),
        partition_columns=("p",),
        configuration={
            "delta.appendOnly": "true",
            "delta.columnMapping.maxColumnId": "7",
            "delta.constraints.positive": "i > 0",
            "delta.inCommitTimestampEnablementVersion": "3",
            "owner's": "a'b",
        },
    )
    ddl = create_table_ddl(md, Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "appendOnly")), "my `t`")
    assert ddl.startswith("CREATE TABLE `my ``t``` (\n")
    assert "  `we``ird` BIGINT NOT NULL COMMENT 'it\\'s\\nhere \\\\ too'," in ddl
    assert "  `g` BIGINT GENERATED ALWAYS AS (`we``ird` + 1)," in ddl
    assert "  `i` BIGINT NOT NULL GENERATED BY DEFAULT AS IDENTITY (START WITH 1 INCREMENT BY 2)," in ddl
    assert "  `d` STRING DEFAULT 'x'," in ddl and "'delta.feature.allowColumnDefaults' = 'supported'" in ddl
    assert "  `evil` INTDROPTABLEX," in ddl  # a type is never raw text of the log
    assert "`c` STRING COLLATE UTF8_LCASE" in ddl
    assert "PARTITIONED BY (`p`)" in ddl and "COMMENT 'the \\'orders\\''" in ddl
    assert "'delta.appendOnly' = 'true'" in ddl and "'owner\\'s' = 'a\\'b'" in ddl
    assert "maxColumnId" not in ddl and "EnablementVersion" not in ddl and "delta.constraints" not in ddl
    assert ddl.endswith("ALTER TABLE `my ``t``` ADD CONSTRAINT `positive` CHECK (i > 0);")
    assert sql_string("a\tb\x00") == "'a\\tb\\0'"


def test_long_names_are_bounded_and_deep_schemas_refused(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": pa.array([1], pa.int64())}))
    md = metadata_of(path)
    schema = json.loads(md["schemaString"])
    long_name = "n" * 50_000
    schema["fields"].append({"name": long_name, "type": "long", "nullable": True, "metadata": {}})
    write_commit(path, 1, [with_schema(md, schema)])
    answer = timeline_answer(schema_timeline(path))
    shown = events_of(answer, "added")[-1]["path"][0]
    assert len(shown) <= 1000 and "truncated, 50000 characters" in shown
    assert long_name in schema_at(schema_timeline(path), 1)["ddl"]  # the statement stays exact
    deep: Any = "long"
    for _ in range(200):
        deep = {"type": "array", "elementType": deep, "containsNull": True}
    write_commit(path, 2, [with_schema(md, {"type": "struct", "fields": [{"name": "d", "type": deep}]})])
    with pytest.raises(CorruptLogError, match="nests more than"):
        schema_timeline(path)


def test_a_corrupt_metadata_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": pa.array([1], pa.int64())}))
    (path / "_delta_log" / f"{1:020d}.json").write_text('{"metaData": {"id": \n')
    # a commit after it: a cut-off newest commit is one its writer has not finished, not corruption
    (path / "_delta_log" / f"{2:020d}.json").write_text('{"commitInfo": {"operation": "WRITE"}}\n')
    with pytest.raises(CorruptLogError, match=r"00000000000000000001\.json"):
        schema_timeline(path)


def test_events_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tables.delta.history import schema_timeline as module

    monkeypatch.setattr(module, "MAX_EVENTS", 3)
    answer = timeline_answer(schema_timeline(merged_table(tmp_path / "m")))
    assert answer["truncated"] and len(events_of(answer)) == 3
    assert MAX_EVENTS > 1000


def test_widening_rules_are_the_protocols() -> None:
    yes = [("byte", "short"), ("short", "long"), ("float", "double"), ("integer", "double"), ("date", "timestamp_ntz"),
           ("decimal(10,2)", "decimal(12,4)"), ("integer", "decimal(10,0)"), ("long", "decimal(20,0)"),
           ("short", "decimal(12,2)")]  # fmt: skip
    no = [("long", "integer"), ("long", "double"), ("decimal(10,2)", "decimal(10,3)"), ("long", "decimal(19,0)"),
          ("integer", "decimal(11,2)"), ("string", "long"), ("double", "float")]  # fmt: skip
    assert all(is_widening(a, b) for a, b in yes)
    assert not any(is_widening(a, b) for a, b in no)
    assert path_text(("a", "b.c", "d`e")) == "a.`b.c`.`d``e`"
    assert orjson.loads(orjson.dumps(path_text(("x",)))) == "x"
