"""Browser UI: the table list, registering a table, starting a sync, a job's status, and the
addresses of static files.

Every view requires a signed-in user (tables.web.base.ui.page). The table page's tabs have their own
modules: overview_views (Overview, Timeline & growth, Restores, the owner card),
history_views (History and its export), versions_views (Versions and a version's page),
compare_views (Compare); restore pages are restore_views, the data-job sections of the
version and diff pages rows_views.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.paginator import Paginator
from django.db.models import F, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from tables import plugins
from tables.models import Job, JobKind, JobStatus, SyncState, Table
from tables.services.access import roles
from tables.services.catalog.registration import check_location, register_table
from tables.services.errors import ServiceError, error_body
from tables.services.jobs import lifecycle as jobs
from tables.services.ops import fleet
from tables.services.sync.store import start_sync
from tables.web.base.forms import RegisterTableForm
from tables.web.base.ui import (
    MAX_ID,
    PageError,
    context,
    focus_first_error,
    job_param,
    page,
    query,
    table_of,
)

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
    "-commit": ("-last_commit_ms", "committed most recently"),
    "commit": ("last_commit_ms", "committed longest ago"),
}
TABLE_STATUSES = {
    "": "any",
    "error": "sync error",
    "never": "never synced",
    "managed": "managed by deltaweb",
}


def _table_rows(request: HttpRequest) -> tuple[Any, dict[str, Any]]:
    """The table list's query: search by name or location, a status, an order; and the
    form's values as given (unknown status or sort: the defaults)."""
    search = request.GET.get("q", "").strip()[:200]
    status = request.GET.get("status", "")
    added = {f.key: f for f in plugins.table_filters()}  # the plug-ins' (tables.plugins)
    statuses = {**TABLE_STATUSES, **{k: f.label for k, f in added.items() if k not in TABLE_STATUSES}}
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
    elif status in added:
        # a plug-in's filter may join rows of its own (several of one table): only
        # then DISTINCT, which over every column of 100,000 tables costs more than the rest
        qs = added[status].keep(qs).distinct()
    field = TABLE_SORTS[sort][0]
    desc = field.startswith("-")
    order = F(field.lstrip("-")).desc(nulls_last=True) if desc else F(field).asc(nulls_last=True)
    qs = qs.order_by(order, "name")  # each order has its index (Table.Meta.indexes)
    form = {
        "q": search,
        "status": status,
        "sort": sort,
        "statuses": list(statuses.items()),
        "sorts": [(k, label) for k, (_f, label) in TABLE_SORTS.items()],
        "active": bool(search or status),
    }
    return qs, form


def error_cause(name: str, error: str) -> str:
    """A sync error as the list's Error cell says it, the cause first. The stored message
    starts with the table's name (its location replaced by it, as users know it) or a path
    inside it, which the row already says: the cause follows, with the file it is about."""
    if error.startswith(name + ": "):
        return error[len(name) + 2 :]
    if error.startswith(name + "/"):
        where, sep, cause = error.partition(": ")
        if sep and cause:
            return f"{cause} (in {where.removeprefix(name + '/')})"
    return error


