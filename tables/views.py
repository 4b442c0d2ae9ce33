"""Browser UI: server-rendered pages of tables, their history, versions and diffs.

Every view requires a signed-in user (tables.ui.page) and calls the use cases for anything
about a table's log; errors a user can meet are shown on a page with the status of
tables.errors, never as a traceback. Restore pages are tables.restore_views; the data-job
sections of the version and diff pages are tables.rows_views.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from django.apps import apps
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.cache import cache
from django.core.paginator import Paginator
from django.db.models import Count, F, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from tables.delta import errors as delta_errors
from tables.delta.reachability import MAX_INTERVAL_TEXT
from tables.delta.timestamps import format_ms

from . import charts, history_export, owner_services, pages, roles
from .errors import ServiceError, public_message
from .forms import HistoryFilterForm, RegisterTableForm, RestoreRequestForm, TimeTravelForm
from .history import CACHE_SECONDS, HistoryFilter, history, operations, synced_key
from .models import Anomaly, Commit, Job, JobStatus, RestoreRequest, RestoreStatus, SyncState, Table
from .owner_access import managed_of
from .owner_db import summary as owner_summary
from .reachability import cache_epoch, parse_retention, table_reachability, vacuum_forecast
from .registration import register_table
from .restore_requests import restore_ids_by_version
from .rows_views import diff_rows_context, version_rows_context
from .sync import start_sync
from .ui import (
    MAX_ID,
    PageError,
    context,
    focus_first_error,
    job_param,
    page,
    page_error,
    query,
    table_of,
    version_param,
)
from .versions import diff, resolve, version_files, version_summary

HISTORY_PAGE_SIZE = 50
FILES_PAGE_SIZE = 100
ANOMALIES_SHOWN = 50


# --- table list and registration -------------------------------------------------------


TABLES_PAGE_SIZE = 25
TABLE_SORTS = {
    "name": ("name", "name, A to Z"),
    "-name": ("-name", "name, Z to A"),
    "-synced": ("-last_synced_at", "synced most recently"),
    "synced": ("last_synced_at", "synced longest ago"),
    "-size": ("-size_bytes", "largest first"),
    "-files": ("-num_files", "most files first"),
    "-version": ("-last_synced_version", "most versions first"),
}
TABLE_STATUSES = {
    "": "any",
    "error": "sync error",
    "never": "never synced",
    "managed": "managed by deltaweb",
    "alerts": "with alerts",
}


def alerts_installed() -> bool:
    """Whether the alerts app is part of this deployment (it adds the tables' alerts)."""
    return apps.is_installed("alerts")


def _table_rows(request: HttpRequest) -> tuple[Any, dict[str, Any]]:
    """The table list's query: search by name or location, a status, an order; and the
    form's values as given (unknown status or sort: the defaults)."""
    search = request.GET.get("q", "").strip()[:200]
    status = request.GET.get("status", "")
    statuses = {k: v for k, v in TABLE_STATUSES.items() if k != "alerts" or alerts_installed()}
    status = status if status in statuses else ""
    sort = request.GET.get("sort", "name")
    sort = sort if sort in TABLE_SORTS else "name"
    qs = Table.objects.select_related("managed")
    if search:
        qs = qs.filter(Q(name__icontains=search) | Q(location__icontains=search) | Q(slug__icontains=search))
    if status == "error":
        qs = qs.filter(Q(sync_state=SyncState.ERROR) | ~Q(last_error=""))
    elif status == "never":
        qs = qs.filter(last_synced_version__isnull=True)
    elif status == "managed":
        qs = qs.filter(managed__isnull=False).exclude(managed__state="proposed")
    elif status == "alerts":
        qs = qs.filter(alerts__isnull=False)
    if alerts_installed():
        qs = qs.annotate(alert_count=Count("alerts", distinct=True))
    field = TABLE_SORTS[sort][0]
    desc = field.startswith("-")
    order = F(field.lstrip("-")).desc(nulls_last=True) if desc else F(field).asc(nulls_last=True)
    qs = qs.order_by(order, "name").distinct()
    form = {
        "q": search,
        "status": status,
        "sort": sort,
        "statuses": list(statuses.items()),
        "sorts": [(k, label) for k, (_f, label) in TABLE_SORTS.items()],
        "active": bool(search or status),
    }
    return qs, form


@page
@require_GET
def table_list(request: HttpRequest) -> HttpResponse:
    qs, form = _table_rows(request)
    page_obj = Paginator(qs, TABLES_PAGE_SIZE).get_page(request.GET.get("page"))
    job = job_param(request, "job")
    return render(
        request,
        "tables/table_list.html",
        context(
            request,
            tables=page_obj.object_list,
            page_obj=page_obj,
            query=query(request, ("page", "job")),
            filters=form,
            any_tables=form["active"] or page_obj.paginator.count > 0 or Table.objects.exists(),
            alerts=alerts_installed(),
            job=job,
        ),
    )


@page
@require_http_methods(["GET", "POST"])
def register(request: HttpRequest) -> HttpResponse:
    if not roles.can_register(request.user):
        raise PageError(
            "Registering tables needs the analyst or approver role; ask an administrator to add you to one.", 403
        )
    form = RegisterTableForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                table = register_table(data["name"], data["location"], data.get("description", ""), user=request.user)
            except ServiceError as exc:
                field = "name" if exc.code in ("invalid_name", "duplicate") else "location"
                form.add_error(field, exc.message)
            else:
                return _start_sync_and_redirect(request, table, reverse("tables:table_detail", args=[table.slug]))
        status = 400
        focus_first_error(form)
    return render(request, "tables/register.html", context(request, form=form), status=status)


def _start_sync_and_redirect(request: HttpRequest, table: Table, target: str) -> HttpResponse:
    job = start_sync(table, user=request.user)
    job.refresh_from_db()  # outside a transaction the job was enqueued (or run, when eager) already
    if job.status == JobStatus.FAILED:
        messages.error(request, f"The sync of {table.name} could not start: {job.error}")
    elif job.status == JobStatus.SUCCEEDED:
        messages.success(request, f"{table.name} synced.")
    else:
        messages.success(request, f"Sync of {table.name} queued.")
    sep = "&" if "?" in target else "?"
    return redirect(f"{target}{sep}{urlencode({'job': job.pk})}")


@page
@require_POST
def sync_now(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    if not roles.can_register(request.user):
        raise PageError("Starting a sync needs the analyst or approver role.", 403, table)
    target = request.POST.get("next") or reverse("tables:table_detail", args=[table.slug])
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=False):
        target = reverse("tables:table_detail", args=[table.slug])
    target = target.split("#")[0]
    return _start_sync_and_redirect(request, table, target)


@login_required
@require_GET
def job_status(request: HttpRequest, pk: int) -> JsonResponse:
    job = Job.objects.select_related("table").filter(pk=pk).first() if pk <= MAX_ID else None
    if job is None:
        resp = JsonResponse({"error": f"There is no job {pk}."}, status=404)
    else:
        resp = JsonResponse(pages.job_payload(job))
    resp["Cache-Control"] = "no-store"
    return resp


# --- the table page: history, time travel, charts --------------------------------------


@login_required
@require_GET
def table_charts_json(request: HttpRequest, slug: str) -> JsonResponse:
    """The table page's figures, fetched by the page after it renders and cached until the
    next sync: a 100,000-version table's page stays small and fast."""
    table = Table.objects.filter(slug=slug).first()
    if table is None:
        return JsonResponse({"error": f"There is no table '{slug[:100]}'."}, status=404)
    key = f"charts:{synced_key(table)}:{cache_epoch()}"  # the reachability bands move with the clock
    data = cache.get(key)
    if data is None:
        data = {**charts.table_charts(table), "config": charts.CONFIG}
        if not data.get("bandsPending"):
            cache.set(key, data, CACHE_SECONDS)
    resp = JsonResponse(data)
    resp["Cache-Control"] = "private, no-cache"
    return resp


def _reach_by_version(table: Table) -> dict[int, dict[str, Any]] | None:
    """One reachability answer (cached) for the whole history page; empty when the log
    cannot be read now: the cached history still shows, its column blank. None while a long
    log's answer is computed in the background (the page does not wait for it)."""
    try:
        data = table_reachability(table, wait=False)
    except (ServiceError, delta_errors.DeltaError):
        return {}
    return None if data is None else {v["version"]: v for v in data["versions"]}


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
        )
    qs = history_export.sorted_history(history(table, f), request.GET.get("sort"))
    return form, (form.active if valid else False), qs


