"""The table page's Compare tab: what changed between two versions (schema, properties,
protocol, partitioning, files, the commits between), with the keyed row diff section of
rows_views."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from tables.delta import errors as delta_errors
from tables.services.errors import ServiceError
from tables.services.versions import diff
from tables.web import pages
from tables.web.rows import diff_rows_context
from tables.web.ui import PageError, context, page, page_error, table_of, version_param


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
