"""Presentation helpers for the browser UI: turn service results and cached rows into what
templates show. No log parsing and no HTML here: templates escape everything they print."""

from __future__ import annotations

import json
from typing import Any

from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.delta.history.columns import SHOWN_COLUMNS, Column
from tables.delta.history.timestamps import format_ms
from tables.delta.restore.rules import protocol_outcome_words
from tables.delta.snapshot.schema_diff import type_text
from tables.models import Commit


def compact_json(value: Any) -> str:
    if value is None or value == "" or value == {}:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=False, separators=(", ", ": "), default=str)


def partition_text(values: Any) -> str:
    """Partition values as people write them, `region=apac, day=2024-05-01` (null for a null
    value), not as JSON; anything but a mapping as compact JSON."""
    if not isinstance(values, dict):
        return compact_json(values)
    return ", ".join(f"{k}={'null' if v is None else v}" for k, v in values.items())


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def source_label(source: str) -> str:
    return "ICT" if source == "ict" else "file"


def history_row(c: Commit, reach: dict[str, Any] | None = None, restore_id: int | None = None) -> dict[str, Any]:
    """A Commit as the history table shows it (DESCRIBE HISTORY's columns), with its
    reachability entry (from one `table_reachability` answer for the whole page) in words,
    and the restore request it committed, if deltaweb made it. `cells` are the declared
    columns the tab shows, each as it shows it."""
    return {
        "version": c.version,
        "restore_id": restore_id,
        "reach": reach_text(reach),
        "timestamp": format_ms(c.timestamp) or "",
        "source": source_label(c.timestamp_source),
        "adjusted": c.adjusted,
        "log_expired": c.log_expired,
        "in_commit_timestamp": format_ms(c.in_commit_timestamp),
        "file_modification_time": format_ms(c.file_modification_time),
        **{col.field: getattr(c, col.field) for col in HISTORY_COLUMNS},
        "cells": [_cell(col, getattr(c, col.field)) for col in SHOWN_COLUMNS],
    }


def _cell(col: Column, value: Any) -> dict[str, Any]:
    if col.shown in ("chips", "metrics"):
        value = chips(value, units=col.shown == "metrics")
    return {"name": col.name, "shown": col.shown, "value": value}


