"""The table page's Versions tab (open a version, time travel, what VACUUM would break, which
unreadable versions a versioned bucket can still recover) and a version's own page (its
snapshot, schema, properties, protocol and files)."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from tables.delta import errors as delta_errors
from tables.delta.history.reachability.compute import MAX_INTERVAL_TEXT
from tables.delta.history.timestamps import format_ms
from tables.models import Commit, Table
from tables.services.chain.look import state_of
from tables.services.errors import ServiceError, public_message
from tables.services.history.query import history
from tables.services.pins.queries import held_bytes, holding_pins
from tables.services.versions.reachability import parse_retention, table_reachability
from tables.services.versions.read import resolve, snapshot_at, version_files, version_summary
from tables.services.versions.unreadable import pin_refusal, unreadable_why
from tables.web.approvals.pins import pins_context
from tables.web.base.forms import TimeTravelForm
from tables.web.base.metadata import file_rows, metadata_context
from tables.web.base.sql import sql_snippets
from tables.web.base.ui import MAX_ID, PageError, context, page, table_of, version_param
from tables.web.data.rows import version_rows_context
from tables.web.tabs.commit_rows import history_row, reach_text
from tables.web.tabs.frame import REACH_PENDING, reach_by_version, tab_context

FILES_PAGE_SIZE = 100


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
            found = resolve(table, form.cleaned_data["as_of"], allow_latest=allow_latest, allow_earliest=allow_earliest)
            result = {**found.answer, "reachability": found.reachability}
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
            "requested_iso": format_ms(result["requestedTimestamp"]),
            "by_info": alts.get("commitInfoTimestamp"),
            "by_file": alts.get("fileModificationTime"),
            "sql": sql_snippets(table.location, result["version"], result["requestedTimestamp"]),
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
        forecast = data.forecast(FORECAST_SHOWN)
    except ServiceError as exc:
        error = public_message(exc.message, table)
    else:
        broken = forecast["breaksVersions"] if forecast else []
        result = {
            "count": forecast["count"] if forecast else 0,
            "versions": broken,
            "more": (forecast["count"] - len(broken)) if forecast else 0,
            "pins": _pins_held(table, set(broken)),
        }
    return {"vf_value": raw, "vf_result": result, "vf_error": error}


def _pins_held(table: Table, broken: set[int]) -> list[dict[str, Any]]:
    """Each pin that holds a version, with the bytes it alone keeps (its files the latest
    version no longer references: a VACUUM deletes them from the table, the pin store keeps
    them) and whether this VACUUM would have destroyed its version without it."""
    holding = holding_pins(table)
    if not holding:
        return []
    held = held_bytes(table, holding, snapshot_at(table))
    return [{"pin": p, "held": held.get(p.pk, 0), "saves": p.version in broken} for p in holding]


RECOVERABLE_SHOWN = 50  # versions listed on the tab; the reachability API has them all


def _recoverable(table: Table) -> dict[str, Any]:
    """The unreadable versions the bucket's noncurrent versions could make readable again
    (newest first), for the tab to mark: a restore to one can recover its files first."""
    reach = reach_by_version(table)
    found = reach.versions_where("recoverable") if reach else []
    return {"recoverable": found[:RECOVERABLE_SHOWN], "recoverable_more": max(0, len(found) - RECOVERABLE_SHOWN)}


VERSIONS_PAGE = 50  # rows of the version list at once (a collapsed range is one row)


class _VersionList:
    """Every version of the table, newest first, as the Versions tab lists it: one row per
    version the table or a pin gives, and one row per run of consecutive versions that can
    be read from neither and share why (e.g. "versions 12–1,260: files removed by VACUUM").
    A sequence for Paginator: its rows are made only for the page asked (a long log is a
    handful of runs, but 100,000 versions)."""

    def __init__(self, reach: Any) -> None:
        self.reach = reach
        self.segments: list[tuple[int, int, bool]] = []  # (newest, oldest, one row each), newest first
        pinned = {v for v in getattr(reach, "pins", {}) if (reach.get(v) or {}).get("pin")}
        for first, last, state in reach.runs():
            each = bool(state["readable"])
            if each:
                self._add(first, last, True)
                continue
            lo = first
            for v in sorted(p for p in pinned if first <= p <= last):  # a pin splits the run
                if lo <= v - 1:
                    self._add(lo, v - 1, False)
                self._add(v, v, True)
                lo = v + 1
            if lo <= last:
                self._add(lo, last, False)
        self.segments.reverse()
        self._count = sum((hi - lo + 1) if each else 1 for hi, lo, each in self.segments)

    def _add(self, first: int, last: int, each: bool) -> None:
        self.segments.append((last, first, each))

    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, item: slice) -> list[dict[str, Any]]:
        start, stop = item.start or 0, min(item.stop if item.stop is not None else self._count, self._count)
        out: list[tuple[int, int]] = []  # (newest, oldest) of each row
        at = 0
        for hi, lo, each in self.segments:
            size = (hi - lo + 1) if each else 1
            if at + size > start and at < stop:
                if each:
                    first_i, last_i = max(start - at, 0), min(stop - at, size)
                    out.extend((hi - i, hi - i) for i in range(first_i, last_i))
                else:
                    out.append((hi, lo))
            at += size
            if at >= stop:
                break
        return out


def _version_rows(table: Table, rows: list[tuple[int, int]], reach: Any) -> list[dict[str, Any]]:
    """A page of the version list: each version with its commit and state in words, each
    collapsed range with why its versions cannot be read and whether they can be restored."""
    singles = [hi for hi, lo in rows if hi == lo]
    commits = {c.version: c for c in Commit.objects.filter(table=table, version__in=singles).defer("commit_info")}
    out = []
    for hi, lo in rows:
        entry = reach.get(hi)
        if hi == lo and (entry is None or entry.get("readable")):
            c = commits.get(hi)
            out.append(
                {
                    "range": False,
                    "version": hi,
                    **(history_row(c, entry) if c else {"reach": entry}),  # |reach_text in the template
                }
            )
            continue
        why = unreadable_why(table, hi, entry) or {}
        vacuum = why.get("vacuum") or {}
        if entry.get("restorable"):
            restore = "a restore is still possible"
        elif entry.get("recoverable"):
            restore = "recoverable from the bucket's old object versions"
        else:
            restore = "not restorable"
        out.append({
            "range": True, "first": lo, "last": hi, "count": hi - lo + 1, "reason": entry.get("reason"),
            "why": why.get("why") or reach_text(entry)["title"],
            "vacuum_version": vacuum.get("version"), "vacuum_time": format_ms(vacuum.get("timestamp")),
            "restore": restore, "recoverable": bool(entry.get("recoverable")),
        })  # fmt: skip
    return out


def _all_versions(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The Versions tab's list of every version (pages of VERSIONS_PAGE rows)."""
    reach = reach_by_version(table)
    if not reach:  # being computed, or the log cannot be read now: the cached commits alone
        page_obj = Paginator(history(table), VERSIONS_PAGE).get_page(request.GET.get("page"))
        rows = [{"range": False, "version": c.version, **history_row(c)} for c in page_obj.object_list]
        return {"version_page": page_obj, "version_rows": rows, "versions_pending": reach is None}
    page_obj = Paginator(_VersionList(reach), VERSIONS_PAGE).get_page(request.GET.get("page"))
    return {"version_page": page_obj, "version_rows": _version_rows(table, list(page_obj.object_list), reach)}


