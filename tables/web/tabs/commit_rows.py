"""A commit as the History, Versions and Overview tabs show it: the declared columns' cells
and its reachability in words."""

from __future__ import annotations

from typing import Any

from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.delta.history.columns import SHOWN_COLUMNS, Column
from tables.delta.history.timestamps import format_ms
from tables.models import Commit
from tables.web.base.formatting import chips, source_label


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
    pin = entry.get("pin")
    if pin:  # the table lost it; the pin that keeps it answers (tables.services.versions.pinned.mark_pin)
        lost = {
            "files_missing": "its data files were removed from the table (VACUUM)",
            "log_expired": "log cleanup removed its commits from the table",
        }.get(reason or "", "the table alone cannot give it whole")
        return {
            "ok": True,
            "text": f"kept by pin {pin.name}",
            "title": f"{lost}; it is read from pin {pin.name}, which keeps it whole",
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
