"""The table page's History tab (DESCRIBE HISTORY filtered, sorted and paged in the URL, with
its reachability column), the history's CSV/Parquet download and the signed audit export."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

from django.contrib import messages
from django.core.cache import cache
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from tables.delta.history.columns import SHOWN_COLUMNS
from tables.models import FileRemovalEvent, Table
from tables.services.access.roles import can_register
from tables.services.chain import audit
from tables.services.errors import ServiceError
from tables.services.history import export as history_export
from tables.services.history.query import (
    CACHE_SECONDS,
    HistoryFilter,
    has_expired,
    history,
    history_count,
    metric_keys,
    operations,
    synced_key,
    version_at_time,
)
from tables.services.pins.queries import pins_by_version
from tables.services.restores.requests import restore_ids_by_version
from tables.services.sync import vanished
from tables.services.versions.reachability import answer_token, cache_epoch
from tables.services.versions.read import mismatched_versions
from tables.web.base.forms import HistoryFilterForm
from tables.web.base.ui import PageError, page, query, table_of, version_param
from tables.web.tabs.commit_rows import history_row
from tables.web.tabs.frame import reach_by_version, tab_context

HISTORY_PAGE_SIZE = 50
PAGE_SIZES = (25, 50, 100, 200)
JUMP_KEYS = ("jump", "jump_time")  # where a jump landed: said on the page, not part of its query


def _remembered(request: HttpRequest) -> tuple[list[str], int]:
    """The columns and page size the URL chooses, kept in the reader's session for the next
    visit; without them in the URL, the reader's last choice (or all columns, 50 a page)."""
    session = request.session
    if "cols" in request.GET:
        session["history_cols"] = history_export.columns_of(request.GET.getlist("cols"))
    columns = history_export.columns_of(session.get("history_cols") or [])
    try:
        asked = int(request.GET.get("size", ""))
    except ValueError:
        asked = 0
    if asked in PAGE_SIZES:
        session["history_size"] = asked
    size = session.get("history_size") if session.get("history_size") in PAGE_SIZES else HISTORY_PAGE_SIZE
    return columns, size


def _page_of_version(qs, version: int, sort: str, size: int) -> int | None:
    """The page of the filtered history, in version order, that holds `version` (None: not in it)."""
    if sort not in ("-version", "version") or not qs.filter(version=version).exists():
        return None
    before = qs.filter(version__gt=version) if sort == "-version" else qs.filter(version__lt=version)
    return before.count() // size + 1


def _history_query(request: HttpRequest, table: Table) -> tuple[HistoryFilterForm, bool, Any]:
    """The history filter form of the URL, whether it filters, and the filtered, sorted query
    (the one the tab pages and the export stream both read)."""
    form = HistoryFilterForm(request.GET or None)
    valid = form.is_bound and form.is_valid()
    f = HistoryFilter()
    if valid:
        data = form.cleaned_data
        start, end = form.timestamp_range()
        f = HistoryFilter(
            operation=data.get("operation") or None,
            version_min=data.get("version_from"),
            version_max=data.get("version_to"),
            since=start,
            until=end,
            user=data.get("user") or None,
            params=data.get("params") or None,
            metric=data.get("metric") or None,
            metric_min=data.get("metric_min"),
            metric_max=data.get("metric_max"),
        )
    qs = history_export.sorted_history(history(table, f), request.GET.get("sort"))
    return form, (form.active if valid else False), qs


