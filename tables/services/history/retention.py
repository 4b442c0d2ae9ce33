"""A table's effective retention windows as its latest synced version declares them: how long
log cleanup keeps commits (`delta.logRetentionDuration`) and how long VACUUM keeps files a
commit removed (`delta.deletedFileRetentionDuration`), Delta's defaults (30 days, 7 days) when
the table does not set them. The Overview says both; the core's reachability reads them by the
same rule (`tables.delta.history.reachability.compute.interval_ms`)."""

from __future__ import annotations

from typing import Any

from tables.delta.history.reachability.compute import (
    DEFAULT_DELETED_FILE_RETENTION,
    DEFAULT_LOG_RETENTION,
    _parse_interval,
    interval_ms,
)
from tables.models import Table

PROPERTIES = (
    ("log", "delta.logRetentionDuration", DEFAULT_LOG_RETENTION, "commits kept by log cleanup"),
    ("files", "delta.deletedFileRetentionDuration", DEFAULT_DELETED_FILE_RETENTION, "removed files kept by VACUUM"),
)
_UNITS = (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1_000))


def duration_text(ms: int) -> str:
    """Milliseconds in the largest unit that divides them: 30 days, 36 hours, 90 seconds."""
    for unit, size in _UNITS:
        if ms >= size and ms % size == 0:
            n = ms // size
            return f"{n:,} {unit}{'' if n == 1 else 's'}"
    return f"{ms:,} ms"


def effective_retention(table: Table) -> list[dict[str, Any]]:
    """Each window: its property, the effective milliseconds and words, whether it is Delta's
    default (unset, or a value Delta would not read), and the value as the table set it."""
    conf = ((table.latest_metadata or {}).get("configuration") or {}) if isinstance(table.latest_metadata, dict) else {}
    out = []
    for key, prop, default, meaning in PROPERTIES:
        raw = conf.get(prop)
        raw = str(raw)[:100] if raw is not None else None
        ms = interval_ms(raw, default)
        out.append(
            {
                "key": key,
                "property": prop,
                "meaning": meaning,
                "ms": ms,
                "text": duration_text(ms),
                "default": raw is None or _parse_interval(raw) is None,
                "set": raw,
            }
        )
    return out
