"""Column mapping names and read schemas, and partition value typing (pure core)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from tables.delta.errors import CorruptLogError, UnsupportedFeatureError
from tables.delta.log.actions import Protocol
from tables.delta.snapshot.partitions import parse_partition_value, partition_columns
from tables.delta.snapshot.schema.columnmapping import (
    PARQUET_FIELD_ID,
    logical_names,
    logical_schema,
    mapping_mode,
    physical_names,
    read_schema,
    rename_physical_paths,
)
from tables.delta.snapshot.state import load_snapshot
from tests.conftest import golden_path


def fields_named(dtype, out=None):
    """Every struct field name of a schema, depth first."""
    out = [] if out is None else out
    if isinstance(dtype, dict):
        for f in dtype.get("fields", []):
            out.append(f["name"])
            fields_named(f["type"], out)
        for k in ("elementType", "keyType", "valueType"):
            fields_named(dtype.get(k), out)
    return out


@pytest.mark.parametrize("mode", ["name", "id"])
def test_golden_mapping_tables(mode) -> None:
    snap = load_snapshot(golden_path(f"table-with-columnmapping-mode-{mode}"))
    assert mapping_mode(snap.metadata, snap.protocol) == mode
    schema = snap.metadata.schema
    physical = read_schema(schema, mode)
    names = fields_named(physical)
    assert names and all(n.startswith("col-") for n in names), "nested fields are physical too"
    ids = [f["metadata"].get(PARQUET_FIELD_ID) for f in physical["fields"]]
    assert all(isinstance(i, int) for i in ids) if mode == "id" else not any(ids)
    plain = logical_schema(schema)
    assert fields_named(plain) == fields_named(schema)
    assert all(f["metadata"] == {} for f in plain["fields"])
    top = physical_names(schema, mode)
    assert logical_names(schema, mode) == {p: n for n, p in top.items()}
    paths = rename_physical_paths(schema, mode)
    nested = [v for v in paths.values() if v[0] == "array_of_map_of_arrays"]
    assert ("array_of_map_of_arrays",) in nested
    logical_inner = paths[next(p for p, v in paths.items() if v == ("nested_struct", "ac", "aca"))]
    assert logical_inner == ("nested_struct", "ac", "aca")


def test_mode_needs_the_protocol_feature() -> None:
    snap = load_snapshot(golden_path("table-with-columnmapping-mode-name"))
    assert mapping_mode(snap.metadata, Protocol(1, 2)) == "none"
    assert mapping_mode(snap.metadata, Protocol(3, 7, ("deletionVectors",), ())) == "none"
    assert mapping_mode(snap.metadata, Protocol(3, 7, ("columnMapping",), ())) == "name"
    odd = dataclasses.replace(snap.metadata, configuration={"delta.columnMapping.mode": "fancy"})
    with pytest.raises(UnsupportedFeatureError, match="fancy"):
        mapping_mode(odd, snap.protocol)


def test_partition_columns_use_physical_keys() -> None:
    snap = load_snapshot(golden_path("dv-with-columnmapping"))
    (col,) = partition_columns(snap.metadata, mapping_mode(snap.metadata, snap.protocol))
    assert col.name == "part" and col.key.startswith("col-") and col.type == "integer"


@pytest.mark.parametrize(
    ("text", "type_name", "value"),
    [
        (None, "integer", None),
        ("", "string", None),
        ("x", "string", "x"),
        ("-128", "byte", -128),
        ("9223372036854775807", "long", 2**63 - 1),
        ("1.5", "float", 1.5),
        ("-Infinity", "double", float("-inf")),
        ("1", "decimal(10,2)", Decimal("1.00")),
        ("TRUE", "boolean", True),
        ("2021-09-08", "date", date(2021, 9, 8)),
        ("2021-09-08 11:11:11", "timestamp", datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC)),
        ("2021-09-08 11:11:11.123456", "timestamp", datetime(2021, 9, 8, 11, 11, 11, 123456, tzinfo=UTC)),
        ("1970-01-01T00:00:00.123456Z", "timestamp", datetime(1970, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)),
        ("2021-11-18 02:30:00.123456", "timestamp_ntz", datetime(2021, 11, 18, 2, 30, 0, 123456)),
        ("\u0001\u0002", "binary", b"\x01\x02"),
    ],
)
def test_partition_values(text, type_name, value) -> None:
    assert parse_partition_value(text, type_name, "c") == value


@pytest.mark.parametrize(
    ("text", "type_name"), [("128", "byte"), ("x", "integer"), ("maybe", "boolean"), ("123.4", "decimal(3,1)")]
)
def test_bad_partition_values_are_errors(text, type_name) -> None:
    with pytest.raises(CorruptLogError, match="column 'c'"):
        parse_partition_value(text, type_name, "c")


def test_untyped_partition_type_is_unsupported() -> None:
    with pytest.raises(UnsupportedFeatureError):
        parse_partition_value("x", "variant", "c")