@page
@require_GET
def table_list(request: HttpRequest) -> HttpResponse:
    qs, form = _table_rows(request)
    page_obj = Paginator(qs, TABLES_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = list(page_obj.object_list)
    figures = fleet.page_figures(rows)
    columns = plugins.table_columns()
    counts = [c.counts([t.pk for t in rows]) if rows else {} for c in columns]
    for t in rows:
        t.figures = figures[t.pk]
        t.plugin_values = [found.get(t.pk, 0) for found in counts]
        t.error_cause = error_cause(t.name, t.last_error)
    job = job_param(request, "job")
    if job is not None and job.kind == JobKind.SYNC and job.status == JobStatus.SUCCEEDED:
        job = None  # the list shows the state it left
    return render(
        request,
        "tables/table_list.html",
        context(
            request,
            tables=rows,
            page_obj=page_obj,
            query=query(request, ("page", "job")),
            filters=form,
            any_tables=form["active"] or page_obj.paginator.count > 0 or Table.objects.exists(),
            plugin_columns=[c.header for c in columns],
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
    status, existing = 200, None
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                table = register_table(data["name"], data["location"], data.get("description", ""), user=request.user)
            except ServiceError as exc:
                field = "name" if exc.code in ("invalid_name", "duplicate") else "location"
                form.add_error(field, exc.message)
                existing = exc.extra.get("table")
            else:
                return _start_sync_and_redirect(request, table, reverse("tables:table_detail", args=[table.slug]))
        status = 400
        focus_first_error(form)
    return render(request, "tables/register.html", context(request, form=form, existing=existing), status=status)


@login_required
@require_GET
def register_check(request: HttpRequest) -> JsonResponse:
    """The register form's location, checked as it is typed: {"ok": true, "location": the table
    root} or {"ok": false, "code", "message"} with the words the form would show on submit."""
    if not roles.can_register(request.user):
        return JsonResponse(error_body("permission_denied", "Registering tables needs a role."), status=403)
    raw = request.GET.get("location", "").strip()[:4096]
    if not raw:
        body: dict[str, Any] = {"ok": False, "code": "invalid_location", "message": "Type the table's location."}
    else:
        try:
            body = {"ok": True, "location": check_location(raw)}
        except ServiceError as exc:
            body = {"ok": False, "code": exc.code, "message": exc.message, "table": exc.extra.get("table")}
    resp = JsonResponse(body)
    resp["Cache-Control"] = "no-store"
    return resp


def _start_sync_and_redirect(request: HttpRequest, table: Table, target: str) -> HttpResponse:
    job = start_sync(table, user=request.user)
    job.refresh_from_db()  # outside a transaction the job was enqueued (or run, when eager) already
    if job.status == JobStatus.FAILED:
        messages.error(request, f"The sync of {table.name} could not start: {job.error}")
    elif job.status == JobStatus.SUCCEEDED:
        messages.success(request, f"{table.name} synced.")
        return redirect(target)  # the page shows the state the sync left: no progress to follow
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


@page
@require_POST
def job_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress box's Cancel: the API's cancel (jobs.request_cancel: the user who started the
    job, an approver or staff), then back to the page it was pressed on."""
    job = Job.objects.filter(pk=pk).first() if pk <= MAX_ID else None
    if job is None:
        raise PageError(f"There is no job {pk}.", 404)
    target = request.POST.get("next") or reverse("tables:table_list")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=False):
        target = reverse("tables:table_list")
    try:
        job = jobs.request_cancel(job, request.user)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.info(request, f"Job #{job.pk}: " + ("cancelled." if job.is_terminal else "cancelling…"))
    return redirect(target)


@login_required
@require_GET
def job_status(request: HttpRequest, pk: int) -> JsonResponse:
    job = Job.objects.select_related("table").filter(pk=pk).first() if pk <= MAX_ID else None
    if job is None:
        resp = JsonResponse(error_body("not_found", f"There is no job {pk}."), status=404)
    else:
        payload = job_payload(job)
        if job.kind == JobKind.SYNC and job.table_id:
            # the table's sync state as it is now: the page's label follows the job's end (job.js)
            t = job.table
            payload["tableSync"] = {"state": t.sync_state, "label": t.get_sync_state_display()}
        resp = JsonResponse(payload)
    resp["Cache-Control"] = "no-store"
    return resp


# --- plotly.js and the favicon: static files (tables/web/base/staticfiles.py), hashed and compressed -----


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


def job_payload(job) -> dict[str, Any]:
    return {
        "id": job.pk,
        "kind": job.kind,
        "table": job.table.slug if job.table_id else None,
        "status": job.status,
        "stage": job.stage,
        "done": job.done,
        "total": job.total,
        "error": job.error,
        "terminal": job.is_terminal,
    }
