"""What every tab of the table page shares (templates/tables/_table_frame.html): the frame's
context above the tab's content, and the table's reachability by version as pages read it
(without waiting for a long log's answer)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from tables.delta import errors as delta_errors
from tables.delta.timestamps import format_ms

from .errors import ServiceError
from .models import SyncState, Table
from .reachability import table_reachability
from .ui import context, job_param

REACH_PENDING = "This table's log is long: what can still be read is being computed. Reload in a moment."


def tab_context(request: HttpRequest, table: Table, tab: str) -> dict[str, Any]:
    """What every tab of the table page shows above its content: the heading, the facts, the
    sync state and the tabs themselves."""
    return context(
        request,
        table=table,
        tab=tab,
        job=job_param(request, "job", table),
        synced=table.last_synced_version is not None,
        syncing=table.sync_state in (SyncState.QUEUED, SyncState.SYNCING),
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
    return None if data is None else {v["version"]: v for v in data["versions"]}
