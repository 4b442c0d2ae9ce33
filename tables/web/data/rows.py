"""Browser UI for data on Spark: the version page's row preview and the diff page's rows section.

The preview links each row to its history (tables.web.data.row_history) by the key columns the
reader picks (?hkey=, several), by default the version's partition columns and a column named
id or key when there is one; without such a column the section asks which columns to use.

Starting a job is a POST that calls one function of tables.services.data.jobs and redirects back to the
page with the job in the query string (?preview= / ?rowjob=); the page shows the job's
progress (static/tables/job.js polls it) and, once it has succeeded, its counts and a page of
its rows, read from the Parquet result with pyarrow (tables.services.data.jobs.result_page).
Cell values are rendered as text (autoescaped) and cut at CELL_CHARS characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from tables.delta.errors import DeltaError
from tables.delta.history.row_history.key import is_key_type
from tables.models import Job, JobKind, JobStatus, Table
from tables.services.data import jobs as data_jobs
from tables.services.data.kinds import data_kind
from tables.services.errors import ServiceError
from tables.services.jobs import lifecycle as jobs
from tables.services.versions.read import snapshot_at, version_summary
from tables.spark.results import part_files, table_to_json
from tables.web.base.ui import MAX_ID, PageError, job_param, page, page_error, table_of, version_param

ROWS_PAGE = 25
CELL_CHARS = 80
TITLE_CHARS = 2000


NUMERIC = re.compile(r"(byte|short|integer|int|long|float|double|decimal(\(\d+,\s*\d+\))?)")
CHANGE_TYPES = ("added", "removed", "changed")
KEY_PREFIX = "k."  # a row history's key in a query: k.<column>=<value>
KEY_NAMES = ("id", "key")  # a column so named is taken as the row's key by default


def _cell(value: Any, num: bool = False) -> dict[str, Any]:
    """A value as the page shows it: text (cut at CELL_CHARS, the whole in the title), and
    whether it is a number (right-aligned, tabular digits)."""
    if value is None:
        return {"text": "null", "null": True, "title": "", "num": num}
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    short = text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"
    return {"text": short, "null": False, "title": text[:TITLE_CHARS] if short != text else "", "num": num}


def _numeric(type_name: str) -> bool:
    return bool(NUMERIC.fullmatch(type_name or ""))


def _side_by_side(columns: list[dict[str, Any]], rows: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    """Keyed diff rows (_diff, keys, _changed_columns, _before, _after) as before/after pairs:
    a changed row lists only the columns that differ, an added or removed row all of its own."""
    out = []
    for r in rows:
        kind = r.get("_diff")
        before, after = r.get("_before") or {}, r.get("_after") or {}
        changed = set(r.get("_changed_columns") or [])
        names = list(dict.fromkeys([*before, *after]))
        shown = [n for n in names if n in changed] if kind == "changed" else names
        out.append(
            {
                "kind": kind,
                "keys": [{"name": k, **_cell(r.get(k))} for k in keys],
                "cells": [
                    {
                        "name": n,
                        "before": _cell(before.get(n)) if kind != "added" else None,
                        "after": _cell(after.get(n)) if kind != "removed" else None,
                        "changed": n in changed,
                    }
                    for n in shown
                ],
            }
        )
    return out


def _offset(request: HttpRequest) -> int:
    raw = request.GET.get("rows_offset", "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 15 else 0


def _link(request: HttpRequest, offset: int) -> str:
    q = request.GET.copy()
    q["rows_offset"] = str(offset)
    return f"?{q.urlencode()}#rows"


def _change_filter(request: HttpRequest, job: Job) -> str:
    change = request.GET.get("change", "")
    return change if data_kind(job.kind).pairs and change in CHANGE_TYPES else ""


def _only(job: Job, out: data_jobs.ResultPage, change: str, offset: int) -> data_jobs.ResultPage:
    """The page of a keyed diff's rows of one change type: the result files scanned in order
    for that type (batch by batch, never the whole result in memory)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    data = ds.dataset([str(f) for f in part_files((job.result or {})["path"])], format="parquet")
    only = ds.field("_diff") == change
    pieces, seen = [], 0
    for batch in data.to_batches(filter=only, use_threads=False):  # in file order
        lo, hi = seen, seen + batch.num_rows
        seen = hi
        if hi > offset and lo < offset + ROWS_PAGE:
            pieces.append(batch.slice(max(0, offset - lo), min(hi, offset + ROWS_PAGE) - max(lo, offset)))
        if seen >= offset + ROWS_PAGE:
            break
    page = pa.Table.from_batches(pieces, schema=data.schema)
    return replace(out, **table_to_json(page), total=(out.summary.get("counts") or {}).get(change, 0))


