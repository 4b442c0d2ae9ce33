"""A restore request's stored plan as its page and the admin console show it: the three sides
compared, the metrics, samples of the files added and removed, what changes."""

from __future__ import annotations

from typing import Any

from tables.delta.restore.rules import protocol_outcome_words
from tables.web.base.metadata import change_rows, schema_change_rows

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
            "partition_values": f.get("partitionValues"),  # |compact_json in the template
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
