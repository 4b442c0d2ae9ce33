"""The table page's Compare tab: what changed between two versions (schema, properties,
protocol, partitioning, files, the commits between), with the keyed row diff section of
rows_views.

A wide range (versions 1500 to 2200) must still be a page one can read: every long list
(files added and removed, the commits in between, change data's counts per version) is shown
PAGE rows at a time with "showing 51–100 of 3,661" and links to the next and previous rows,
long partition lists fold after PARTITIONS_SHOWN, and the rows read on Spark come first,
under a table of contents, instead of after everything else.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from tables.delta import errors as delta_errors
from tables.delta.history.timestamps import format_ms
from tables.services.data.jobs import unreadable_fix
from tables.services.errors import ServiceError
from tables.services.versions.read import diff, diff_commits
from tables.services.versions.unreadable import unreadable_why
from tables.web.base.metadata import change_rows, schema_change_rows
from tables.web.base.sql import diff_sql
from tables.web.base.ui import PageError, context, page, page_error, table_of, version_param
from tables.web.data.rows import diff_rows_context

PAGE = 50  # rows of each long list on the page at once
PARTITIONS_SHOWN = 10  # partitions listed before the rest fold behind a disclosure
MAX_PAGE = 10**9  # a page number beyond any list (a longer one in the URL is cut to it)


def _version_param(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name, "").strip()
    return None if raw == "" else version_param(raw, name)


def _page_offset(request: HttpRequest, name: str) -> int:
    """Where the page of list `name` starts (?name=3 is rows 101–150); anything else is the start."""
    raw = request.GET.get(name, "")
    n = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 10 else 1
    return (min(max(n, 1), MAX_PAGE) - 1) * PAGE


def _list_nav(
    request: HttpRequest, name: str, offset: int, shown: int, total: int, anchor: str
) -> dict[str, Any] | None:
    """What the page says under a long list: which of its rows are shown, and links to the
    rows before and after (None when the whole list is shown)."""
    if offset == 0 and shown >= total:
        return None

    def link(number: int) -> str:
        q = request.GET.copy()
        if number > 1:
            q[name] = str(number)
        else:
            q.pop(name, None)
        return f"?{q.urlencode()}#{anchor}"

    number = offset // PAGE + 1
    return {
        "first": offset + 1 if shown else 0,
        "last": offset + shown,
        "total": total,
        "prev": link(number - 1) if offset > 0 else None,
        "next": link(number + 1) if offset + shown < total else None,
        "size": PAGE,
    }


def _diff_file_rows(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The diff's sampled files as table rows: partition values (the template writes them as
    key=value), the row count (None when neither the add's stats nor the file's footer say)."""
    return [
        {
            "path": f["path"],
            "partition": f["partitionValues"] or {},
            "size": f["size"],
            "rows": f["numRecords"],
        }
        for f in files
    ]


def _files_side(request: HttpRequest, side: dict[str, Any], name: str, anchor: str) -> dict[str, Any]:
    """One side's files (added or removed) as the page shows them: a page of files with its
    links, the first partitions listed and the others folded."""
    partitions = side["partitions"]
    files = _diff_file_rows(side["sampleFiles"])
    return {
        "count": side["count"],
        "files": files,
        "nav": _list_nav(request, name, side.get("sampleFrom", 0), len(files), side["count"], anchor),
        "partitions": partitions[:PARTITIONS_SHOWN],
        "more_partitions": partitions[PARTITIONS_SHOWN:],
        "partition_count": side["partitionCount"],
        "partitions_listed": len(partitions),
        "partitions_cut": side["partitionCount"] > len(partitions),
    }


def _commits(request: HttpRequest, table, v_from: int, v_to: int) -> dict[str, Any]:
    """One page of the cached commits in the range, with its links and the History tab's
    address for all of them."""
    offset = _page_offset(request, "commits_page")
    rows, total = diff_commits(table, v_from, v_to, offset, PAGE)
    return {
        "commits": diff_commit_rows(rows),
        "commit_total": total,
        "commits_nav": _list_nav(request, "commits_page", offset, len(rows), total, "commits-title"),
        "commits_expected": max(0, v_to - v_from),
    }


def _change_counts(request: HttpRequest, ctx: dict[str, Any]) -> None:
    """Change data's counts per version and change type (a row each: thousands over a wide
    range) as pages of PAGE rows; the shared rows section then leaves them to this page."""
    counts = ctx.get("change_counts")
    if counts is None:
        return
    offset = _page_offset(request, "counts_page")
    shown = counts[offset : offset + PAGE]
    ctx["change_count_rows"] = shown
    ctx["change_counts_nav"] = _list_nav(request, "counts_page", offset, len(shown), len(counts), "change-counts")
    ctx["change_counts"] = None


def _sides(table, v_from: int, v_to: int, pins: dict[str, Any]) -> dict[str, Any]:
    """What the page says of each side before a row diff or change data is started: the
    pin a side is read from (`pins`: {side: Pin}), and a side that can be read neither from
    the table nor from a pin (its job would be refused), with why and which pin could have
    kept it."""
    unreadable = []
    for side, version in (("from", v_from), ("to", v_to)):
        if pins.get(side):
            continue
        why = unreadable_why(table, version)
        if why is not None:
            unreadable.append({"side": side, **why, "fix": unreadable_fix(why)})
    kept = [{"side": side, "version": v, "pin": pins[side].pk, "name": pins[side].name}
            for side, v in (("from", v_from), ("to", v_to)) if pins.get(side)]  # fmt: skip
    return {"sides_unreadable": unreadable, "sides_kept": kept}


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
        found = diff(
            table,
            v_from,
            v_to,
            PAGE,
            added_from=_page_offset(request, "added_page"),
            removed_from=_page_offset(request, "removed_page"),
            with_commits=False,
        )
    except (ServiceError, delta_errors.DeltaError) as exc:
        # a side whose log is gone and that no pin keeps: why, and which pin could have kept it
        lost = _sides(table, v_from, v_to, {})["sides_unreadable"] if v_to <= (latest or -1) else []
        if lost and isinstance(exc, delta_errors.VersionNotFoundError | delta_errors.StateReconstructionError):
            raise PageError(" ".join(f"{w['text']}" for w in lost) + f" {lost[0]['fix']}", 404, table) from exc
        raise page_error(exc, table) from exc
    result = found.changes  # the core's comparison
    added, removed = result["filesAdded"], result["filesRemoved"]
    ctx.update(
        result=result,
        schema_changes=schema_change_rows(result["schema"]),
        property_changes=change_rows(result["properties"]),
        protocol_changes=change_rows(result["protocol"]),
        partitioning_changed=result["partitionColumns"]["from"] != result["partitionColumns"]["to"],
        added=added,
        removed=removed,
        added_side=_files_side(request, added, "added_page", "added-title"),
        removed_side=_files_side(request, removed, "removed_page", "removed-title"),
        sql_snippets=diff_sql(table.location, v_from, v_to),
        **_commits(request, table, v_from, v_to),
    )
    ctx.update(diff_rows_context(request, table, v_from, v_to))
    ctx.update(_sides(table, v_from, v_to, {"from": found.from_pin, "to": found.to_pin}))
    _change_counts(request, ctx)
    return render(request, "tables/diff.html", ctx)


def diff_commit_rows(commits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "version": c["version"],
            "timestamp": format_ms(c["timestamp"]) or "",
            "source": c["timestamp_source"],
            "operation": c["operation"],
            "user_name": c["user_name"],
            "operation_metrics": c["operation_metrics"],
        }
        for c in commits
    ]
