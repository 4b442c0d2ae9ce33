"""Reachability of a registered table's versions (which can still be read or restored, and
why not), computed by the core and cached until the next sync or for a few minutes, since
retention windows move with the clock."""

from __future__ import annotations

import time
from typing import Any

from django.core.cache import cache

from tables.delta import errors as delta_errors
from tables.delta.reachability import reachability

from .errors import from_delta
from .history import synced_key
from .models import Table

CACHE_SECONDS = 300


def table_reachability(table: Table) -> dict[str, Any]:
    """`{latestVersion, logRetentionMs, deletedFileRetentionMs, versions: [...]}`, newest first."""
    now = int(time.time() * 1000)
    key = f"reach:{synced_key(table)}:{now // (CACHE_SECONDS * 1000)}"
    data = cache.get(key)
    if data is None:
        try:
            data = reachability(table.location, now).to_dict()
        except delta_errors.DeltaError as exc:
            raise from_delta(exc) from exc
        cache.set(key, data, CACHE_SECONDS)
    return data


def version_reachability(table: Table, version: int) -> dict[str, Any] | None:
    """One version's entry, or None when the version is not in the table's log at all."""
    for entry in table_reachability(table)["versions"]:
        if entry["version"] == version:
            return entry
    return None
