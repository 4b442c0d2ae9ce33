"""Browser UI of restores: the list, a request's form and page, and the approver's decision.

Requesting, approving, rejecting and withdrawing call the same use cases as the API and the admin
(tables.services.restores.requests), so the server's rules hold here too.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from tables.models import RestoreRequest, RestoreStatus
from tables.services.access import roles
from tables.services.errors import ServiceError, error_body
from tables.services.restores.requests import (
    approve_restore,
    pin_for_restore,
    reject_restore,
    request_restore,
    selected_partitions,
    withdraw_restore,
)
from tables.services.versions.reachability import version_reachability
from tables.web.approvals.restore_plan import restore_view
from tables.web.base.forms import RestoreDecisionForm, RestoreRequestForm
from tables.web.base.ui import MAX_ID, PageError, context, focus_first_error, page, query, table_of

RESTORES_PAGE_SIZE = 50
RECOVERED_SHOWN = 200  # recovered objects listed on a request's page; the API has them all
_RESTORE_FIELDS = {
    "invalid_reason": "reason",
    "invalid_timestamp": "timestamp",
    "timestamp_out_of_range": "timestamp",
    "invalid_predicate": "where",
    "version_not_recoverable": "recover_files_first",
    "store_not_versioned": "recover_files_first",
}


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
    ctx = context(request, page_obj=page_obj, waiting=waiting, query=query(request))
    return render(request, "tables/restore_list.html", ctx)


@page
@require_http_methods(["GET", "POST"])
def restore_new(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    if not roles.can_request_restore(request.user):
        raise PageError(
            "Requesting a restore needs the analyst or approver role; ask an administrator to add you to one.",
            403,
            table,
        )
    initial = {"version": request.GET["version"]} if request.GET.get("version", "").isdigit() else {}
    form = RestoreRequestForm(request.POST if request.method == "POST" else None, initial=initial)
    status, missing, selected = 200, None, None
    if request.method == "POST" and "preview_partitions" in request.POST:
        selected, status = _preview_partitions(table, form)
    elif request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                req = request_restore(
                    table,
                    request.user,
                    reason=data["reason"],
                    version=data["version"],
                    timestamp=data["timestamp"] or None,
                    ignore_missing_files=data["ignore_missing_files"],
                    allow_protocol_downgrade=data["allow_protocol_downgrade"],
                    where=data.get("where") or None,
                    recover_files_first=data["recover_files_first"],
                )
            except ServiceError as exc:
                if exc.status == 403:
                    raise
                status = exc.status
                missing = exc.extra.get("files")
                if missing and exc.extra.get("fromPin"):  # ignoring them would not help: say what happened
                    form.add_error(None, exc.message)
                elif missing:
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
        focus_first_error(form)
    asked = request.POST.get("version") or request.GET.get("version")
    show_recover = _recoverable(table, asked)
    ctx = context(
        request, table=table, form=form, missing_files=missing, selected=selected, show_recover=show_recover,
        from_pin=_from_pin(table, asked),
    )  # fmt: skip
    return render(request, "tables/restore_form.html", ctx, status=status)


def _preview_partitions(table, form: RestoreRequestForm) -> tuple[dict | None, int]:
    """What the predicate selects, nothing requested: only the predicate is checked (a listing
    needs no reason or version yet), the other fields keep what was typed, without errors."""
    form.is_valid()
    for name in [n for n in form.errors if n != "where"]:
        del form.errors[name]
    where = (form.cleaned_data.get("where") or "").strip()
    if "where" in form.errors:
        return None, 400
    if not where:
        form.add_error("where", "Type a predicate on partition columns to see the partitions it selects.")
        return None, 400
    try:
        return selected_partitions(table, where), 200
    except ServiceError as exc:
        form.add_error("where", exc.message)
        return None, exc.status


def _from_pin(table, raw: str | None) -> dict | None:
    """The pin a restore to the version the form names would read it from, when the table no
    longer gives it (the one rule, tables.services.versions.source); None otherwise."""
    if not raw or not raw.strip().isdigit() or int(raw) > MAX_ID:
        return None
    try:
        pin = pin_for_restore(table, int(raw))
    except ServiceError:
        return None
    return {"name": pin.name, "version": pin.version, "files": pin.files, "bytes": pin.bytes} if pin else None


def _recoverable(table, raw: str | None) -> bool:
    """Whether the version the form names is recoverable (its "recover files first" box is
    shown only then); False while a long log's answer is computed."""
    if not raw or not raw.strip().isdigit() or int(raw) > MAX_ID:
        return False
    try:
        entry = version_reachability(table, int(raw), wait=False)
    except ServiceError:
        return False
    return bool(entry and entry.get("recoverable"))


@page
@require_GET
def restore_detail(request: HttpRequest, pk: int) -> HttpResponse:
    req = _restore(pk)
    own = req.requested_by_id is not None and req.requested_by_id == request.user.pk
    ctx = context(
        request,
        req=req,
        table=req.table,
        plan=restore_view(req.plan),
        recovery=(req.plan or {}).get("recovery"),
        recovered=list(req.recovered_objects.all()[:RECOVERED_SHOWN]) if req.recover_files_first else [],
        events=list(req.events.select_related("actor")),
        can_decide=req.awaiting_approval and roles.can_approve(request.user) and not own,
        own_request=own and roles.can_approve(request.user) and req.awaiting_approval,
        can_withdraw=own and req.awaiting_approval,
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
            approve_restore(req, request.user, data["comment"], data["fingerprint"] or None)
            messages.success(request, f"Restore #{req.pk} approved; it is queued for a worker.")
        else:
            reject_restore(req, request.user, data["comment"])
            messages.success(request, f"Restore #{req.pk} rejected.")
    except ServiceError as exc:
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


@page
@require_POST
def restore_withdraw(request: HttpRequest, pk: int) -> HttpResponse:
    req = _restore(pk)
    form = RestoreDecisionForm(request.POST)
    if not form.is_valid():
        raise PageError("The comment is too long (at most 5000 characters).", 400, req.table)
    try:
        withdraw_restore(req, request.user, form.cleaned_data["comment"])
        messages.success(request, f"Restore #{req.pk} withdrawn.")
    except ServiceError as exc:
        if exc.status in (401, 403, 404):
            raise
        messages.error(request, exc.message)  # decided meanwhile
    return redirect("tables:restore_detail", req.pk)


@login_required
@require_GET
def restore_status(request: HttpRequest, pk: int) -> JsonResponse:
    req = RestoreRequest.objects.defer("plan", "result").filter(pk=pk).first() if pk <= MAX_ID else None
    if req is None:
        resp = JsonResponse(error_body("not_found", f"There is no restore request {pk}."), status=404)
    else:
        resp = JsonResponse(restore_payload(req))
    resp["Cache-Control"] = "no-store"
    return resp


def restore_payload(req) -> dict[str, Any]:
    """The request page's polling answer (/restores/<id>.json)."""
    return {
        "id": req.pk,
        "status": req.status,
        "statusLabel": req.get_status_display(),
        "stage": req.stage,
        "done": req.done,
        "total": req.total,
        "error": req.error,
        "resultVersion": req.result_version,
        "terminal": req.is_terminal,
        "awaitingApproval": req.awaiting_approval,
    }