def _history(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The filter form and the rendered history table; the table is cached until the next
    sync (the same page of the same query is the same for every reader)."""
    form, filtered, qs = _history_query(request, table)
    sort = history_export.sort_of(request.GET.get("sort"))
    columns = history_export.columns_of(request.GET.getlist("cols"))
    q = query(request, ("page", "job"))
    # reachability moves with the clock and with VACUUM, not only with syncs
    digest = hashlib.sha256(f"{q}:{request.GET.get('page', '')}".encode()).hexdigest()[:32]
    html_key = f"hist:{synced_key(table)}:{cache_epoch()}:{digest}"
    html = cache.get(html_key)
    if html is None:
        page_obj = Paginator(qs, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
        reach = _reach_by_version(table) if page_obj.object_list and "readable" in columns else {}
        reach_pending = reach is None
        reach = reach or {}
        restores = restore_ids_by_version(table, page_obj.object_list)
        rows = [pages.history_row(c, reach.get(c.version), restores.get(c.version)) for c in page_obj.object_list]
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
                "headers": _sort_headers(request, sort),
                "reach_pending": reach_pending,
            },
        )
        if not reach_pending:  # the readable column fills in on the next request
            cache.set(html_key, html, CACHE_SECONDS)
    export_q = query(request, ("page", "job", "cols"))
    return {
        "filter_form": form,
        "filtered": filtered,
        "history_html": mark_safe(html),  # rendered above by our own template, autoescaped
        "operations": operations(table),
        "query": q,
        "sort": sort,
        "sorts": list(history_export.SORT_LABELS.items()),
        "columns": [(c, label, c in columns) for c, label in history_export.COLUMNS.items()],
        "export_query": export_q,
    }


def _sort_headers(request: HttpRequest, sort: str) -> dict[str, dict[str, str]]:
    """For each sortable column: the link that sorts by it (reversing the current order when
    it is already the key) and its aria-sort state."""
    out = {}
    for col, key in (("version", "version"), ("timestamp", "timestamp"), ("operation", "operation"), ("user", "user")):
        current = sort.lstrip("-") == key
        descending = sort.startswith("-")
        # first click: newest / A-Z as a reader expects; a second click reverses
        target = (
            ("" if descending else "-") + key if current else ("-" + key if key in ("version", "timestamp") else key)
        )
        q = request.GET.copy()
        q.pop("page", None)
        q.pop("job", None)
        q["sort"] = target
        out[col] = {
            "href": f"?{q.urlencode()}",
            "aria": ("descending" if descending else "ascending") if current else "none",
        }
    return out


def _time_travel(request: HttpRequest, table: Table) -> dict[str, Any]:
    # the API's allow_latest / allow_earliest: a time after the last commit means the latest
    # version, one before the first commit the earliest
    allow_latest = request.GET.get("allow_latest") in ("on", "true", "1")
    allow_earliest = request.GET.get("allow_earliest") in ("on", "true", "1")
    flags = {"tt_allow_latest": allow_latest, "tt_allow_earliest": allow_earliest}
    if "as_of" not in request.GET:
        return {"tt_form": TimeTravelForm(), "tt_result": None, "tt_error": None, **flags}
    form = TimeTravelForm({"as_of": request.GET.get("as_of", "")})
    form.fields["as_of"].widget.attrs["autofocus"] = True  # to refine the answer from the keyboard
    result = error = None
    if form.is_valid():
        try:
            result = resolve(
                table, form.cleaned_data["as_of"], allow_latest=allow_latest, allow_earliest=allow_earliest
            )
        except ServiceError as exc:
            error = public_message(exc.message, table)
        except delta_errors.DeltaError as exc:
            error = public_message(str(exc), table)
    else:
        error = "Give a timestamp, e.g. 2024-05-01 12:00:00 (UTC) or 2024-05-01T12:00:00+02:00."
    if result is not None:
        alts = result.get("alternatives") or {}
        result = {
            **result,
            "source_label": pages.source_label(result["source"]),
            "requested_iso": format_ms(result["requestedTimestamp"]),
            "by_info": alts.get("commitInfoTimestamp"),
            "by_file": alts.get("fileModificationTime"),
            "sql": pages.sql_snippets(table.location, result["version"], result["requestedTimestamp"]),
        }
    return {"tt_form": form, "tt_result": result, "tt_error": error, **flags}


FORECAST_SHOWN = 50  # versions listed on the page; the API has the rest


def _vacuum_forecast(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The "what would VACUUM break" form: its answer, or an error on the form itself."""
    if "vacuum_retention" not in request.GET:
        return {"vf_value": "", "vf_result": None, "vf_error": None}
    raw = request.GET.get("vacuum_retention", "")[:MAX_INTERVAL_TEXT]
    result = error = None
    try:
        data = table_reachability(table, vacuum_retention=parse_retention(raw), wait=False)
        if data is None:
            raise ServiceError(REACH_PENDING)
        forecast = vacuum_forecast(data, FORECAST_SHOWN)
    except ServiceError as exc:
        error = public_message(exc.message, table)
    else:
        broken = forecast["breaksVersions"] if forecast else []
        result = {
            "count": forecast["count"] if forecast else 0,
            "versions": broken,
            "more": (forecast["count"] - len(broken)) if forecast else 0,
        }
    return {"vf_value": raw, "vf_result": result, "vf_error": error}


def _table_context(request: HttpRequest, table: Table, tab: str) -> dict[str, Any]:
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


# query parameters of the one-page table view before it had tabs: old links land on their tab
_HISTORY_KEYS = ("operation", "version_from", "version_to", "date_from", "date_to", "page", "sort", "cols")
_VERSIONS_KEYS = ("as_of", "vacuum_retention", "allow_latest", "allow_earliest")
LAST_COMMITS = 5
ALERTS_SHOWN = 5


REACH_PENDING = "This table's log is long: what can still be read is being computed. Reload in a moment."


def _reach_summary(table: Table) -> list[dict[str, Any]] | None:
    """How many versions are in each reachability state (the timeline's bands), in words;
    None while the answer is being computed."""
    counts: dict[str, int] = {}
    reach = _reach_by_version(table)
    if reach is None:
        return None
    for entry in reach.values():
        state = charts.band_state(entry)
        counts[state] = counts.get(state, 0) + 1
    return [
        {"state": state, "label": label, "count": counts[state]}
        for state, (label, _rgb) in charts.BAND_STATES.items()
        if counts.get(state)
    ]


@page
@require_GET
def table_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """The Overview tab: the table now, its timestamps, what can still be read, its last commits."""
    table = table_of(slug)
    for keys, name in ((_VERSIONS_KEYS, "tables:table_versions"), (_HISTORY_KEYS, "tables:table_history")):
        if any(k in request.GET for k in keys):
            return redirect(f"{reverse(name, args=[table.slug])}?{request.GET.urlencode()}")
    ctx = _table_context(request, table, "overview")
    ctx["last_commits"] = [pages.history_row(c) for c in history(table)[:LAST_COMMITS]]
    ctx["reach_summary"] = _reach_summary(table) if ctx["synced"] else []
    ctx["reach_pending"] = REACH_PENDING if ctx["reach_summary"] is None else ""
    ctx["anomaly_count"] = Anomaly.objects.filter(table=table).count()
    ctx["has_expired"] = table.commits.filter(log_expired=True).exists()
    ctx["open_restores"] = RestoreRequest.objects.filter(
        table=table, status__in=RestoreStatus.awaiting_approval() | RestoreStatus.in_flight()
    ).count()
    ctx.update(_owner_card(request, table))
    if alerts_installed():
        ctx["alerts"] = list(table.alerts.all()[:ALERTS_SHOWN])
        ctx["alert_total"] = table.alerts.count()
    return render(request, "tables/table_overview.html", ctx)


@page
@require_GET
def table_history(request: HttpRequest, slug: str) -> HttpResponse:
    """The History tab: DESCRIBE HISTORY, filtered, sorted and paged in the URL, full width."""
    table = table_of(slug)
    ctx = _table_context(request, table, "history")
    ctx.update(_history(request, table))
    ctx["has_expired"] = table.commits.filter(log_expired=True).exists()
    return render(request, "tables/table_history.html", ctx)


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
def table_charts_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The Timeline & growth tab: the charts (fetched as JSON) and the anomalies."""
    table = table_of(slug)
    ctx = _table_context(request, table, "charts")
    # the first anomalies on the page; all of them in the API's timeline
    ctx["anomalies"] = list(Anomaly.objects.filter(table=table)[:ANOMALIES_SHOWN])
    ctx["anomaly_count"] = Anomaly.objects.filter(table=table).count()
    ctx["anomalies_shown"] = ANOMALIES_SHOWN
    ctx["ict_boundary"] = charts.ict_boundary(table)
    return render(request, "tables/table_charts.html", ctx)


@page
@require_GET
def table_versions(request: HttpRequest, slug: str) -> HttpResponse:
    """The Versions tab: open a version, time travel, what VACUUM would break."""
    table = table_of(slug)
    if "v" in request.GET:  # "open version": the version page, or the error on this tab
        raw = request.GET.get("v", "")
        version = version_param(raw, "version", table)
        return redirect("tables:version_detail", table.slug, version)
    ctx = _table_context(request, table, "versions")
    ctx.update(_time_travel(request, table))
    ctx.update(_vacuum_forecast(request, table))
    ctx["recent"] = [pages.history_row(c) for c in history(table)[:10]]
    status = 400 if ctx["tt_error"] else 200
    return render(request, "tables/table_versions.html", ctx, status=status)


@page
@require_GET
def table_restores(request: HttpRequest, slug: str) -> HttpResponse:
    """The Restores tab: the request form and the table's requests."""
    table = table_of(slug)
    ctx = _table_context(request, table, "restores")
    ctx["restore_form"] = RestoreRequestForm(auto_id="restore_%s")
    ctx["restores"] = list(
        RestoreRequest.objects.filter(table=table).select_related("requested_by").defer("plan", "result")[:20]
    )
    return render(request, "tables/table_restores.html", ctx)


def _owner_card(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The commit-owner card of a table deltaweb manages (None for any other table)."""
    mt = managed_of(table)
    if mt is None or mt.state == "proposed":
        return {"owner": None}
    return {"owner": owner_summary(mt), "can_freeze": roles.can_approve(request.user)}


@page
@require_POST
def managed_freeze(request: HttpRequest, slug: str) -> HttpResponse:
    """Approvers freeze (every commit refused, with the reason) or unfreeze a managed table."""
    table = table_of(slug)
    if not roles.can_approve(request.user):
        raise PageError("Freezing a table needs the approver role.", 403, table)
    try:
        if request.POST.get("action") == "unfreeze":
            owner_services.unfreeze(table, request.user)
            messages.success(request, f"{table.name} unfrozen: commits are accepted again.")
        else:
            owner_services.freeze(table, request.user, request.POST.get("reason", ""))
            messages.success(request, f"{table.name} frozen: every commit is refused until it is unfrozen.")
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect(reverse("tables:table_detail", args=[table.slug]) + "#owner")


# --- a version -------------------------------------------------------------------------


class _VersionFiles:
    """The files of a version as a lazy sequence, so Paginator asks only for its page."""

    def __init__(self, table: Table, version: int, count: int) -> None:
        self.table, self.version, self._count = table, version, count

    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, item: slice) -> list[dict[str, Any]]:
        start = item.start or 0
        stop = self._count if item.stop is None else min(item.stop, self._count)
        if stop <= start:
            return []
        _total, files = version_files(self.table, self.version, start, stop - start)
        return pages.file_rows(files)


@page
@require_GET
def version_detail(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    table = table_of(slug)
    if version > MAX_ID:
        raise PageError(f"Version {version} does not exist.", 404, table)
    try:
        summary = version_summary(table, version)
    except delta_errors.VersionNotFoundError as exc:
        raise PageError(str(exc), 404, table) from exc
    md = summary["metadata"]
    protocol = summary["protocol"]
    files = _VersionFiles(table, version, summary["numFiles"])
    page_obj = Paginator(files, FILES_PAGE_SIZE).get_page(request.GET.get("page"))
    commit = Commit.objects.filter(table=table, version=version).first()
    ctx = context(
        request,
        table=table,
        tab="versions",
        version=version,
        summary=summary,
        commit=pages.history_row(commit) if commit else None,
        timestamp=format_ms(summary.get("timestamp")),
        timestamp_source=pages.source_label(summary["timestampSource"]) if summary.get("timestampSource") else None,
        schema=pages.schema_rows(md.get("schema"), md.get("partitionColumns") or []),
        partition_columns=md.get("partitionColumns") or [],
        properties=[
            dict(zip(("key", "text", "title"), (k, *pages.epoch_title(k, v)), strict=True))
            for k, v in sorted((md.get("configuration") or {}).items())
        ],
        sql_snippets=pages.sql_snippets(table.location, version, summary.get("timestamp")),
        protocol=protocol,
        reader_features=protocol.get("readerFeatures"),
        writer_features=protocol.get("writerFeatures"),
        created_time=format_ms(md.get("createdTime")),
        commit_info=pages.pretty_json(summary["commitInfo"]) if summary.get("commitInfo") is not None else None,
        set_transactions=[pages.compact_json(t) for t in summary.get("setTransactions") or []],
        domain_metadata=[pages.compact_json(d) for d in summary.get("domainMetadata") or []],
        page_obj=page_obj,
        previous_version=version - 1 if version > (table.earliest_version or 0) else None,
        next_version=version + 1
        if table.last_synced_version is not None and version < table.last_synced_version
        else None,
    )
    ctx.update(version_rows_context(request, table, version))
    return render(request, "tables/version_detail.html", ctx)


# --- diff ------------------------------------------------------------------------------


def _version_param(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name, "").strip()
    return None if raw == "" else version_param(raw, name)


def _diff_file_rows(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The diff's sampled files as table rows: partition values as compact JSON, the row count
    with thousands separators (None when the file's add has no stats)."""
    return [
        {
            "path": f["path"],
            "partition": pages.compact_json(f["partitionValues"]) if f["partitionValues"] else "",
            "size": f["size"],
            "rows": None if f["numRecords"] is None else pages.human_count(f["numRecords"]),
        }
        for f in files
    ]


@page
@require_GET
def diff_view(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    try:
        v_from, v_to = _version_param(request, "from"), _version_param(request, "to")
    except PageError as exc:
        exc.table = table
        raise
    latest = table.last_synced_version
    if v_to is None and latest is not None:
        v_to = latest if v_from is None or v_from <= latest else v_from
    if v_from is None and v_to is not None:
        v_from = max(table.earliest_version or 0, v_to - 1)
    ctx = context(request, table=table, tab="compare", v_from=v_from, v_to=v_to, result=None)
    if v_from is None or v_to is None:
        ctx["notice"] = "The table has not been synced yet: enter two versions to compare."
        return render(request, "tables/diff.html", ctx)
    try:
        result = diff(table, v_from, v_to)
    except (ServiceError, delta_errors.DeltaError) as exc:
        raise page_error(exc, table) from exc
    added, removed = result["filesAdded"], result["filesRemoved"]
    ctx.update(
        result=result,
        schema_changes=pages.schema_change_rows(result["schema"]),
        property_changes=pages.change_rows(result["properties"]),
        protocol_changes=pages.change_rows(result["protocol"]),
        partitioning_changed=result["partitionColumns"]["from"] != result["partitionColumns"]["to"],
        added=added,
        removed=removed,
        added_partitions=[pages.compact_json(p) for p in added["partitions"]],
        removed_partitions=[pages.compact_json(p) for p in removed["partitions"]],
        added_files=_diff_file_rows(added["sampleFiles"]),
        removed_files=_diff_file_rows(removed["sampleFiles"]),
        commits=pages.diff_commit_rows(result["commits"]),
        commits_expected=max(0, v_to - v_from),
        sql_snippets=pages.diff_sql(table.location, v_from, v_to),
    )
    ctx.update(diff_rows_context(request, table, v_from, v_to))
    return render(request, "tables/diff.html", ctx)


# --- plotly.js and the favicon: static files (tables/staticfiles.py), hashed and compressed -----


@require_GET
def plotly_js(request: HttpRequest) -> HttpResponse:
    """The former address of plotly.js: now a static file, cached for ever under its hashed name."""
    return _static_redirect("vendor/plotly.min.js")


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for whatever the page's <link rel=icon> says."""
    return _static_redirect("tables/favicon.svg")


def _static_redirect(name: str) -> HttpResponse:
    resp = redirect(staticfiles_storage.url(name))
    resp["Cache-Control"] = "public, max-age=86400"  # not for ever: the hashed name changes with the file
    return resp
