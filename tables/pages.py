"""Presentation helpers for the browser UI: turn service results and cached rows into what
templates show. No log parsing and no HTML here: templates escape everything they print."""

from __future__ import annotations

import json
from typing import Any

from tables.delta import errors as delta_errors
from tables.delta.timestamps import format_ms

from .models import Commit

# DeltaError codes a user can meet on a page, and the HTTP status each is shown with.
_DELTA_STATUS = {
    "version_not_found": 404,
    "invalid_timestamp": 400,
    "timestamp_out_of_range": 400,
    "unsupported_feature": 422,
    "not_a_delta_table": 404,
}


def delta_error_status(exc: delta_errors.DeltaError) -> int:
    """404 for versions (or a table directory) that are not there, 4xx for requests that
    cannot be answered, 500 for a log that cannot be read (corrupt, gaps, storage)."""
    return _DELTA_STATUS.get(exc.code, 500)


def compact_json(value: Any) -> str:
    if value is None or value == "" or value == {}:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=False, separators=(", ", ": "), default=str)


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def source_label(source: str) -> str:
    return "ICT" if source == "ict" else "file"


def history_row(c: Commit) -> dict[str, Any]:
    """A Commit as the history table shows it (DESCRIBE HISTORY's columns)."""
    return {
        "version": c.version,
        "timestamp": format_ms(c.timestamp) or "",
        "source": source_label(c.timestamp_source),
        "adjusted": c.adjusted,
        "in_commit_timestamp": format_ms(c.in_commit_timestamp),
        "file_modification_time": format_ms(c.file_modification_time),
        "user_name": c.user_name,
        "operation": c.operation,
        "operation_parameters": compact_json(c.operation_parameters),
        "read_version": c.read_version,
        "isolation_level": c.isolation_level,
        "is_blind_append": c.is_blind_append,
        "operation_metrics": compact_json(c.operation_metrics),
        "engine_info": c.engine_info,
    }


def type_text(t: Any) -> str:
    """A Delta schema type as text: primitives by name, nested types as compact JSON."""
    if isinstance(t, str):
        return t
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "array":
            return f"array<{type_text(t.get('elementType'))}>"
        if kind == "map":
            return f"map<{type_text(t.get('keyType'))}, {type_text(t.get('valueType'))}>"
        if kind == "struct":
            inner = ", ".join(f"{f.get('name')}: {type_text(f.get('type'))}" for f in t.get("fields") or [])
            return f"struct<{inner}>"
    return compact_json(t)


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
                "metadata": compact_json(f.get("metadata")),
                "partition": f.get("name") in parts,
            }
        )
    return out


def file_rows(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "path": f.get("path"),
            "size": f.get("size"),
            "partition_values": compact_json(f.get("partitionValues")),
            "modification_time": format_ms(f.get("modificationTime")),
            "deletion_vector": (f.get("deletionVector") or {}).get("uniqueId"),
        }
        for f in files
    ]


def change_rows(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Property and protocol changes from services.diff, values as text."""
    return [
        {
            "key": c["key"],
            "change": c["change"],
            "from": compact_json(c["from"]) if c["from"] is not None else "",
            "to": compact_json(c["to"]) if c["to"] is not None else "",
        }
        for c in changes
    ]


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


def diff_commit_rows(commits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "version": c["version"],
            "timestamp": format_ms(c["timestamp"]) or "",
            "source": source_label(c["timestamp_source"]),
            "operation": c["operation"],
            "user_name": c["user_name"],
            "operation_metrics": compact_json(c["operation_metrics"]),
        }
        for c in commits
    ]


def job_payload(job) -> dict[str, Any]:
    return {
        "id": job.pk,
        "kind": job.kind,
        "table": job.table.slug if job.table_id else None,
        "status": job.status,
        "stage": job.stage,
        "done": job.done,
        "total": job.total,
        "error": job.error,
        "terminal": job.is_terminal,
    }
