"""The table page's Overview, Timeline & growth and Restores tabs, the charts' JSON and the
commit-owner card (freeze and unfreeze of a table deltaweb manages).

The Overview also sends links of the one-page table view from before the tabs to their tab.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from tables import plugins
from tables.models import Anomaly, RestoreRequest, RestoreStatus, Table
from tables.services.access import roles
from tables.services.access.hot_queries import table_row
from tables.services.errors import ServiceError, error_body
from tables.services.history.query import CACHE_SECONDS, has_expired, history, synced_key
from tables.services.history.retention import effective_retention
from tables.services.managed import use_cases as owner_services
from tables.services.owner.access import managed_of
from tables.services.owner.summary import summary as owner_summary
from tables.services.pins.queries import pins_by_version
from tables.services.sharing import records as sharing_records
from tables.services.sync import vanished
from tables.services.versions.reachability import cache_epoch
from tables.services.versions.row_count import latest_row_count
from tables.web.base import charts
from tables.web.base.forms import RestoreRequestForm
from tables.web.base.metadata import stored_metadata
from tables.web.base.ui import PageError, page, table_of
from tables.web.tabs.commit_rows import history_row
from tables.web.tabs.frame import REACH_PENDING, reach_by_version, tab_context

ANOMALIES_SHOWN = 50

# query parameters of the one-page table view before it had tabs: old links land on their tab
_HISTORY_KEYS = ("operation", "version_from", "version_to", "date_from", "date_to", "page", "sort", "cols")
_VERSIONS_KEYS = ("as_of", "vacuum_retention", "allow_latest", "allow_earliest")
LAST_COMMITS = 5


def _reach_summary(table: Table) -> list[dict[str, Any]] | None:
    """How many versions are in each reachability state (the timeline's bands), in words;
    None while the answer is being computed."""
    reach = reach_by_version(table)
    if reach is None:
        return None
    counts: dict[str, int] = {}
    for first, last, entry in reach.runs() if reach else ():
        state = charts.band_state(entry)
        counts[state] = counts.get(state, 0) + last - first + 1
    kept = []  # the versions the table lost that a pin keeps: readable, from the pin
    for version in sorted(getattr(reach, "pins", None) or {}):
        entry = reach.get(version)
        if entry is not None and entry.get("pin"):
            state = charts.band_state({**entry, "readable": False})
            counts[state] = counts.get(state, 0) - 1
            kept.append({"version": version, "name": entry["pin"].name})
    out = [
        {"state": state, "label": label, "count": counts[state]}
        for state, (label, _rgb) in charts.BAND_STATES.items()
        if counts.get(state)
    ]
    if kept:
        out.append({"state": "pinned", "label": "kept by a pin (read from the pin store)", "count": len(kept)})
    return out


@page
@require_GET
def table_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """The Overview tab: the table now, its timestamps, what can still be read, its last commits."""
    table = table_of(slug)
    for keys, name in ((_VERSIONS_KEYS, "tables:table_versions"), (_HISTORY_KEYS, "tables:table_history")):
        if any(k in request.GET for k in keys):
            return redirect(f"{reverse(name, args=[table.slug])}?{request.GET.urlencode()}")
    ctx = tab_context(request, table, "overview")
    ctx["last_commits"] = [history_row(c) for c in history(table)[:LAST_COMMITS]]
    ctx["reach_summary"] = _reach_summary(table) if ctx["synced"] else []
    ctx["reach_pending"] = REACH_PENDING if ctx["reach_summary"] is None else ""
    ctx["pinned_versions"] = sorted(pins_by_version(table))
    ctx["retention"] = effective_retention(table)
    ctx["anomaly_count"] = Anomaly.objects.filter(table=table).count()
    ctx["has_expired"] = has_expired(table)
    ctx["open_restores"] = RestoreRequest.objects.filter(
        table=table, status__in=RestoreStatus.awaiting_approval() | RestoreStatus.in_flight()
    ).count()
    ctx.update(_owner_card(request, table))
    ctx.update(stored_metadata(table.latest_metadata))  # columns, partitioning, properties
    ctx["row_count"] = _row_count(table) if ctx["synced"] else None
    ctx["plugin_panels"] = [(p.template, p.context(table)) for p in plugins.overview_panels()]
    ctx["shared_as"] = sharing_records.shared_as(table)
    ctx["recipient_queries"] = list(sharing_records.recent(table))
    return render(request, "tables/table_overview.html", ctx)


def _row_count(table: Table) -> dict[str, Any]:
    """The latest version's rows as the Overview says them: the count (the template separates
    the thousands), how many files were counted from their footers or could not be counted, or pending."""
    found = latest_row_count(table, wait=False)
    if found is None:
        return {"pending": True}
    if "error" in found:
        return {"error": found["error"]}
    return {
        **found,
        "unknown": found["files"] > 0 and found["unknownFiles"] == found["files"],
    }


@page
@require_GET
def table_charts_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The Timeline & growth tab: the charts (fetched as JSON) and the anomalies."""
    table = table_of(slug)
    ctx = tab_context(request, table, "charts")
    # the first anomalies on the page; all of them in the API's timeline
    ctx["anomalies"] = list(Anomaly.objects.filter(table=table)[:ANOMALIES_SHOWN])
    ctx["anomaly_count"] = Anomaly.objects.filter(table=table).count()
    ctx["anomalies_shown"] = ANOMALIES_SHOWN
    ctx["ict_boundary"] = charts.ict_boundary(table)
    return render(request, "tables/table_charts.html", ctx)


@login_required
@require_GET
def table_charts_json(request: HttpRequest, slug: str) -> JsonResponse:
    """The table page's figures, fetched by the page after it renders and cached until the
    next sync: a 100,000-version table's page stays small and fast."""
    table = table_row(slug=slug)
    if table is None:
        return JsonResponse(error_body("not_found", f"There is no table '{slug[:100]}'."), status=404)
    # the reachability bands move with the clock; a look at the files may mark a removal after the sync
    key = f"charts:{synced_key(table)}:{cache_epoch()}:{vanished.events_token(table)}"
    data = cache.get(key)
    if data is None:
        data = {**charts.table_charts(table), "config": charts.CONFIG}
        if not data.get("bandsPending"):
            cache.set(key, data, CACHE_SECONDS)
    resp = JsonResponse(data)
    resp["Cache-Control"] = "private, no-cache"
    return resp


@page
@require_GET
def table_restores(request: HttpRequest, slug: str) -> HttpResponse:
    """The Restores tab: the request form and the table's requests."""
    table = table_of(slug)
    ctx = tab_context(request, table, "restores")
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