@page
@require_GET
def table_versions(request: HttpRequest, slug: str) -> HttpResponse:
    """The Versions tab: open a version, time travel, what VACUUM would break."""
    table = table_of(slug)
    if "v" in request.GET:  # "open version": the version page, or the error on this tab
        raw = request.GET.get("v", "")
        version = version_param(raw, "version", table)
        return redirect("tables:version_detail", table.slug, version)
    ctx = tab_context(request, table, "versions")
    ctx.update(_time_travel(request, table))
    ctx.update(_vacuum_forecast(request, table))
    ctx.update(_recoverable(table))
    ctx.update(pins_context(request, table))
    ctx.update(_all_versions(request, table))
    status = 400 if ctx["tt_error"] else 200
    return render(request, "tables/table_versions.html", ctx, status=status)


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
        return file_rows(files)


@page
@require_GET
def version_detail(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    table = table_of(slug)
    if version > MAX_ID:
        raise PageError(f"Version {version} does not exist.", 404, table)
    try:
        summary = version_summary(table, version)
    except (delta_errors.VersionNotFoundError, delta_errors.StateReconstructionError, delta_errors.LogGapError) as exc:
        # the log lost it and no pin keeps it: say why, and which pin could have kept it
        why = unreadable_why(table, version) if version <= (table.last_synced_version or -1) else None
        raise PageError(why["text"] if why else str(exc), 404, table) from exc
    state = summary.state  # the core's summary: protocol, metadata, size
    md = state["metadata"]
    protocol = state["protocol"]
    files = _VersionFiles(table, version, state["numFiles"])
    page_obj = Paginator(files, FILES_PAGE_SIZE).get_page(request.GET.get("page"))
    commit = Commit.objects.filter(table=table, version=version).first()
    reach = (reach_by_version(table) or {}).get(version)  # {} while a long log's answer is computed
    kept_by = summary.pin or (reach or {}).get("pin")  # the pin it is read from
    unreadable = bool(reach) and not reach.get("readable") and not kept_by
    ctx = context(
        request,
        table=table,
        tab="versions",
        version=version,
        summary=state,
        commit=history_row(commit) if commit else None,
        timestamp=format_ms(summary.timestamp),
        timestamp_source=summary.timestamp_source or None,  # |source_label in the template
        **metadata_context(md.get("schema"), md.get("partitionColumns") or [], md.get("configuration") or {}),
        sql_snippets=sql_snippets(table.location, version, summary.timestamp),
        protocol=protocol,
        reader_features=protocol.get("readerFeatures"),
        writer_features=protocol.get("writerFeatures"),
        created_time=format_ms(md.get("createdTime")),
        commit_info=summary.commit_info,  # |pretty_json in the template
        checksum=summary.checksum,  # each mismatch's values |compact_json in the template
        set_transactions=state.get("setTransactions") or [],  # each |compact_json
        domain_metadata=state.get("domainMetadata") or [],
        page_obj=page_obj,
        seen=state_of(table, version),
        reach=reach_text(reach),
        kept_by=kept_by,
        unreadable=unreadable,
        why=unreadable_why(table, version, reach) if unreadable else None,
        # a kept version's restore brings its files back from the pin (tables.services.restores)
        unrestorable=bool(reach) and not reach.get("restorable") and not reach.get("recoverable") and not kept_by,
        recoverable=bool(reach) and bool(reach.get("recoverable")),
        latest_version=table.last_synced_version,
        previous_version=version - 1 if version > (table.earliest_version or 0) else None,
        next_version=version + 1
        if table.last_synced_version is not None and version < table.last_synced_version
        else None,
    )
    ctx.update(version_rows_context(request, table, version))
    # a version the table no longer gives whole cannot be pinned: said instead of the form
    refused = pin_refusal(table, version, reach) if reach else None
    ctx.update(pins_context(request, table, version, refused=refused))
    return render(request, "tables/version_detail.html", ctx)
