"""What every tab of the table page shares (tables/templates/tables/_table_frame.html): the frame's
context above the tab's content, and the table's reachability by version as pages read it
(without waiting for a long log's answer)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest

from tables.delta import errors as delta_errors
from tables.delta.history.timestamps import format_ms
from tables.models import JobKind, SyncState, Table
from tables.services.errors import ServiceError
from tables.services.reachability import table_reachability
from tables.web.ui import context, job_param

_ACTIVE = (SyncState.QUEUED, SyncState.SYNCING)
REACH_PENDING = "This table's log is long: what can still be read is being computed. Reload in a moment."


def tab_context(request: HttpRequest, table: Table, tab: str) -> dict[str, Any]:
    """What every tab of the table page shows above its content: the heading, the facts, the
    sync state and the tabs themselves."""
    job = job_param(request, "job", table)
    if job is not None and job.kind == JobKind.SYNC and job.is_terminal and table.sync_state in _ACTIVE:
        # the sync ended between reading the table and reading its job: show the state it left
        table.refresh_from_db()
    return context(
        request,
        table=table,
        tab=tab,
        job=job,
        synced=table.last_synced_version is not None,
        syncing=table.sync_state in _ACTIVE,
        ict_enablement_time=format_ms(table.ict_enablement_timestamp),
    )


def reach_by_version(table: Table) -> dict[int, dict[str, Any]] | None:
    """One reachability answer (cached) for a whole page; empty when the log cannot be read
    now: the cached history still shows, its column blank. None while a long log's answer is
    computed in the background (the page does not wait for it)."""
    try:
        data = table_reachability(table, wait=False)
    except (ServiceError, delta_errors.DeltaError):
        return {}
    return None if data is None else derived(data, "by_version", lambda d: {v["version"]: v for v in d["versions"]})


# What pages derive from a reachability answer (its index by version, its counts per state),
# kept beside the answer object this process holds: a 100,000-version answer is indexed once,
# not on every page. Keyed by the answer's identity; the answer is kept with it, so the
# identity cannot be reused while the entry lives.
_DERIVED_KEPT = 8
_derived: dict[tuple[int, str], tuple[dict[str, Any], Any]] = {}
_derived_lock = threading.Lock()


def derived(data: dict[str, Any], name: str, make: Callable[[dict[str, Any]], Any]) -> Any:
    """`make(data)`, computed once per answer object and name (answers are never changed)."""
    key = (id(data), name)
    with _derived_lock:
        kept = _derived.get(key)
    if kept is not None and kept[0] is data:
        return kept[1]
    value = make(data)
    with _derived_lock:
        _derived[key] = (data, value)
        while len(_derived) > _DERIVED_KEPT:
            _derived.pop(next(iter(_derived)))
    return value
