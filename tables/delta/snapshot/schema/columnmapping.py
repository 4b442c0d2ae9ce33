"""Column mapping: logical (display) names to the physical names and ids data files use.

Protocol "Column Mapping": the mode is the table property `delta.columnMapping.mode`
(`none`, `name` or `id`), honoured only when the protocol supports the feature (reader
version 2, or reader version 3 with `columnMapping` in readerFeatures). Every struct field,
nested ones included (inside structs, array elements and map keys/values), carries
`delta.columnMapping.physicalName` and `delta.columnMapping.id` in its metadata.

- none: files use the logical names.
- name: files use the physical names; partition values and stats are keyed by physical names.
- id:   files are matched by Parquet field id (`delta.columnMapping.id`); names are physical.

`read_schema` gives the schema to hand a Parquet reader (Spark's JSON schema form: names
physical, and in id mode every struct field has `parquet.field.id` metadata, the key Spark's
Parquet reader matches ids by when `spark.sql.parquet.fieldId.read.enabled` is on);
`logical_schema` gives the same types with logical names and no mapping metadata. Both keep
field order, so a struct read with the physical schema can be cast positionally to the
logical one.

Pure: dicts in, dicts out; no Spark, no Django.
"""

from __future__ import annotations

from typing import Any

from tables.delta.errors import CorruptLogError, UnsupportedFeatureError
from tables.delta.log.actions import Metadata, Protocol

MODE_KEY = "delta.columnMapping.mode"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
PARQUET_FIELD_ID = "parquet.field.id"
MODES = ("none", "name", "id")


def supports_column_mapping(protocol: Protocol) -> bool:
    if protocol.min_reader_version == 2:
        return True
    return protocol.min_reader_version >= 3 and "columnMapping" in (protocol.reader_features or ())


def mapping_mode(metadata: Metadata, protocol: Protocol) -> str:
    """The column mapping mode a reader must apply ('none' when the protocol lacks the feature)."""
    if not supports_column_mapping(protocol):
        return "none"
    mode = (metadata.configuration.get(MODE_KEY) or "none").strip().lower()
    if mode not in MODES:
        raise UnsupportedFeatureError(f"column mapping mode '{mode[:40]}' is not supported", feature="columnMapping")
    return mode


def physical_name(field: dict[str, Any], mode: str) -> str:
    """The name a field has in data files (and in partitionValues / stats keys)."""
    if mode == "none":
        return field["name"]
    name = (field.get("metadata") or {}).get(PHYSICAL_NAME)
    if not name:
        if mode == "name":
            raise CorruptLogError(f"column '{field['name']}' has no {PHYSICAL_NAME} in a table with column mapping")
        return field["name"]
    return str(name)


def field_id(field: dict[str, Any]) -> int:
    fid = (field.get("metadata") or {}).get(FIELD_ID)
    if fid is None:
        raise CorruptLogError(f"column '{field['name']}' has no {FIELD_ID} in a table with column mapping mode id")
    return int(fid)


def _map_type(dtype: Any, fn) -> Any:
    """Apply `fn` to every struct field (depth first) of a type, through arrays and maps."""
    if not isinstance(dtype, dict):
        return dtype
    kind = dtype.get("type")
    if kind == "struct":
        return {**dtype, "fields": [fn({**f, "type": _map_type(f["type"], fn)}) for f in dtype.get("fields", [])]}
    if kind == "array":
        return {**dtype, "elementType": _map_type(dtype["elementType"], fn)}
    if kind == "map":
        return {**dtype, "keyType": _map_type(dtype["keyType"], fn), "valueType": _map_type(dtype["valueType"], fn)}
    return dtype


def read_schema(schema: dict[str, Any], mode: str, exclude: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """The Parquet read schema: physical names (and field ids in id mode), mapping metadata
    dropped. Top-level fields named in `exclude` (logical names, e.g. partition columns) are
    left out."""

    def physical(f: dict[str, Any]) -> dict[str, Any]:
        meta = {PARQUET_FIELD_ID: field_id(f)} if mode == "id" else {}
        return {
            "name": physical_name(f, mode),
            "type": f["type"],
            "nullable": f.get("nullable", True),
            "metadata": meta,
        }

    top = [f for f in schema.get("fields", []) if f["name"] not in set(exclude)]
    return _map_type({"type": "struct", "fields": top}, physical)


def logical_schema(schema: dict[str, Any], exclude: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """The table schema with its logical names and no column metadata (what readers return)."""

    def plain(f: dict[str, Any]) -> dict[str, Any]:
        return {"name": f["name"], "type": f["type"], "nullable": f.get("nullable", True), "metadata": {}}

    top = [f for f in schema.get("fields", []) if f["name"] not in set(exclude)]
    return _map_type({"type": "struct", "fields": top}, plain)


def physical_names(schema: dict[str, Any], mode: str) -> dict[str, str]:
    """Top-level logical name -> physical name."""
    return {f["name"]: physical_name(f, mode) for f in schema.get("fields", [])}


def logical_names(schema: dict[str, Any], mode: str) -> dict[str, str]:
    """Top-level physical name -> logical name."""
    return {p: n for n, p in physical_names(schema, mode).items()}


def rename_physical_paths(schema: dict[str, Any], mode: str) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Every struct field's physical field path -> logical field path (array elements and map
    keys/values appear as 'element', 'key', 'value', as in the protocol's field paths)."""
    out: dict[tuple[str, ...], tuple[str, ...]] = {}

    def walk(dtype: Any, ppath: tuple[str, ...], lpath: tuple[str, ...]) -> None:
        if not isinstance(dtype, dict):
            return
        kind = dtype.get("type")
        if kind == "struct":
            for f in dtype.get("fields", []):
                p, n = (*ppath, physical_name(f, mode)), (*lpath, f["name"])
                out[p] = n
                walk(f["type"], p, n)
        elif kind == "array":
            walk(dtype["elementType"], (*ppath, "element"), (*lpath, "element"))
        elif kind == "map":
            walk(dtype["keyType"], (*ppath, "key"), (*lpath, "key"))
            walk(dtype["valueType"], (*ppath, "value"), (*lpath, "value"))

    walk(schema, (), ())
    return out
