"""Browser UI: server-rendered pages over the services.

Every view requires a signed-in user and calls the services for anything about a table's
log; errors a user can meet (ServiceError, DeltaError) are shown on a page with a status
code, never as a traceback.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.paginator import Paginator
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import etag, require_GET, require_http_methods, require_POST

from tables.delta import errors as delta_errors
from tables.delta.timestamps import format_ms

from . import charts, pages, roles, services
from .forms import HistoryFilterForm, RegisterTableForm, RestoreDecisionForm, RestoreRequestForm, TimeTravelForm
from .models import Anomaly, Commit, Job, JobStatus, RestoreRequest, RestoreStatus, SyncState, Table

MAX_ID = 2**63 - 1  # the largest version or id the database can hold
HISTORY_PAGE_SIZE = 50
FILES_PAGE_SIZE = 100


class PageError(Exception):
    """A page that cannot be shown; rendered as the error page with `status`."""

    def __init__(self, message: str, status: int = 400, table: Table | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.table = message, status, table


def error_page(request: HttpRequest, message: str, status: int, table: Table | None = None) -> HttpResponse:
    return render(
        request,
        "tables/error.html",
        {"message": message, "status": status, "table": table, "can_register": roles.can_register(request.user)},
        status=status,
    )


def page(view):
    """Sign-in required; PageError, ServiceError and DeltaError become an error page."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except PageError as exc:
            return error_page(request, exc.message, exc.status, exc.table)
        except services.ServiceError as exc:
            return error_page(request, exc.message, exc.status)
        except delta_errors.DeltaError as exc:
            return error_page(request, str(exc), pages.delta_error_status(exc))

    return login_required(wrapper)


def _table(slug: str) -> Table:
    table = Table.objects.filter(slug=slug).first()
    if table is None:
        raise PageError(f"There is no table '{slug}'. It may have been removed or renamed.", 404)
    return table


def _context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        "can_register": roles.can_register(request.user),
        "can_request_restore": roles.can_request_restore(request.user),
        **extra,
    }


def _job_for(request: HttpRequest, table: Table | None = None) -> Job | None:
    raw = request.GET.get("job", "")
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_ID:
        return None
    qs = Job.objects.filter(pk=int(raw))
    if table is not None:
        qs = qs.filter(table=table)
    return qs.first()


def _query(request: HttpRequest, drop: tuple[str, ...] = ("page",)) -> str:
    """The current query string without `drop`, for pagination links."""
    q = request.GET.copy()
    for key in drop:
        q.pop(key, None)
    return q.urlencode()


# --- table list and registration -------------------------------------------------------


@page
@require_GET
def table_list(request: HttpRequest) -> HttpResponse:
    tables = list(Table.objects.all())
    job = _job_for(request)
    return render(request, "tables/table_list.html", _context(request, tables=tables, job=job))


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
                table = services.register_table(
                    data["name"], data["location"], data.get("description", ""), user=request.user
                )
            except services.ServiceError as exc:
                field = "name" if exc.code in ("invalid_name", "duplicate") else "location"
                form.add_error(field, exc.message)
            else:
                return _start_sync_and_redirect(request, table, reverse("tables:table_detail", args=[table.slug]))
        status = 400
        _focus_first_error(form)
    return render(request, "tables/register.html", _context(request, form=form), status=status)


def _focus_first_error(form) -> None:
    """Move autofocus to the first field with an error, so the keyboard lands there."""
    invalid = [name for name in form.fields if name in form.errors]
    if not invalid:
        return
    for name, field in form.fields.items():
        field.widget.attrs.pop("autofocus", None)
        if name == invalid[0]:
            field.widget.attrs["autofocus"] = True


def _start_sync_and_redirect(request: HttpRequest, table: Table, target: str) -> HttpResponse:
    job = services.start_sync(table, user=request.user)
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
    table = _table(slug)
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
    synced = table.last_synced_at.timestamp() if table.last_synced_at else None
    key = f"charts:{table.pk}:{table.last_synced_version}:{synced}"
    data = cache.get(key)
    if data is None:
        data = {**charts.table_charts(table), "config": charts.CONFIG}
        cache.set(key, data, 3600)
    resp = JsonResponse(data)
    resp["Cache-Control"] = "private, no-cache"
    return resp