def reach_text(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """A version's reachability (the core's entry) in words for the history's "readable"
    column: ok, the words and a longer title; None when unknown."""
    if entry is None:
        return None
    reason = entry.get("reason")
    pin = entry.get("readFrom")
    if pin:  # the table lost it; the pin that keeps it answers (tables.services.versions.pinned.mark_pin)
        lost = {
            "files_missing": "its data files were removed from the table (VACUUM)",
            "log_expired": "log cleanup removed its commits from the table",
        }.get(reason or "", "the table alone cannot give it whole")
        return {
            "ok": True,
            "text": f"kept by pin {pin['name']}",
            "title": f"{lost}; it is read from pin {pin['name']}, which keeps it whole",
            "pin": pin,
        }
    if entry.get("readable"):
        if reason == "beyond_retention":
            return {"ok": True, "text": "beyond retention", "title": "readable, but VACUUM may delete its files now"}
        return {"ok": True, "text": "", "title": "its state and every file it needs are there"}
    if reason == "files_missing":
        n = entry["missingFiles"]["count"]
        restore = "; a restore to it is still possible" if entry.get("restorable") else ""
        return {
            "ok": False,
            "text": f"{n} file{'' if n == 1 else 's'} vacuumed",
            "title": f"data files deleted{restore}",
        }
    if reason == "log_expired":
        return {"ok": False, "text": "log expired", "title": "log cleanup removed the commits needed to rebuild it"}
    if reason == "checkpoint_mismatch":
        return {
            "ok": False,
            "text": "checkpoint disagrees",
            "title": "it is read from a checkpoint that is not the state its commits give (another table's, or rewritten)",
        }
    return {"ok": False, "text": "not reproducible", "title": "its state cannot be rebuilt from the log"}


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
            "partition_values": compact_json(f.get("partitionValues")),
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


# --- restores ----------------------------------------------------------------------------

_BYTE_METRICS = {"removedFilesSize", "restoredFilesSize", "tableSizeAfterRestore"}


def protocol_text(p: dict[str, Any] | None) -> str:
    if not p:
        return ""
    text = f"reader {p.get('minReaderVersion')} / writer {p.get('minWriterVersion')}"
    features = sorted(set(p.get("readerFeatures") or []) | set(p.get("writerFeatures") or []))
    return text + (f" · {', '.join(features)}" if features else "")


def restore_sides(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The current head, the table after the restore and the target version, row by row."""
    c = plan.get("compare") or {}
    head, after, target = c.get("head") or {}, c.get("after") or {}, c.get("target") or {}

    def row(label: str, key: str, fmt=None, is_bytes: bool = False) -> dict[str, Any]:
        values = [side.get(key) for side in (head, after, target)]
        if fmt is not None:
            values = [fmt(v) for v in values]
        return {"label": label, "values": values, "bytes": is_bytes, "changed": values[0] != values[1]}

    return [
        row("Files", "numFiles"),
        row("Size", "sizeBytes", is_bytes=True),
        row("Protocol", "protocol", protocol_text),
        row("Partition columns", "partitionColumns", lambda v: ", ".join(v or []) or "none"),
        row("Columns", "numColumns"),
    ]


def restore_metrics(metrics: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [
        {"name": k, "value": v, "bytes": k in _BYTE_METRICS and str(v).isdigit(), "number": int(v)}
        for k, v in (metrics or {}).items()
        if str(v).lstrip("-").isdigit()
    ]


def restore_samples(files: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [
        {
            "path": f.get("path"),
            "size": f.get("size"),
            "partition_values": compact_json(f.get("partitionValues")),
            "deletion_vector": f.get("deletionVector") or "",
        }
        for f in files or []
    ]


def restore_view(plan: dict[str, Any] | None) -> dict[str, Any]:
    """A stored plan as the request page and the admin console show it."""
    plan = plan or {}
    c = plan.get("compare") or {}
    metrics = plan.get("metrics") or {}
    sample = plan.get("sample") or {}
    return {
        "predicate": plan.get("predicate"),
        "rows": plan.get("rowImpact"),
        "sides": restore_sides(plan),
        "head_version": (c.get("head") or {}).get("version"),
        "target_version": plan.get("targetVersion"),
        "metrics": restore_metrics(metrics),
        "add_count": plan.get("numFilesToAdd"),
        "add_bytes": int(metrics.get("restoredFilesSize", 0) or 0),
        "remove_count": plan.get("numFilesToRemove"),
        "remove_bytes": int(metrics.get("removedFilesSize", 0) or 0),
        "schema_changes": schema_change_rows(c.get("schema") or []),
        "property_changes": change_rows(c.get("properties") or []),
        "protocol_changes": change_rows(c.get("protocol") or []),
        "partitioning_changed": (c.get("partitionColumns") or {}).get("from")
        != (c.get("partitionColumns") or {}).get("to"),
        "protocol_outcome": protocol_outcome_words(plan.get("protocolOutcome")),
        "protocol_note": plan.get("protocolNote"),
        "missing_files": plan.get("missingFiles") or [],
        "missing_count": plan.get("numMissingFiles") or 0,
        "from_pin": plan.get("fromPin"),  # files the run copies back from the pin, with plan.pin
        "pin": plan.get("pin"),
        "notes": plan.get("notes") or [],
        "add_sample": restore_samples(sample.get("add")),
        "remove_sample": restore_samples(sample.get("remove")),
        "warning": plan.get("warning") or "",
        "fingerprint": plan.get("fingerprint") or "",
    }


def restore_payload(req) -> dict[str, Any]:
    """The request page's polling answer (/restores/<id>.json)."""
    return {
        "id": req.pk,
        "status": req.status,
        "statusLabel": req.get_status_display(),
        "stage": req.stage,
        "done": req.done,
        "total": req.total,
        "error": req.error,
        "resultVersion": req.result_version,
        "terminal": req.is_terminal,
        "awaitingApproval": req.awaiting_approval,
    }


# --- history: operationParameters / operationMetrics as key/value chips -------------------

CHIPS_SHOWN = 4  # the rest behind "n more" (a <details>), so a MERGE row stays one line high


def human_count(n: int) -> str:
    return f"{n:,}"


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # unreachable: TB above ends the loop


def human_ms(ms: int) -> str:
    if abs(ms) < 1000:
        return f"{ms} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(s), 60)
    if m < 60:
        return f"{m} min {s} s"
    h, m = divmod(m, 60)
    return f"{h} h {m} min"


def metric_unit(key: str) -> str | None:
    """Which human unit a Delta metric is in, from its name (Delta and delta-rs name them
    consistently): bytes, ms, rows, files, or None for a plain value."""
    k = key.lower()
    if k.endswith("bytes") or k.endswith("size") or "filessize" in k or k.endswith("sizeafterrestore"):
        return "bytes"
    if k.endswith("timems") or k.endswith("durationms") or k.endswith("_ms") or k.endswith("timeinms"):
        return "ms"
    if k.endswith("rows") or ("rows" in k and k.startswith("num")):
        return "rows"
    if k.endswith("files") or (k.startswith("num") and "files" in k):
        return "files"
    return None


def metric_text(key: str, value: Any) -> str:
    """A metric's value with its unit, e.g. 12,345 rows, 1.2 MB, 3.4 s; text as given."""
    raw = value if isinstance(value, str) else compact_json(value)
    if isinstance(value, bool):
        return raw
    try:
        n = int(value)
    except (TypeError, ValueError):
        return raw
    if str(n) != str(value).strip():  # "1.5", "007": not a plain integer, shown as given
        return raw
    unit = metric_unit(key)
    if unit == "bytes":
        return human_bytes(n)
    if unit == "ms":
        return human_ms(n)
    if unit in ("rows", "files"):
        return f"{human_count(n)} {unit[:-1] if n == 1 else unit}"
    return human_count(n)


def chips(values: Any, units: bool) -> dict[str, Any]:
    """A JSON object as chips (key, text, raw value for the title), the first CHIPS_SHOWN
    visible and the rest hidden; units turn metric numbers into rows, bytes and durations."""
    if not isinstance(values, dict):
        text = compact_json(values)
        return {"shown": [{"key": "", "text": text, "raw": text}] if text else [], "more": []}
    out = []
    for key, value in values.items():
        raw = value if isinstance(value, str) else compact_json(value)
        text = metric_text(str(key), value) if units else raw
        out.append({"key": str(key), "text": text, "raw": raw if text != raw else ""})
    return {"shown": out[:CHIPS_SHOWN], "more": out[CHIPS_SHOWN:]}


# --- readable values: epoch milliseconds as dates, copy as SQL -----------------------------

_EPOCH_KEYS = ("timestamp", "time", "ms")


def epoch_title(key: str, value: Any) -> tuple[str, str]:
    """(text, title) of a property value: a key naming a time (…Timestamp, …Time) whose value
    is epoch milliseconds reads as a UTC date, the raw value in the title; else as given."""
    text = compact_json(value) if value is not None else ""
    if key.lower().endswith(_EPOCH_KEYS) and text.isdigit() and 9 <= len(text) <= 16:
        return format_ms(int(text)) or text, f"{text} (epoch milliseconds)"
    return text, ""


def sql_identifier(location: str) -> str:
    """A path table in Spark SQL: delta.`location`, a backtick in the path doubled."""
    return "delta.`" + location.replace("`", "``") + "`"


def sql_snippets(location: str, version: int, timestamp_ms: int | None) -> list[dict[str, str]]:
    """The queries that read this version, in Spark and Databricks SQL (VERSION AS OF,
    TIMESTAMP AS OF and Databricks' @v shorthand)."""
    ident = sql_identifier(location)
    out = [{"label": "Spark SQL, by version", "sql": f"SELECT * FROM {ident} VERSION AS OF {version}"}]
    if timestamp_ms is not None:
        ts = format_ms(timestamp_ms)  # ISO-8601 with Z: UTC whatever the session's time zone
        out.append({"label": "Spark SQL, by time", "sql": f"SELECT * FROM {ident} TIMESTAMP AS OF '{ts}'"})
    out.append({"label": "Databricks SQL", "sql": f"SELECT * FROM {ident}@v{version}"})
    return out


def diff_sql(location: str, v_from: int, v_to: int) -> list[dict[str, str]]:
    """Rows in one version and not the other, as queries (Spark and Databricks SQL alike)."""
    ident = sql_identifier(location)
    a, b = f"{ident} VERSION AS OF {v_from}", f"{ident} VERSION AS OF {v_to}"
    return [
        {"label": f"rows in {v_to} and not in {v_from}", "sql": f"SELECT * FROM {b}\nEXCEPT ALL\nSELECT * FROM {a}"},
        {"label": f"rows in {v_from} and not in {v_to}", "sql": f"SELECT * FROM {a}\nEXCEPT ALL\nSELECT * FROM {b}"},
    ]