def _rows(request: HttpRequest, job: Job) -> dict[str, Any]:
    """Counts and one page of a succeeded job's rows, ready for tables/_rows.html."""
    offset = _offset(request)
    change = _change_filter(request, job)
    try:
        out = data_jobs.result_page(job, 0 if change else offset, 0 if change else ROWS_PAGE)
        if change:
            out = _only(job, out, change, offset)
    except ServiceError as exc:
        return {"rows_error": exc.message}
    kind = data_kind(job.kind)  # how its kind shows its rows (tables.services.data.kinds)
    shown = getattr(out, kind.rows_shown)
    if job.kind == JobKind.QUERY:  # a query's result pages through its first DELTAWEB_QUERY_ROWS_SHOWN rows
        shown = min(shown, int(getattr(settings, "DELTAWEB_QUERY_ROWS_SHOWN", 10_000)))
    names = [c["name"] for c in out.columns]
    numeric = {c["name"] for c in out.columns if _numeric(c.get("type", ""))}
    counts = out.summary.get("counts")
    pairs = _side_by_side(out.columns, out.rows, out.summary.get("keys") or []) if kind.pairs else None
    history = preview_history(request, job, out.columns, out.rows) if kind.row_links else {}
    cells = [[_cell(r.get(n), n in numeric) for n in names] for r in out.rows]
    if history:
        links = history.pop("history_links")
        history["rows_linked"] = [{"cells": c, "history": h} for c, h in zip(cells, links, strict=True)]
    return {
        **history,
        "rows_job": job,
        "rows_columns": [{**c, "num": c["name"] in numeric} for c in out.columns],
        "rows_cells": cells,
        "rows_pairs": pairs,
        "rows_change": change,
        "rows_total": out.total,
        "rows_shown": shown,
        "rows_first": offset + 1 if out.rows else 0,
        "rows_last": offset + len(out.rows),
        "rows_prev": _link(request, max(0, offset - ROWS_PAGE)) if offset > 0 else None,
        "rows_next": _link(request, offset + ROWS_PAGE) if offset + ROWS_PAGE < shown else None,
        "change_counts": counts if kind.counts == "change" else None,
        "diff_counts": counts if kind.counts == "diff" else None,
        "diff_keys": out.summary.get("keys"),
    }


# --- a row's history from the preview -----------------------------------------------------------


def key_from(query: QueryDict) -> dict[str, str]:
    """The key a query or form names (k.<column>=<value>, in their order), at most MAX_KEYS
    columns; a column given more than once keeps its first value."""
    out: dict[str, str] = {}
    for name, values in query.lists():
        if name.startswith(KEY_PREFIX) and len(name) > len(KEY_PREFIX) and values:
            out.setdefault(name[len(KEY_PREFIX) :], values[0])
    return dict(list(out.items())[: data_jobs.MAX_KEYS])


def key_query(key: dict[str, str], **extra: Any) -> str:
    """A query string naming a key (and `extra` parameters whose value is not None)."""
    pairs = [(KEY_PREFIX + k, v) for k, v in key.items()]
    return urlencode(pairs + [(k, v) for k, v in extra.items() if v is not None])