def _history(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The filter form and the rendered history table; the table is cached until the next
    sync (the same page of the same query is the same for every reader)."""
    form = HistoryFilterForm(request.GET or None)
    filtered = form.active if form.is_bound and form.is_valid() else False
    version_key = f"{table.pk}:{table.last_synced_version}:{table.last_synced_at and table.last_synced_at.timestamp()}"
    operations = cache.get(f"ops:{version_key}")
    if operations is None:
        operations = [
            o
            for o in Commit.objects.filter(table=table)
            .order_by("operation")
            .values_list("operation", flat=True)
            .distinct()[:200]
            if o
        ]
        cache.set(f"ops:{version_key}", operations, 3600)
    query = _query(request, ("page", "as_of", "job"))
    html_key = f"hist:{version_key}:{query}:{request.GET.get('page', '')}"
    html = cache.get(html_key)
    if html is None:
        qs = Commit.objects.filter(table=table).order_by("-version").defer("commit_info")
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            if data.get("operation"):
                qs = qs.filter(operation__iexact=data["operation"].strip())
            if data.get("version_from") is not None:
                qs = qs.filter(version__gte=data["version_from"])
            if data.get("version_to") is not None:
                qs = qs.filter(version__lte=data["version_to"])
            start, end = form.timestamp_range()
            if start is not None:
                qs = qs.filter(timestamp__gte=start)
            if end is not None:
                qs = qs.filter(timestamp__lt=end)
        page_obj = Paginator(qs, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
        rows = [pages.history_row(c) for c in page_obj.object_list]
        html = render_to_string(
            "tables/_history_rows.html",
            {"table": table, "page_obj": page_obj, "rows": rows, "filtered": filtered, "query": query},
        )
        cache.set(html_key, html, 3600)
    return {
        "filter_form": form,
        "filtered": filtered,
        "history_html": mark_safe(html),  # rendered above by our own template, autoescaped
        "operations": operations,
        "query": query,
    }


def _time_travel(request: HttpRequest, table: Table) -> dict[str, Any]:
    if "as_of" not in request.GET:
        return {"tt_form": TimeTravelForm(), "tt_result": None, "tt_error": None}
    form = TimeTravelForm({"as_of": request.GET.get("as_of", "")})
    form.fields["as_of"].widget.attrs["autofocus"] = True  # to refine the answer from the keyboard
    result = error = None
    if form.is_valid():
        try:
            result = services.resolve(table, form.cleaned_data["as_of"])
        except services.ServiceError as exc:
            error = exc.message
        except delta_errors.DeltaError as exc:
            error = str(exc)
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
        }
    return {"tt_form": form, "tt_result": result, "tt_error": error}


@page
@require_GET
def table_detail(request: HttpRequest, slug: str) -> HttpResponse:
    table = _table(slug)
    ctx = _context(request, table=table, job=_job_for(request, table))
    ctx.update(_history(request, table))
    ctx.update(_time_travel(request, table))
    ctx["plotly_version"] = plotly_version()
    # the first anomalies on the page; all of them in the API's timeline
    ctx["anomalies"] = list(Anomaly.objects.filter(table=table)[:ANOMALIES_SHOWN])
    ctx["anomaly_count"] = Anomaly.objects.filter(table=table).count()
    ctx["anomalies_shown"] = ANOMALIES_SHOWN
    ctx["ict_boundary"] = charts.ict_boundary(table)
    ctx["ict_enablement_time"] = format_ms(table.ict_enablement_timestamp)
    ctx["synced"] = table.last_synced_version is not None
    ctx["syncing"] = table.sync_state in (SyncState.QUEUED, SyncState.SYNCING)
    latest = table.last_synced_version
    ctx["diff_default"] = (max((table.earliest_version or 0), latest - 1), latest) if latest is not None else None
    ctx["restore_form"] = RestoreRequestForm(auto_id="restore_%s")
    ctx["restores"] = list(
        RestoreRequest.objects.filter(table=table).select_related("requested_by").defer("plan", "result")[:10]
    )
    ctx.update(_owner_card(request, table))
    status = 400 if ctx["tt_error"] else 200
    return render(request, "tables/table_detail.html", ctx, status=status)


def _owner_card(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The commit-owner card of a table deltaweb manages (None for any other table)."""
    from .owner_db import summary
    from .owner_services import managed_of

    mt = managed_of(table)
    if mt is None or mt.state == "proposed":
        return {"owner": None}
    return {"owner": summary(mt), "can_freeze": roles.can_approve(request.user)}


@page
@require_POST
def managed_freeze(request: HttpRequest, slug: str) -> HttpResponse:
    """Approvers freeze (every commit refused, with the reason) or unfreeze a managed table."""
    from . import owner_services

    table = _table(slug)
    if not roles.can_approve(request.user):
        raise PageError("Freezing a table needs the approver role.", 403, table)
    try:
        if request.POST.get("action") == "unfreeze":
            owner_services.unfreeze(table, request.user)
            messages.success(request, f"{table.name} unfrozen: commits are accepted again.")
        else:
            owner_services.freeze(table, request.user, request.POST.get("reason", ""))
            messages.success(request, f"{table.name} frozen: every commit is refused until it is unfrozen.")
    except services.ServiceError as exc:
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
        _total, files = services.version_files(self.table, self.version, start, stop - start)
        return pages.file_rows(files)


@page
@require_GET
def version_detail(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    table = _table(slug)
    if version > MAX_ID:
        raise PageError(f"Version {version} does not exist.", 404, table)
    try:
        summary = services.version_summary(table, version)
    except delta_errors.VersionNotFoundError as exc:
        raise PageError(str(exc), 404, table) from exc
    md = summary["metadata"]
    protocol = summary["protocol"]
    files = _VersionFiles(table, version, summary["numFiles"])
    page_obj = Paginator(files, FILES_PAGE_SIZE).get_page(request.GET.get("page"))
    commit = Commit.objects.filter(table=table, version=version).first()
    ctx = _context(
        request,
        table=table,
        version=version,
        summary=summary,
        commit=pages.history_row(commit) if commit else None,
        timestamp=format_ms(summary.get("timestamp")),
        timestamp_source=pages.source_label(summary["timestampSource"]) if summary.get("timestampSource") else None,
        schema=pages.schema_rows(md.get("schema"), md.get("partitionColumns") or []),
        partition_columns=md.get("partitionColumns") or [],
        properties=sorted((md.get("configuration") or {}).items()),
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
    from .rows_views import version_rows_context

    ctx.update(version_rows_context(request, table, version))
    return render(request, "tables/version_detail.html", ctx)


# --- diff ------------------------------------------------------------------------------


def _version_param(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name, "").strip()
    if raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_ID:
        raise PageError(f"'{name}' must be a version number (0 or more), not '{raw[:40]}'.", 400)
    return int(raw)


@page
@require_GET
def diff_view(request: HttpRequest, slug: str) -> HttpResponse:
    table = _table(slug)
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
    ctx = _context(request, table=table, v_from=v_from, v_to=v_to, result=None)
    if v_from is None or v_to is None:
        ctx["notice"] = "The table has not been synced yet: enter two versions to compare."
        return render(request, "tables/diff.html", ctx)
    try:
        result = services.diff(table, v_from, v_to)
    except services.ServiceError as exc:
        raise PageError(exc.message, exc.status, table) from exc
    except delta_errors.DeltaError as exc:
        raise PageError(str(exc), pages.delta_error_status(exc), table) from exc
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
        commits=pages.diff_commit_rows(result["commits"]),
        commits_expected=max(0, v_to - v_from),
    )
    from .rows_views import diff_rows_context

    ctx.update(diff_rows_context(request, table, v_from, v_to))
    return render(request, "tables/diff.html", ctx)


# --- plotly.js, served from the installed plotly package (no CDN, not committed) ----------


def _plotly_file() -> Path | None:
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    return path if path.is_file() else None


ANOMALIES_SHOWN = 50


@functools.cache
def plotly_version() -> str:
    try:
        return importlib.metadata.version("plotly")
    except importlib.metadata.PackageNotFoundError:
        return "missing"


@login_required
@require_GET
@etag(lambda request: f'"plotly-{plotly_version()}"')
def plotly_js(request: HttpRequest) -> HttpResponse:
    path = _plotly_file()
    if path is None:
        return HttpResponse(
            "// plotly.js is not installed (pip install plotly)\n", status=404, content_type="text/javascript"
        )
    resp = FileResponse(path.open("rb"), content_type="text/javascript; charset=utf-8")
    resp["Cache-Control"] = "private, max-age=2592000, immutable"
    return resp


# --- restores ----------------------------------------------------------------------------

RESTORES_PAGE_SIZE = 50
_RESTORE_FIELDS = {"invalid_reason": "reason", "invalid_timestamp": "timestamp", "timestamp_out_of_range": "timestamp"}


def _restore(pk: int) -> RestoreRequest:
    qs = RestoreRequest.objects.select_related("table", "requested_by", "approver")
    req = qs.filter(pk=pk).first() if pk <= MAX_ID else None
    if req is None:
        raise PageError(f"There is no restore request #{pk}.", 404)
    return req


@page
@require_GET
def restore_list(request: HttpRequest) -> HttpResponse:
    qs = RestoreRequest.objects.select_related("table", "requested_by", "approver").defer("plan", "result")
    waiting = request.GET.get("waiting") == "1"
    if waiting:
        qs = qs.filter(status__in=RestoreStatus.awaiting_approval())
    page_obj = Paginator(qs, RESTORES_PAGE_SIZE).get_page(request.GET.get("page"))
    ctx = _context(request, page_obj=page_obj, waiting=waiting, query=_query(request))
    return render(request, "tables/restore_list.html", ctx)


@page
@require_http_methods(["GET", "POST"])
def restore_new(request: HttpRequest, slug: str) -> HttpResponse:
    table = _table(slug)
    if not roles.can_request_restore(request.user):
        raise PageError(
            "Requesting a restore needs the analyst or approver role; ask an administrator to add you to one.",
            403,
            table,
        )
    initial = {"version": request.GET["version"]} if request.GET.get("version", "").isdigit() else {}
    form = RestoreRequestForm(request.POST if request.method == "POST" else None, initial=initial)
    status, missing = 200, None
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                req = services.request_restore(
                    table,
                    request.user,
                    reason=data["reason"],
                    version=data["version"],
                    timestamp=data["timestamp"] or None,
                    ignore_missing_files=data["ignore_missing_files"],
                    allow_protocol_downgrade=data["allow_protocol_downgrade"],
                )
            except services.ServiceError as exc:
                if exc.status == 403:
                    raise
                status = exc.status
                missing = exc.extra.get("files")
                if missing:
                    form.add_error(
                        None,
                        f"{exc.extra.get('missingCount', len(missing))} file(s) of the version to restore are "
                        "missing from storage (vacuumed or deleted). Restore a more recent version, or tick "
                        "“Ignore missing files” to restore without them.",
                    )
                else:
                    form.add_error(_RESTORE_FIELDS.get(exc.code), exc.message)
            else:
                messages.success(request, f"Restore #{req.pk} requested; an approver must approve it.")
                return redirect("tables:restore_detail", req.pk)
        _focus_first_error(form)
    ctx = _context(request, table=table, form=form, missing_files=missing)
    return render(request, "tables/restore_form.html", ctx, status=status)


@page
@require_GET
def restore_detail(request: HttpRequest, pk: int) -> HttpResponse:
    req = _restore(pk)
    own = req.requested_by_id is not None and req.requested_by_id == request.user.pk
    ctx = _context(
        request,
        req=req,
        table=req.table,
        plan=pages.restore_view(req.plan),
        events=list(req.events.select_related("actor")),
        can_decide=req.awaiting_approval and roles.can_approve(request.user) and not own,
        own_request=own and roles.can_approve(request.user) and req.awaiting_approval,
        decision_form=RestoreDecisionForm(initial={"fingerprint": req.plan_fingerprint}),
        verification=req.verification or {},
        result=req.result or {},
    )
    return render(request, "tables/restore_detail.html", ctx)


def _decide(request: HttpRequest, pk: int, approve: bool) -> HttpResponse:
    req = _restore(pk)
    form = RestoreDecisionForm(request.POST)
    if not form.is_valid():
        raise PageError("The comment is too long (at most 5000 characters).", 400, req.table)
    data = form.cleaned_data
    try:
        if approve:
            services.approve_restore(req, request.user, data["comment"], data["fingerprint"] or None)
            messages.success(request, f"Restore #{req.pk} approved; it is queued for a worker.")
        else:
            services.reject_restore(req, request.user, data["comment"])
            messages.success(request, f"Restore #{req.pk} rejected.")
    except services.ServiceError as exc:
        if exc.status in (401, 403, 404):
            raise
        messages.error(request, exc.message)  # a missing comment, a decision made meanwhile
    return redirect("tables:restore_detail", req.pk)


@page
@require_POST
def restore_approve(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, approve=True)


@page
@require_POST
def restore_reject(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, approve=False)


@login_required
@require_GET
def restore_status(request: HttpRequest, pk: int) -> JsonResponse:
    req = RestoreRequest.objects.defer("plan", "result").filter(pk=pk).first() if pk <= MAX_ID else None
    if req is None:
        resp = JsonResponse({"error": f"There is no restore request {pk}."}, status=404)
    else:
        resp = JsonResponse(pages.restore_payload(req))
    resp["Cache-Control"] = "no-store"
    return resp
