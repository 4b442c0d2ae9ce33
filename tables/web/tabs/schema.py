"""The table page's Schema tab: the schema as of a version with
the CREATE TABLE that recreates it (to copy), the schema's timeline (what changed of which
column, version by version, newest first, with each commit), every column's history, and two
versions' schemas compared. All of it from tables.services.versions.schema_timeline, as the API.

A section whose answer fails (a version outside the log, a log that cannot be read) says why
in its place; the rest of the page still shows.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from tables.delta import errors as delta_errors
from tables.delta.history.timestamps import format_ms
from tables.delta.snapshot.schema.schema_diff import path_text
from tables.models import Table
from tables.services.errors import ServiceError, public_message
from tables.services.versions import schema_timeline as service
from tables.web.base.ui import PageError, page, table_of, version_param
from tables.web.tabs.frame import tab_context

VERSIONS_SHOWN = 200  # schema-changing versions on the page (the API has them all)
COLUMNS_SHOWN = 1000
CHANGES_OPEN = 12  # a version with more changes (a wide table's creation) lists them folded

_READ_ERRORS = (ServiceError, delta_errors.DeltaError)


def _message(exc: ServiceError | delta_errors.DeltaError, table: Table) -> str:
    return public_message(exc.message if isinstance(exc, ServiceError) else str(exc), table)


def _at(e: dict[str, Any]) -> str:
    """Where inside the field a change happened ('' for the field itself)."""
    return f" of its {e['fieldPath'].replace('.', ' ')}" if e.get("fieldPath") else ""


def change_text(e: dict[str, Any]) -> str:
    """One column event or schema change in words (a template escapes it)."""
    kind = e["kind"]
    if kind == "added":
        null = "" if e.get("nullable", True) else " not null"
        return (
            f"present at the log's start ({e['type']}{null})" if e.get("atLogStart") else f"added ({e['type']}{null})"
        )
    if kind == "dropped":
        return f"dropped (was {e['type']})"
    if kind == "renamed":
        return f"renamed from {e['fromName']} to {e['toName']}"
    if kind in ("type_widened", "type_changed"):
        verb = "widened" if kind == "type_widened" else "changed (not a widening)"
        text = f"type{_at(e)} {verb} from {e['fromType']} to {e['toType']}"
        if e.get("atLogStart"):
            text += ", before the log's start"
        return text + (" (recorded in delta.typeChanges)" if e.get("recorded") else "")
    if kind == "nullability_changed":
        now = "nullable" if e.get("to") else "NOT NULL"
        where = {"": "", "element": "its elements ", "value": "its map values "}.get(e.get("fieldPath") or "")
        if where is None:
            where = f"its {e['fieldPath'].replace('.', ' ')} "
        return f"{where}now {now}"
    return kind


def table_event_text(e: dict[str, Any]) -> str:
    if e["kind"] == "partitioning_changed":
        before, after = ", ".join(e["from"]) or "none", ", ".join(e["to"]) or "none"
        return f"partition columns changed from ({before}) to ({after})"
    if e["kind"] == "column_mapping_changed":
        return f"column mapping mode changed from {e['from']} to {e['to']}"
    return "the table was replaced (a new table id)"


def _commit_row(c: service.SchemaCommit | None) -> dict[str, Any]:
    info = c.info if c is not None else {}
    return {
        "timestamp": format_ms(c.timestamp if c is not None else None) or "",
        "source": (c.timestamp_source if c is not None else None) or "",
        "operation": info.get("operation") or "",
        "user": info.get("userName") or info.get("userId") or "",
    }


def timeline_rows(timeline: service.Timeline) -> list[dict[str, Any]]:
    """The timeline as the page shows it: one entry per version that changed the schema,
    newest first, with its commit and its changes in words."""
    answer = timeline.answer
    by_version: dict[int, list[dict[str, Any]]] = {}
    for col in answer["columns"]:
        for e in col["events"]:
            text = change_text(e)
            by_version.setdefault(e["version"], []).append(
                {"path": path_text(e["path"]), "kind": e["kind"], "text": text}
            )
    for e in answer["tableEvents"]:
        by_version.setdefault(e["version"], []).append({"path": "", "kind": e["kind"], "text": table_event_text(e)})
    commits = {c.info["version"]: c for c in timeline.commits}
    return [
        {"version": v, **_commit_row(commits.get(v)), "changes": by_version[v]}
        for v in sorted(by_version, reverse=True)
    ]


def column_history_rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Every column ever seen: its path now (or when dropped), type, and when it was added,
    last changed and dropped."""
    rows = []
    for col in answer["columns"][:COLUMNS_SHOWN]:
        changes = [e for e in col["events"] if e["kind"] not in ("added", "dropped")]
        rows.append(
            {
                "key": col["key"],
                "path": path_text(col["path"]),
                "depth": max(len(col["path"]) - 1, 0),
                "type": col["type"] or "",
                "added": col["added"],
                "at_log_start": bool(col["atLogStart"]),
                "dropped": col["dropped"],
                "changes": [f"{e['version']}: {change_text(e)}" for e in changes],
            }
        )
    return rows


