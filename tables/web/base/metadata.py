"""A version's metaData as pages show it (its columns, partitioning and properties), its files,
and what changed between two versions' metadata (the Compare tab, a restore's plan)."""

from __future__ import annotations

import json
from typing import Any

from tables.delta.history.timestamps import format_ms
from tables.delta.snapshot.schema.schema_diff import type_text
from tables.web.base.formatting import compact_json, epoch_title


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
        "properties": [
            dict(zip(("key", "text", "title"), (k, *epoch_title(k, v)), strict=True))
            for k, v in sorted((configuration or {}).items())
        ],
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
            "modification_time": format_ms(f.get("modificationTime")),
            "deletion_vector": (f.get("deletionVector") or {}).get("uniqueId"),
        }
        for f in files
    ]


def change_rows(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Property and protocol changes from tables.services.versions.read.diff, values as text."""
    out = []
    for c in changes:
        (f_text, f_title), (t_text, t_title) = epoch_title(c["key"], c["from"]), epoch_title(c["key"], c["to"])
        out.append(
            {
                "key": c["key"],
                "change": c["change"],
                "from": f_text,
                "to": t_text,
                "from_title": f_title,
                "to_title": t_title,
            }
        )
    return out


def schema_change_rows(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def field_text(f: dict[str, Any] | None) -> str:
        if not f:
            return ""
        text = type_text(f.get("type"))
        if f.get("nullable") is False:
            text += " not null"
        if f.get("metadata"):
            text += " " + compact_json(f.get("metadata"))
        return text

    return [
        {"column": c["column"], "change": c["change"], "from": field_text(c["from"]), "to": field_text(c["to"])}
        for c in changes
    ]
