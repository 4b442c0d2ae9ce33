"""A commit as the History, Versions and Overview tabs show it: its raw fields, the declared
columns' values and its reachability entry. The templates write them with the formatting
filters (tables/templatetags/formatting.py): `|ms_time`, `|source_label`, `|chips:x.shown`,
`|reach_text`."""

from __future__ import annotations

from typing import Any

from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.delta.history.columns import SHOWN_COLUMNS
from tables.models import Commit
from tables.web.base.formatting import reach_text

__all__ = ["history_row", "reach_text"]  # reach_text: the version page words its entry in Python


def history_row(c: Commit, reach: dict[str, Any] | None = None, restore_id: int | None = None) -> dict[str, Any]:
    """A Commit as the history table shows it (DESCRIBE HISTORY's columns), with its
    reachability entry (from one `table_reachability` answer for the whole page) and the
    restore request it committed, if deltaweb made it. Plain values: times in epoch
    milliseconds, the timestamp's source as stored; `cells` are the declared columns the tab
    shows (name, how it is shown) with the commit's value of each."""
    return {
        "version": c.version,
        "restore_id": restore_id,
        "reach": reach,
        "timestamp": c.timestamp,
        "source": c.timestamp_source,
        "adjusted": c.adjusted,
        "log_expired": c.log_expired,
        "in_commit_timestamp": c.in_commit_timestamp,
        "file_modification_time": c.file_modification_time,
        **{col.field: getattr(c, col.field) for col in HISTORY_COLUMNS},
        "cells": [{"name": col.name, "shown": col.shown, "value": getattr(c, col.field)} for col in SHOWN_COLUMNS],
    }
