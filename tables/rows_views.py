"""Browser UI for data on Spark: the version page's row preview and the diff page's rows section.

Starting a job is a POST that calls one function of tables.data_jobs and redirects back to the
page with the job in the query string (?preview= / ?rowjob=); the page shows the job's
progress (static/tables/job.js polls it) and, once it has succeeded, its counts and a page of
its rows, read from the Parquet result with pyarrow (tables.data_jobs.result_page).
Cell values are rendered as text (autoescaped) and cut at CELL_CHARS characters.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from . import data_jobs
from .errors import ServiceError
from .models import Job, JobStatus, Table
from .ui import MAX_ID, PageError, job_param, page, page_error, table_of, version_param

ROWS_PAGE = 25
CELL_CHARS = 80
TITLE_CHARS = 2000


def _cell(value: Any) -> dict[str, Any]:
    if value is None:
        return {"text": "null", "null": True, "title": ""}
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    short = text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"
    return {"text": short, "null": False, "title": text[:TITLE_CHARS] if short != text else ""}


def _offset(request: HttpRequest) -> int:
    raw = request.GET.get("rows_offset", "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 15 else 0


def _link(request: HttpRequest, offset: int) -> str:
    q = request.GET.copy()
    q["rows_offset"] = str(offset)
    return f"?{q.urlencode()}#rows"


def _rows(request: HttpRequest, job: Job) -> dict[str, Any]:
    """Counts and one page of a succeeded job's rows, ready for tables/_rows.html."""
    offset = _offset(request)
    try:
        out = data_jobs.result_page(job, offset, ROWS_PAGE)
    except ServiceError as exc:
        return {"rows_error": exc.message}
    shown = out["cached"] if job.kind == data_jobs.PREVIEW else out["total"]
    names = [c["name"] for c in out["columns"]]
    counts = out.get("counts")
    return {
        "rows_job": job,
        "rows_columns": out["columns"],
        "rows_cells": [[_cell(r.get(n)) for n in names] for r in out["rows"]],
        "rows_total": out["total"],
        "rows_shown": shown,
        "rows_first": offset + 1 if out["rows"] else 0,
        "rows_last": offset + len(out["rows"]),
        "rows_prev": _link(request, max(0, offset - ROWS_PAGE)) if offset > 0 else None,
        "rows_next": _link(request, offset + ROWS_PAGE) if offset + ROWS_PAGE < shown else None,
        "change_counts": counts if job.kind == data_jobs.CHANGES else None,
        "diff_counts": counts if job.kind == data_jobs.ROWDIFF else None,
        "diff_keys": out.get("keys"),
    }


def _job_context(request: HttpRequest, job: Job | None, reload_url: str) -> dict[str, Any]:
    if job is None:
        return {}
    ctx: dict[str, Any] = {"job": job, "reload_url": reload_url}
    if job.status == JobStatus.SUCCEEDED:
        ctx.update(_rows(request, job))
    return ctx


def version_rows_context(request: HttpRequest, table: Table, version: int) -> dict[str, Any]:
    """The version page's preview: the cached one, else the job the page was sent back with."""
    job = data_jobs.cached_preview(table, version) or job_param(request, "preview", table, (data_jobs.PREVIEW,))
    if job is not None and (job.params or {}).get("version") != version:
        job = None
    url = reverse("tables:version_detail", args=[table.slug, version]) + "#rows"
    return {
        "preview_url": reverse("tables:version_preview", args=[table.slug, version]),
        **_job_context(request, job, url),
    }


def diff_rows_context(request: HttpRequest, table: Table, v_from: int | None, v_to: int | None) -> dict[str, Any]:
    job = job_param(request, "rowjob", table, (data_jobs.CHANGES, data_jobs.ROWDIFF))
    q = {k: v for k, v in (("from", v_from), ("to", v_to)) if v is not None}
    if job is not None:
        q["rowjob"] = job.pk
    url = f"{reverse('tables:diff', args=[table.slug])}?{urlencode(q)}#rows"
    params = (job.params or {}) if job is not None else {}
    return {
        "rows_action": reverse("tables:diff_rows", args=[table.slug]),
        "rows_keys": request.GET.get("keys") or ",".join(params.get("keys") or []),
        **_job_context(request, job, url),
    }


@page
@require_POST
def preview_start(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    table = table_of(slug)
    if version > MAX_ID:
        raise PageError(f"Version {version} does not exist.", 404, table)
    job = data_jobs.start_preview(table, version, user=request.user)
    target = reverse("tables:version_detail", args=[table.slug, version])
    return redirect(f"{target}?{urlencode({'preview': job.pk})}#rows")


@page
@require_POST
def diff_rows_start(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    v_from = version_param(request.POST.get("from") or "", "from", table)
    v_to = version_param(request.POST.get("to") or "", "to", table)
    keys = (request.POST.get("keys") or "").strip()
    try:
        if request.POST.get("kind") == "changes":
            job = data_jobs.start_changes(table, v_from, v_to, user=request.user)
        else:
            job = data_jobs.start_row_diff(table, v_from, v_to, keys, user=request.user)
    except ServiceError as exc:
        raise page_error(exc, table) from exc
    target = reverse("tables:diff", args=[table.slug])
    q = {"from": v_from, "to": v_to, "rowjob": job.pk, **({"keys": keys} if keys else {})}
    return redirect(f"{target}?{urlencode(q)}#rows")
