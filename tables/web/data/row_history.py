"""The row-history page: one row's inserts, updates and deletes over a range of versions, newest
first, and the preview's way to it.

GET /t/<slug>/row/?k.<column>=<value>&...&from=&to=[&job=] shows the key form (the key's
columns with their values, a column to add, the range) and, with a job, its progress
(static/tables/job.js) or its events: each with the commit's version, time and user, the
columns that changed highlighted with their values before and after, the others folded away.
Starting is a POST (/t/<slug>/row/start/) that calls data_jobs.start_row_history and comes
back with the job (?job=); a key, range or version the form can fix is said next to it.

The preview of a version links each of its rows here (tables.web.data.rows.preview_history). Values
are rendered as text (autoescaped) and cut at rows.CELL_CHARS characters. Without a key in the
query or a job, the form starts with rows.default_keys.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from tables.delta.history.row_history.key import is_key_type
from tables.models import Job, JobStatus, Table
from tables.services.catalog.lookup import parse_int64
from tables.services.data import jobs as data_jobs
from tables.services.errors import ServiceError
from tables.services.jobs import lifecycle as jobs
from tables.web.base.ui import MAX_ID, context, job_param, page, page_error, table_of
from tables.web.data.rows import (
    ROWS_PAGE,
    _cell,
    _numeric,
    _offset,
    default_keys,
    key_from,
    key_query,
    schema_columns,
)

FORM_ERRORS = ("invalid_keys", "invalid_range", "version_not_found", "invalid")
MESSAGE_TAG = "rowhistory"


# --- the page ---------------------------------------------------------------------------------


def _event(row: dict[str, Any], names: list[str], numeric: set[str]) -> dict[str, Any]:
    """An event as the page shows it: the changed columns first (before and after), the
    others apart; an insert has no before, a delete no after."""
    before = json.loads(row["before"]) if row.get("before") else None
    after = json.loads(row["after"]) if row.get("after") else None
    changed = list(row.get("changed") or [])
    every = list(dict.fromkeys([*names, *(before or {}), *(after or {})]))

    def cell(name: str) -> dict[str, Any]:
        num = name in numeric
        return {
            "name": name,
            "changed": row["change"] == "update" and name in changed,
            "before": None if before is None else _cell(before.get(name), num),
            "after": None if after is None else _cell(after.get(name), num),
        }

    shown = every if row["change"] != "update" else [n for n in every if n in changed]
    rest = [] if row["change"] != "update" else [n for n in every if n not in changed]
    return {
        "version": row["version"],
        "change": row["change"],
        "badge": {"insert": "added", "delete": "removed"}.get(row["change"], "changed"),
        "timestamp": row.get("timestamp"),
        "user": row.get("user"),
        "changed": changed,
        "cells": [cell(n) for n in shown],
        "unchanged": [cell(n) for n in rest],
    }


def _events(request: HttpRequest, job: Job, columns: list[dict[str, Any]]) -> dict[str, Any]:
    """One page of a succeeded row history's events, ready for the template."""
    offset = _offset(request)
    try:
        out = data_jobs.result_page(job, offset, ROWS_PAGE)
    except ServiceError as exc:
        return {"events_error": exc.message}
    names = [c["name"] for c in columns]
    numeric = {c["name"] for c in columns if isinstance(c.get("type"), str) and _numeric(c["type"])}
    total = out.total
    return {
        "events": [_event(r, names, numeric) for r in out.rows],
        "events_total": total,
        "events_counts": out.summary.get("counts") or {},
        "events_files": out.summary.get("files") or {},
        "events_first": offset + 1 if out.rows else 0,
        "events_last": offset + len(out.rows),
        "events_prev": _page_link(request, max(0, offset - ROWS_PAGE)) if offset else None,
        "events_next": _page_link(request, offset + ROWS_PAGE) if offset + ROWS_PAGE < total else None,
    }


def _page_link(request: HttpRequest, offset: int) -> str:
    q = request.GET.copy()
    q["rows_offset"] = str(offset)
    return f"?{q.urlencode()}#events"


def _range(request: HttpRequest, table: Table, params: dict[str, Any]) -> tuple[int | None, int | None]:
    """The range the form shows: the query's, else the job's, else the table's versions."""

    def version(name: str, default: int | None) -> int | None:
        value = parse_int64(request.GET.get(name, ""))
        return value if value is not None and value <= MAX_ID else default

    v_to = version("to", params.get("to", table.last_synced_version))
    v_from = version("from", params.get("from", table.earliest_version or 0))
    return v_from, v_to


@page
@require_GET
def row_history_page(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    job = job_param(request, "job", table, (data_jobs.ROWHISTORY,))
    params = (job.params or {}) if job is not None else {}
    v_from, v_to = _range(request, table, params)
    columns, partitions = schema_columns(table, v_to)
    key = key_from(request.GET) or dict(params.get("key") or {})
    known = [c["name"] for c in columns if is_key_type(c.get("type"))]
    added = request.GET.get("add", "")
    if added in known and added not in key:
        key[added] = ""
    if not key and job is None:
        key = dict.fromkeys(default_keys(columns, partitions), "")
    reload_url = None
    if job is not None:
        here = reverse("tables:row_history", args=[table.slug])
        reload_url = f"{here}?{key_query(key, **{'from': v_from, 'to': v_to, 'job': job.pk})}#events"
    ctx = context(
        request,
        table=table,
        tab="versions",
        job=job,
        reload_url=reload_url,
        key_fields=[{"name": k, "value": v, "id": f"key-{i}"} for i, (k, v) in enumerate(key.items())],
        key_label=", ".join(f"{k}={v}" for k, v in key.items()),
        addable=[n for n in known if n not in key],
        v_from=v_from,
        v_to=v_to,
        key_error=" ".join(m.message for m in messages.get_messages(request) if MESSAGE_TAG in m.tags),
        start_url=reverse("tables:row_history_start", args=[table.slug]),
    )
    if job is not None and job.status == JobStatus.SUCCEEDED:
        ctx.update(_events(request, job, columns))
    return render(request, "tables/row_history.html", ctx)


@page
@require_POST
def row_history_start(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    # an empty field leaves its column out of the key
    key = {k: v for k, v in key_from(request.POST).items() if v != ""}
    v_from, v_to = parse_int64(request.POST.get("from", "")), parse_int64(request.POST.get("to", ""))
    back = reverse("tables:row_history", args=[table.slug])
    try:
        if v_from is None or v_to is None:
            raise ServiceError("Give the range as two version numbers (0 or more).", "invalid")
        if not key:
            raise ServiceError("Give a value for at least one key column.", "invalid_keys")
        job = data_jobs.start_row_history(table, key, v_from, v_to, user=request.user)
    except ServiceError as exc:
        if exc.code not in FORM_ERRORS:
            raise page_error(exc, table) from exc
        # said next to the form, with what was typed kept
        messages.error(request, exc.message, extra_tags=MESSAGE_TAG)
        kept = key_from(request.POST)
        return redirect(f"{back}?{key_query(kept, **{'from': v_from, 'to': v_to})}#key-form")
    jobs.settle(job)
    return redirect(f"{back}?{key_query(key, **{'from': v_from, 'to': v_to, 'job': job.pk})}#events")