def _history(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The filter form and the rendered history table; the table is cached until the next
    sync (the same page of the same query is the same for every reader)."""
    form, filtered, qs = _history_query(request, table)
    sort = history_export.sort_of(request.GET.get("sort"))
    columns, size = _remembered(request)
    q = query(request, ("page", "job", *JUMP_KEYS))
    # reachability moves with the clock and with VACUUM, not only with syncs: the rows are
    # cached per answer they show (or while it is being computed, until it is there)
    shown = f"{','.join(columns)}:{size}"
    digest = hashlib.sha256(f"{q}:{request.GET.get('page', '')}:{shown}".encode()).hexdigest()[:32]
    reach_key = answer_token(table) if "readable" in columns else f"-:{cache_epoch()}"  # restore links move too
    removals = vanished.events_token(table)  # a look at the files may record one just after the sync
    pinned = pins_by_version(table)  # a pin made or removed changes the marks, not the sync
    pins_key = ",".join(f"{v}.{p.pk}.{p.state}" for v, ps in sorted(pinned.items()) for p in ps)
    html_key = f"hist:{synced_key(table)}:{reach_key}:{removals}:{pins_key}:{digest}"
    html = cache.get(html_key)
    if html is None:
        paginator = Paginator(qs, size)
        paginator.count = history_count(table, qs)  # the same for every page until the next sync
        page_obj = paginator.get_page(request.GET.get("page"))
        reach = reach_by_version(table) if page_obj.object_list and "readable" in columns else {}
        reach_pending = reach is None
        reach = reach or {}
        restores = restore_ids_by_version(table, page_obj.object_list)
        rows = [history_row(c, reach.get(c.version), restores.get(c.version)) for c in page_obj.object_list]
        bad = mismatched_versions(table, [r["version"] for r in rows])
        for r in rows:
            r["checksum_mismatch"] = r["version"] in bad
            r["pinned"] = ", ".join(p.name for p in pinned.get(r["version"], ()))
        if not filtered:
            mark_gaps(rows, sort)
        html = render_to_string(
            "tables/_history_rows.html",
            {
                "table": table,
                "page_obj": page_obj,
                "rows": rows,
                "filtered": filtered,
                "query": q,
                "sort": sort,
                "sort_label": history_export.SORT_LABELS[sort],
                "show": set(columns),
                "headers": (headers := _sort_headers(request, sort)),
                # the declared columns the tab shows, each with its sort link if it has one
                "heads": [
                    {"name": c.name, "num": c.shown == "num", "sort": headers.get(c.sort or "")}
                    for c in SHOWN_COLUMNS
                    if c.name in columns
                ],
                "reach_pending": reach_pending,
                **_removals(table, qs, rows, sort, columns, removals),
            },
        )
        cache.set(html_key, html, CACHE_SECONDS)
    # the filter form (its widgets are most of the page's rendering) depends on nothing but
    # the table's synced state (the operations it suggests) and the query string
    filters_key = (
        f"hist-filters:{synced_key(table)}:{table.slug}:{hashlib.sha256(f'{q}:{shown}'.encode()).hexdigest()[:32]}"
    )
    filters = cache.get(filters_key)
    if filters is None:
        filters = render_to_string(
            "tables/_history_filters.html",
            {
                "table": table,
                "filter_form": form,
                "filtered": filtered,
                **_filter_fields(form, sort, size),
                "operations": operations(table),
                "metric_keys": metric_keys(table),
                "sort": sort,
                "sorts": list(history_export.SORT_LABELS.items()),
                "columns": [(c, label, c in columns) for c, label in history_export.COLUMNS.items()],
                "sizes": PAGE_SIZES,
                "size": size,
                "export_query": query(request, ("page", "job", "cols", *JUMP_KEYS)),
                "request": request,
            },
        )
        cache.set(filters_key, filters, CACHE_SECONDS)
    return {
        "filtered": filtered,
        "history_html": mark_safe(html),  # rendered above by our own template, autoescaped
        "filters_html": mark_safe(filters),  # the same
        "query": q,
        "sort": sort,
    }


MAIN_FILTERS = ("operation", "user", "params", "date_from", "date_to")
MORE_FILTERS = ("version_from", "version_to", "metric", "metric_min", "metric_max")


def _filter_fields(form: HistoryFilterForm, sort: str, size: int) -> dict[str, Any]:
    """The filter bar's fields (the ones read most) and those behind "More filters", which is
    open while one of its fields (or the order, or the page size) is set or wrong."""
    more = [form[name] for name in MORE_FILTERS]
    set_ = any(f.value() not in (None, "") for f in more)
    wrong = form.is_bound and any(f.errors for f in more)
    changed = sort != history_export.DEFAULT_SORT or size != HISTORY_PAGE_SIZE
    return {
        "main_fields": [form[name] for name in MAIN_FILTERS],
        "more_fields": more,
        "more_on": set_,
        "more_open": set_ or wrong or changed,
    }


def mark_gaps(rows: list[dict[str, Any]], sort: str) -> None:
    """Versions the history has no row for, between two rows of an unfiltered page in version
    order (log cleanup removed them before a sync read them: deltaweb never saw them), as the
    earlier-drawn row's `gap`: {"first", "last", "count"}."""
    if sort not in ("-version", "version"):
        return
    for above, below in itertools.pairwise(rows):
        lo, hi = sorted((above["version"], below["version"]))
        if hi - lo > 1:
            above["gap"] = {"first": lo + 1, "last": hi - 1, "count": hi - lo - 1}


def _removals(
    table: Table, qs, rows: list[dict[str, Any]], sort: str, columns: list[str], token: str
) -> dict[str, Any]:
    """The rows template's file-removal events and the width of their marked rows."""
    return {
        "removals": place_removals(table, qs, rows, sort) if token != "0" else [],
        "span": 1 + len({"readable", "timestamp"} & set(columns)) + sum(c.name in columns for c in SHOWN_COLUMNS),
    }


def place_removals(table: Table, qs, rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """Each file-removal event beside the history row it was noticed after (the greatest
    version of the filtered history at or below the event's), on the page holding that row:
    the row's `removals`, drawn above it newest first and below it oldest first. Answers the
    table's events in words, newest first, for the banner; in another order than the
    version's, only the banner shows them."""
    events = list(vanished.events_of(table)[:MAX_PLACED])
    shown = [removal_view(e) for e in events]
    if sort not in ("-version", "version") or not rows:
        return shown
    by_desc = sorted(rows, key=lambda r: -r["version"])
    for e, view in zip(events, shown, strict=True):
        below = [r for r in by_desc if r["version"] <= e.version]
        if not below:
            continue
        row = below[0]
        higher = [r for r in by_desc if r["version"] > row["version"]]
        if not higher and qs.filter(version__gt=row["version"], version__lte=e.version).exists():
            continue  # a row between them lies on another page: the event is shown there
        row.setdefault("removals", []).append(view)
    return shown


MAX_PLACED = 500  # events placed among the rows (a table has a handful; this bounds a pathological one)


def removal_view(e: FileRemovalEvent) -> dict[str, Any]:
    """An event in words for the History tab."""
    ranges = e.unreadable or []
    return {
        "id": e.id,
        "version": e.version,
        "noticed_at": e.noticed_at,
        "files": e.files,
        "bytes": e.bytes,
        "unreadable": history_export.ranges_text(ranges).replace(",", ", ") if ranges else "",
        "unreadable_count": e.unreadable_count,
        "vacuum_version": e.vacuum_end_version if e.vacuum_end_version is not None else e.vacuum_start_version,
        "vacuum_op": "VACUUM END" if e.vacuum_end_version is not None else "VACUUM START",
        "vacuum_user": e.vacuum_user,
        "vacuum_deleted": e.vacuum_deleted_files,
        "complete": e.complete,
    }


def _sort_headers(request: HttpRequest, sort: str) -> dict[str, dict[str, str]]:
    """For each sortable column: the link that sorts by it (reversing the current order when
    it is already the key) and its aria-sort state."""
    out = {}
    for key in ("version", "timestamp", *(c.sort for c in SHOWN_COLUMNS if c.sort)):
        current = sort.lstrip("-") == key
        descending = sort.startswith("-")
        # first click: newest / A-Z as a reader expects; a second click reverses
        target = (
            ("" if descending else "-") + key if current else ("-" + key if key in ("version", "timestamp") else key)
        )
        q = request.GET.copy()
        for dropped in ("page", "job", *JUMP_KEYS):
            q.pop(dropped, None)
        q["sort"] = target
        out[key] = {
            "href": f"?{q.urlencode()}",
            "aria": ("descending" if descending else "ascending") if current else "none",
        }
    return out


@page
@require_GET
def table_history(request: HttpRequest, slug: str) -> HttpResponse:
    """The History tab: DESCRIBE HISTORY, filtered, sorted and paged in the URL, full width."""
    table = table_of(slug)
    at = request.GET.get("at", "").strip()
    when = request.GET.get("at_time", "").strip()
    if when and not at:  # a time: the version current then, from the cached history
        q = request.GET.copy()
        q.pop("at_time")
        try:
            version = version_at_time(table, when[:100])
        except ServiceError as exc:
            messages.error(request, exc.message)
            return redirect(f"{request.path}?{q.urlencode()}")
        if version is None:
            messages.error(request, f"{when[:40]} is before the table's first commit in this history.")
            return redirect(f"{request.path}?{q.urlencode()}")
        q["at"] = str(version)
        q["jump_time"] = when[:100]  # said on the page it lands on: "… → version N"
        return redirect(f"{request.path}?{q.urlencode()}")
    if at:  # jump to the page that holds a version
        _form, _filtered, qs = _history_query(request, table)
        _columns, size = _remembered(request)
        page_no = (
            _page_of_version(qs, int(at), history_export.sort_of(request.GET.get("sort")), size)
            if at.isdigit() and len(at) < 19
            else None
        )
        q = request.GET.copy()
        q.pop("at")
        if page_no is None:
            messages.error(request, f"Version {at[:30]} is not in this history (or not in these filters).")
            q.pop("jump_time", None)
        else:
            q["page"] = str(page_no)
            q["jump"] = str(int(at))  # the row the page highlights and names
        return redirect(f"{request.path}?{q.urlencode()}" + (f"#v{int(at)}" if page_no else ""))
    ctx = tab_context(request, table, "history")
    ctx.update(_history(request, table))
    ctx["has_expired"] = has_expired(table)
    ctx["jumped"] = _jumped(request)
    key = audit.signing_key()
    ctx["audit"] = {
        "allowed": can_register(request.user),
        "reason": key.reason,
        "key_id": key.key_id,
        "public_key": key.public_key,
        "development": key.development,
    }
    return render(request, "tables/table_history.html", ctx)


def _jumped(request: HttpRequest) -> dict[str, Any] | None:
    """Where "Go to version" or "Go to time" landed (?jump=N, with the time asked): said above
    the table, the row itself highlighted (its #vN is the page's target)."""
    raw = request.GET.get("jump", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) < 19):
        return None
    return {"version": int(raw), "time": request.GET.get("jump_time", "").strip()[:100]}


@page
@require_GET
def history_download(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    """The filtered, sorted history as CSV or Parquet, streamed (the History tab's filters)."""
    table = table_of(slug)
    form, _filtered, qs = _history_query(request, table)
    if form.is_bound and not form.is_valid():
        errors = "; ".join(str(e) for errs in form.errors.values() for e in errs)
        raise PageError(f"The history filters are not valid: {errors}", 400, table)
    return history_export.export_response(table, qs, fmt)


@page
@require_GET
def file_removals_download(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    """The table's files removed outside the log (one row per event) as CSV or Parquet."""
    table = table_of(slug)
    return history_export.removals_response(table, vanished.events_of(table), fmt)


@page
@require_GET
def audit_download(request: HttpRequest, slug: str) -> HttpResponse:
    """The signed audit export of a version range (?from=&to=): analysts and approvers."""
    table = table_of(slug)
    if not can_register(request.user):
        raise PageError("Only analysts and approvers may download the signed audit export.", 403, table)
    first, last = (
        version_param(request.GET[k], k, table) if request.GET.get(k, "").strip() else None for k in ("from", "to")
    )
    export = audit.audit_export_file(table, first, last, request.user)
    response = HttpResponse(export.data, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{export.name}"'
    return response
