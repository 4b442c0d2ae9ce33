"""Reachability of a registered table's versions (which can still be read or restored, and
why not), computed by the core and cached until the next sync or for a few minutes, since
retention windows move with the clock."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from django.core.cache import cache

from tables.delta import errors as delta_errors
from tables.delta.reachability import Reachability, ReachState, answer, parse_interval, update_state

from .errors import ServiceError, from_delta
from .history import synced_key
from .models import Table

CACHE_SECONDS = 300
RETENTION_HELP = 'Give a retention such as "7 days", "interval 1 week" or "24 hours".'


def parse_retention(text: str | None) -> int:
    """A VACUUM retention a person typed, in ms; ServiceError `invalid` when unreadable."""
    ms = parse_interval(text)
    if ms is None:
        shown = (text or "").strip()[:40]
        raise ServiceError(f"'{shown}' is not a retention. {RETENTION_HELP}" if shown else RETENTION_HELP)
    return ms


def cache_epoch(now_ms: int | None = None) -> int:
    """The window the reachability cache is valid for: pages that show reachability key their
    own caches by it, so they are never staler than the answer they embed."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return now // (CACHE_SECONDS * 1000)


def table_reachability(table: Table, vacuum_retention: int | None = None) -> dict[str, Any]:
    """`{latestVersion, logRetentionMs, deletedFileRetentionMs, versions: [...]}`, newest first;
    with `vacuum_retention` (ms) also `vacuumForecast {retentionMs, breaksVersions}`: the
    readable versions a VACUUM run now with that retention would break. Cached per retention,
    since the forecast costs the same replay as the answer itself."""
    now = int(time.time() * 1000)
    forecast = "" if vacuum_retention is None else f":vac{vacuum_retention}"
    key = f"reach:{synced_key(table)}:{cache_epoch(now)}{forecast}"
    data = cache.get(key)
    if data is None:
        try:
            data = _compute(table.location, now, vacuum_retention).to_dict()
        except delta_errors.DeltaError as exc:
            raise from_delta(exc) from exc
        cache.set(key, data, CACHE_SECONDS)
    return data


# The states of the last few tables answered, in this process: the next answer after a sync
# reads only the new commits and compares the file listing (tables.delta.reachability
# update_state), instead of replaying the whole log again. A process without one (another
# worker, after a restart) computes it in full once.
MAX_STATES = 4
_states: OrderedDict[str, ReachState] = OrderedDict()
_states_lock = threading.Lock()


def _compute(location: str, now: int, vacuum_retention: int | None) -> Reachability:
    with _states_lock:  # an update changes the state in place: one at a time
        state = _states.pop(location, None)
        state = update_state(state, location)
        _states[location] = state
        while len(_states) > MAX_STATES:
            _states.popitem(last=False)
        return answer(state, location, now, vacuum_retention)


def version_reachability(table: Table, version: int) -> dict[str, Any] | None:
    """One version's entry, or None when the version is not in the table's log at all."""
    for entry in table_reachability(table)["versions"]:
        if entry["version"] == version:
            return entry
    return None


FORECAST_LISTED = 1000


def vacuum_forecast(data: dict[str, Any], limit: int = FORECAST_LISTED) -> dict[str, Any] | None:
    """The forecast of a `table_reachability` answer, its list bounded (newest first): a
    100,000-version table must not answer with 100,000 numbers."""
    forecast = data.get("vacuumForecast")
    if forecast is None:
        return None
    broken = forecast["breaksVersions"]
    return {
        "retentionMs": forecast["retentionMs"],
        "count": len(broken),
        "breaksVersions": broken[:limit],
        "truncated": len(broken) > limit,
    }