def key_text(value: Any) -> str | None:
    """A JSON value of a result row as the text of a key value (None: a null is never a key)."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def default_keys(columns: list[dict[str, Any]], partitions: list[str]) -> list[str]:
    """The key columns a page starts with: the partition columns and a column named id or key,
    else the one keyable column the schema says is never null (a primary key as Catalog
    Explorer shows it, e.g. the demo's order_id); none when neither (the reader is asked)."""
    keyable = [c["name"] for c in columns if is_key_type(c.get("type"))]
    named = next((n for n in keyable if n.lower() in KEY_NAMES), None)
    if named is None:
        required = [c["name"] for c in columns if c["name"] in keyable and c.get("nullable") is False]
        named = required[0] if len(required) == 1 else None
    if named is None:
        return []
    return [n for n in keyable if n in partitions and n != named] + [named]


def schema_columns(table: Table, version: int | None) -> tuple[list[dict[str, Any]], list[str]]:
    """([{name, type}] of a version's top-level columns, its partition columns); empty when
    the version cannot be read."""
    if version is None:
        return [], []
    try:
        snap = snapshot_at(table, version)
    except (ServiceError, DeltaError):
        return [], []
    fields = [f for f in snap.metadata.schema.get("fields") or [] if isinstance(f, dict)]
    columns = [
        {"name": f["name"], "type": f.get("type"), "nullable": f.get("nullable")}
        for f in fields
        if isinstance(f.get("name"), str)
    ]
    return columns, list(snap.metadata.partition_columns)


def _sortable(value: Any) -> tuple[int, Any]:
    """A key cell's place in the order: nulls last, numbers by value, anything else by its text."""
    if value is None:
        return (2, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


def preview_history(request: HttpRequest, job: Job, columns: list[dict[str, Any]], rows: list[dict]) -> dict:
    """The preview's key chooser and, per row, the link to its history (None where a key
    column is null)."""
    version = (job.params or {}).get("version")
    keyable = [c["name"] for c in columns if is_key_type(c.get("type"))]
    asked = [k for k in request.GET.getlist("hkey") if k in keyable]
    if not asked and "hkeys" not in request.GET and job.table is not None:
        schema, partitions = schema_columns(job.table, version)
        asked = [k for k in default_keys(schema, partitions) if k in keyable]
    if asked:  # the page's rows in key order, as a catalog's sample is read
        rows.sort(key=lambda r: tuple(_sortable(r.get(k)) for k in asked))
    url = reverse("tables:row_history", args=[job.table.slug]) if job.table is not None else ""
    links = []
    for r in rows:
        values = {k: key_text(r.get(k)) for k in asked}
        if not asked or any(v is None for v in values.values()):
            links.append(None)
            continue
        label = ", ".join(f"{k}={v}" for k, v in values.items())
        label = label if len(label) <= CELL_CHARS else label[: CELL_CHARS - 1] + "…"
        links.append({"url": f"{url}?{key_query(values, to=version)}", "label": label})
    return {
        "history_keyable": [{"name": n, "chosen": n in asked} for n in keyable],
        "history_keys": asked,
        "history_links": links,
        "history_keep": [(k, v) for k, v in request.GET.items() if k in ("preview",)],
    }


def job_rows_context(request: HttpRequest, job: Job | None, reload_url: str) -> dict[str, Any]:
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
        **job_rows_context(request, job, url),
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
        "rows_key_error": " ".join(m.message for m in messages.get_messages(request) if "rowkeys" in m.tags),
        "key_suggestions": _columns_of(table, v_to),
        "rows_filter_url": f"{reverse('tables:diff', args=[table.slug])}?{urlencode(q)}",
        **job_rows_context(request, job, url),
    }


def _columns_of(table: Table, version: int | None) -> list[str]:
    """Top-level columns of a version, offered as key columns (none when it cannot be read)."""
    if version is None:
        return []
    try:
        schema = version_summary(table, version).state["metadata"].get("schema") or {}
    except (ServiceError, DeltaError):
        return []
    return [f["name"] for f in schema.get("fields") or [] if isinstance(f, dict) and isinstance(f.get("name"), str)]


@page
@require_POST
def preview_start(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    table = table_of(slug)
    if version > MAX_ID:
        raise PageError(f"Version {version} does not exist.", 404, table)
    job = jobs.settle(data_jobs.start_preview(table, version, user=request.user))
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
        if exc.code not in ("invalid_keys", "invalid_columns"):
            raise page_error(exc, table) from exc
        # a key the form can fix: said next to the field, the page and what was typed kept
        messages.error(request, exc.message, extra_tags="rowkeys")
        q = {"from": v_from, "to": v_to, **({"keys": keys} if keys else {})}
        return redirect(f"{reverse('tables:diff', args=[table.slug])}?{urlencode(q)}#rows")
    jobs.settle(job)
    target = reverse("tables:diff", args=[table.slug])
    q = {"from": v_from, "to": v_to, "rowjob": job.pk, **({"keys": keys} if keys else {})}
    return redirect(f"{target}?{urlencode(q)}#rows")
