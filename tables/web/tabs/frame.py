"""What every tab of the table page shares (tables/templates/tables/_table_frame.html): the frame's
context above the tab's content, and the table's reachability by version as pages read it
(without waiting for a long log's answer)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from tables.delta import errors as delta_errors
from tables.delta.history.timestamps import format_ms
from tables.models import JobKind, JobStatus, SyncState, Table
from tables.services import reachability
from tables.services.errors import ServiceError
from tables.services.reachability import table_reachability
from tables.web.ui import context, job_param

_ACTIVE = (SyncState.QUEUED, SyncState.SYNCING)
REACH_PENDING = reachability.PENDING


def tab_context(request: HttpRequest, table: Table, tab: str) -> dict[str, Any]:
    """What every tab of the table page shows above its content: the heading, the facts, the
    sync state and the tabs themselves."""
    job = job_param(request, "job", table)
    if job is not None and job.kind == JobKind.SYNC and job.is_terminal and table.sync_state in _ACTIVE:
        # the sync ended between reading the table and reading its job: show the state it left
        table.refresh_from_db()
    if job is not None and job.kind == JobKind.SYNC and job.status == JobStatus.SUCCEEDED:
        job = None  # the page shows the state it left: no card to follow (a failure stays shown)
    return context(
        request,
        table=table,
        tab=tab,
        job=job,
        synced=table.last_synced_version is not None,
        syncing=table.sync_state in _ACTIVE,
        ict_enablement_time=format_ms(table.ict_enablement_timestamp),
    )


def reach_by_version(table: Table) -> reachability.PinnedRuns | dict[int, Any] | None:
    """One reachability answer for a whole page, looked up with `.get(version)`; empty when
    the log cannot be read now: the cached history still shows, its column blank. None while
    a long log's answer is computed by a worker (the page does not wait for it). A version a
    pin keeps reads as readable from its pin (`readFrom`), as the API says it."""
    try:
        return reachability.with_pins(table, table_reachability(table, wait=False))
    except (ServiceError, delta_errors.DeltaError):
        return {}
