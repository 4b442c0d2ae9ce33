"""What every tab of the table page shares (tables/templates/tables/_table_frame.html): the frame's
context above the tab's content, and the table's reachability by version as pages read it
(without waiting for a long log's answer)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from tables.delta import errors as delta_errors
from tables.delta.history.timestamps import format_ms
from tables.models import JobKind, JobStatus, SharedTable, SyncState, Table
from tables.services.errors import ServiceError
from tables.services.sync import incomplete
from tables.services.versions import pinned, reachability
from tables.services.versions.reachability import table_reachability
from tables.web.base.ui import context, job_param

_ACTIVE = (SyncState.QUEUED, SyncState.SYNCING)
SHARES_SHOWN = 20  # the shares named above the tabs (a table in more says how many more)
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
        incomplete_commit=incomplete.notice_of(table),  # the log's newest commit, not finished yet
        shares=_shares(request, table),  # the Delta Sharing shares it is in
    )


def _shares(request: HttpRequest, table: Table) -> dict[str, Any] | None:
    """The Delta Sharing shares the table is in, each with the name recipients see it under and
    its window of versions; a link to the share's admin page for who may see shares there."""
    rows = list(SharedTable.objects.filter(table=table).select_related("share").order_by("share__name", "id"))
    if not rows:
        return None
    user = request.user
    may_see = user.is_staff and (user.has_perm("tables.view_share") or user.has_perm("tables.change_share"))
    shown = [
        {
            "share": st.share.name,
            "as": str(st),
            "url": reverse("admin:tables_share_change", args=[st.share_id]) if may_see else None,
            "window": _window(st.first_version, st.last_version),
        }
        for st in rows[:SHARES_SHOWN]
    ]
    return {"shown": shown, "more": max(0, len(rows) - SHARES_SHOWN)}


def _window(first: int | None, last: int | None) -> str:
    if first is None and last is None:
        return ""
    if first is None:
        return f"versions up to {last}"
    return f"versions {first} to {last}" if last is not None else f"versions from {first}"


def reach_by_version(table: Table) -> pinned.PinnedRuns | dict[int, Any] | None:
    """One reachability answer for a whole page, looked up with `.get(version)`; empty when
    the log cannot be read now: the cached history still shows, its column blank. None while
    a long log's answer is computed by a worker (the page does not wait for it). A version a
    pin keeps reads as readable from its pin (`pin`), as the API says it."""
    try:
        return pinned.with_pins(table, table_reachability(table, wait=False))
    except (ServiceError, delta_errors.DeltaError):
        return {}
