"""A version's metaData as pages show it (its columns, partitioning and properties), its files,
and what changed between two versions' metadata (the Compare tab, a restore's plan). Values are
handed as they are; the templates write them with the formatting filters
(tables/templatetags/formatting.py)."""

from __future__ import annotations

import json
from typing import Any

from tables.delta.snapshot.schema.schema_diff import type_text
from tables.web.base.formatting import compact_json


def schema_rows(schema: dict[str, Any] | None, partition_columns: list[str]) -> list[dict[str, Any]]:
    parts = set(partition_columns)
    out = []
    for f in (schema or {}).get("fields") or []:
        if not isinstance(f, dict):
            continue
        out.append(
            {
                "name": f.get("name"),
                "type": type_text(f.get("type")),
                "nullable": f.get("nullable"),
                "metadata": f.get("metadata"),  # |compact_json in the template
                "partition": f.get("name") in parts,
            }
        )
    return out


def metadata_context(
    schema: dict[str, Any] | None, partition_columns: list[str], configuration: dict[str, Any]
) -> dict[str, Any]:
    """What a page shows of a version's metaData: its columns, partitioning and properties."""
    return {
        "schema": schema_rows(schema, partition_columns),
        "partition_columns": partition_columns,
        # each value |property_text:key, |property_title:key in the template (a time as a date)
        "properties": [{"key": k, "value": v} for k, v in sorted((configuration or {}).items())],
    }


def stored_metadata(latest: dict[str, Any] | None) -> dict[str, Any]:
    """metadata_context of what the sync stored of the latest version (Table.latest_metadata)."""
    if not latest:
        return {}
    try:
        schema = json.loads(latest.get("schemaString") or "{}")
    except ValueError:
        schema = {}
    return metadata_context(
        schema if isinstance(schema, dict) else {},
        list(latest.get("partitionColumns") or []),
        latest.get("configuration") or {},
    )


def file_rows(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "path": f.get("path"),
            "size": f.get("size"),
            "partition_values": f.get("partitionValues"),  # |compact_json in the template
            "modification_time": f.get("modificationTime"),  # |ms_time in the template
            "deletion_vector": (f.get("deletionVector") or {}).get("uniqueId"),
        }
        for f in files
    ]


def change_rows(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Property and protocol changes from tables.services.versions.read.diff, values as they
    are: the template writes each with |property_text:key and |property_title:key."""
    return [{"key": c["key"], "change": c["change"], "from": c["from"], "to": c["to"]} for c in changes]


def field_text(f: dict[str, Any] | None) -> str:
    """A schema field as a column's change shows it: its type, `not null`, its metadata as JSON."""
    if not isinstance(f, dict) or not f:
        return ""
    text = type_text(f.get("type"))
    if f.get("nullable") is False:
        text += " not null"
    if f.get("metadata"):
        text += " " + compact_json(f.get("metadata"))
    return text


def schema_change_rows(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Column changes as they are: the template writes each side with |field_text."""
    return [{"column": c["column"], "change": c["change"], "from": c["from"], "to": c["to"]} for c in changes]