def _optional_version(request: HttpRequest, name: str, table: Table) -> int | None:
    raw = request.GET.get(name, "").strip()
    return None if raw == "" else version_param(raw, name, table)


def _as_of(table: Table, version: int | None) -> dict[str, Any]:
    try:
        schema = service.schema_as_of(table, version)
    except _READ_ERRORS as exc:
        return {"as_of_error": _message(exc, table)}
    shown = schema.schema  # the core's: columns, partitioning, properties, the CREATE TABLE
    return {
        "as_of": shown,
        "as_of_range": (schema.earliest, schema.latest),
        "as_of_commit": _commit_row(schema.commit),
        "as_of_columns": [{**c, "path_text": path_text(c["path"]), "indent": c["depth"]} for c in shown["columns"]],
        "ddl": [{"label": f"Spark SQL: CREATE TABLE as of version {shown['version']}", "sql": shown["ddl"]}],
    }


def _compared(table: Table, v_from: int | None, v_to: int | None) -> dict[str, Any]:
    if v_from is None or v_to is None:
        return {}
    try:
        diff = service.schema_diff(table, v_from, v_to)
    except _READ_ERRORS as exc:
        return {"diff_error": _message(exc, table)}
    rows = [{"path": path_text(c["path"]), "kind": c["kind"], "text": change_text(c)} for c in diff.diff["changes"]]
    return {"diff": diff.diff, "diff_rows": rows}


@page
@require_GET
def table_schema(request: HttpRequest, slug: str) -> HttpResponse:
    """The schema page: ?version=N for the schema as of N; ?from=A&to=B compares two."""
    table = table_of(slug)
    try:
        version = _optional_version(request, "version", table)
        v_from, v_to = _optional_version(request, "from", table), _optional_version(request, "to", table)
    except PageError as exc:
        exc.table = table
        raise
    ctx = tab_context(request, table, "schema")
    ctx.update(_as_of(table, version), requested_version=version, v_from=v_from, v_to=v_to, changes_open=CHANGES_OPEN)
    try:
        timeline = service.schema_timeline(table)
    except _READ_ERRORS as exc:
        ctx["timeline_error"] = _message(exc, table)
    else:
        answer = timeline.answer  # the core's: columns, the table's events
        rows = timeline_rows(timeline)
        ctx.update(timeline=answer, timeline_rows=rows[:VERSIONS_SHOWN], column_rows=column_history_rows(answer))
        ctx["versions_hidden"] = max(0, len(rows) - VERSIONS_SHOWN)
        ctx["columns_hidden"] = max(0, len(answer["columns"]) - COLUMNS_SHOWN)
    ctx.update(_compared(table, v_from, v_to))
    return render(request, "tables/table_schema.html", ctx)
