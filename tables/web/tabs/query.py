"""The table page's Query tab: SQL at any version (tables.services.query, as the API).

Write a read-only Spark SQL statement over registered tables, each at the latest synced version
or `VERSION AS OF`, a pin's name or `TIMESTAMP AS OF`; run it (a data job: progress, cancel,
reuse of an identical query at the same versions); see its rows with their types, the versions
each reference resolved to, download them as CSV or Parquet; run it again at another version of
this table; compare two versions' results row by row; come back to your last queries. A
result's link (?job=) opens for anyone who may read the tables.

A result of one category or time column and numeric ones gets a chart (bars per category, or
lines over time), and a comparison the per-group change of its first numeric column: plain
plotly figures handed to the page as JSON data islands (`json_script`) that
static/tables/query.js draws (plotly's style elements allowed by their hashes, as on the charts
page: tables.site.middleware.STYLE_ELEMENTS); no chart when the result has no such shape.

Starting is a POST that redirects back with the job (?job=) or the two jobs (?a=&b=); a
refusal comes back as the form's error, the statement kept.
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from tables.delta.json_values import json_value
from tables.models import Job, JobKind, JobStatus
from tables.services.data import jobs as data_jobs
from tables.services.errors import ServiceError
from tables.services.query import compare as comparing
from tables.services.query import run
from tables.services.query.compare import is_numeric, number
from tables.spark.results import part_files
from tables.web.base.ui import PageError, job_param, page, table_of
from tables.web.data.rows import job_rows_context
from tables.web.tabs.frame import tab_context

HISTORY_SHOWN = 20
CHART_ROWS = 500  # a result's first rows charted
CHART_TRACES = 6  # numeric columns charted at most
CHART_GROUPS = 100  # groups of a comparison's chart at most
TIME_TYPES = ("date", "timestamp", "timestamp_ntz")
CATEGORY_TYPES = ("string", "boolean")


def _example(table) -> str:
    return f"SELECT *\nFROM {table.slug}\nLIMIT 100"


def _job(request: HttpRequest, name: str, table) -> Job | None:
    return job_param(request, name, table, (JobKind.QUERY,))


@require_GET
@page
def table_query(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    job = _job(request, "job", table)
    a, b = _job(request, "a", table), _job(request, "b", table)
    shown = job or b or a
    url = reverse("tables:table_query", args=[table.slug])
    text = request.session.pop("query_text", None) or (shown.params.get("text") if shown else None) or _example(table)
    ctx = {
        **tab_context(request, table, "query"),
        "sql": text,
        "query_error": " ".join(m.message for m in messages.get_messages(request) if "query" in m.tags),
        "limits": run.limits(),
        "history": run.history(request.user, table, HISTORY_SHOWN),
        "shown": shown,
        "references": (shown.params or {}).get("references", []) if shown else [],
    }
    if job is not None:
        ctx.update(job_rows_context(request, job, f"{url}?{urlencode({'job': job.pk})}#result"))
        ctx["result"] = job.result if job.status == JobStatus.SUCCEEDED else None
        ctx["result_chart"] = _result_chart(job) if ctx["result"] is not None else None
    if a is not None and b is not None:
        ctx.update(_comparison(request, a, b))
    return render(request, "tables/table_query.html", ctx)


def _comparison(request: HttpRequest, a: Job, b: Job) -> dict[str, Any]:
    out: dict[str, Any] = {"cmp_a": a, "cmp_b": b, "cmp_keys_text": request.GET.get("keys", "")}
    if a.status != JobStatus.SUCCEEDED or b.status != JobStatus.SUCCEEDED:
        failed = [j for j in (a, b) if j.status == JobStatus.FAILED]
        out["cmp_waiting"] = not failed
        if failed:
            out["cmp_error"] = f"The query at one side failed: {failed[0].error}"
        return out
    keys = [k.strip() for k in out["cmp_keys_text"].split(",") if k.strip()]
    try:
        out["cmp"] = comparing.compare(a, b, keys or None)
    except ServiceError as exc:
        out["cmp_error"] = exc.message
    else:
        out["cmp_chart"] = _change_chart(out["cmp"])
    return out


# --- charts --------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    """A value as plotly's text: escaped, since plotly renders a subset of HTML in labels."""
    return html.escape("null" if value is None else str(value))


def _base(kind: str) -> str:
    return kind.split("(")[0]


def _layout(xtitle: str, ytitle: str) -> dict[str, Any]:
    return {
        "xaxis": {"title": {"text": _text(xtitle)}, "automargin": True},
        "yaxis": {"title": {"text": _text(ytitle)}, "automargin": True},
        "margin": {"l": 60, "r": 20, "t": 30, "b": 60},
        "height": 340,
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#fafafa",
    }


def chart_of(columns: list[dict[str, str]], rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A figure for a result of exactly one category or time column and numeric columns: a bar
    per category (one trace per numeric column) or a line over time (in time order); None for
    any other shape."""
    numeric = [c["name"] for c in columns if is_numeric(c["type"])]
    other = [c for c in columns if not is_numeric(c["type"])]
    if not numeric or len(other) != 1 or not rows:
        return None
    x, kind = other[0]["name"], _base(other[0]["type"])
    if kind in TIME_TYPES:
        rows = sorted((r for r in rows if r.get(x) is not None), key=lambda r: r[x])
        trace = {"type": "scatter", "mode": "lines+markers"}
    elif kind in CATEGORY_TYPES:
        trace = {"type": "bar"}
    else:
        return None
    xs = [r[x] for r in rows] if kind in TIME_TYPES else [_text(r.get(x)) for r in rows]
    data = [{**trace, "name": _text(n), "x": xs, "y": [number(r.get(n)) for r in rows]} for n in numeric[:CHART_TRACES]]
    layout = _layout(x, numeric[0] if len(numeric) == 1 else "value")
    layout["xaxis"]["type"] = "date" if kind in TIME_TYPES else "category"
    return {"data": data, "layout": layout, "kind": "line" if kind in TIME_TYPES else "bar", "x": x}


def _result_chart(job: Job) -> dict[str, Any] | None:
    try:
        page = data_jobs.result_page(job, 0, CHART_ROWS)
    except ServiceError:
        return None
    fig = chart_of(page.columns, page.rows)
    if fig is not None:
        fig["cut"] = page.total > CHART_ROWS
        fig["rows"] = min(page.total, CHART_ROWS)
    return fig


def _change_chart(cmp: dict[str, Any]) -> dict[str, Any] | None:
    """The per-group change of the comparison's first numeric column (a group at one side only
    counts from nothing), one bar per group that changed; None without a numeric column or a
    change."""
    if not cmp.get("numeric"):
        return None
    column, keys = cmp["numeric"][0], cmp["keys"]

    def label(row: dict[str, Any]) -> str:
        return _text(", ".join("null" if row.get(k) is None else str(row.get(k)) for k in keys))

    bars: list[tuple[str, float]] = []
    for r in cmp["changed"]:
        for c in r["changes"]:
            if c["column"] == column and c["delta"] is not None:
                bars.append((label(r["key"]), c["delta"]))
    for sign, side in ((-1, "onlyFrom"), (1, "onlyTo")):
        for r in cmp[side]:
            value = number(r.get(column))
            if value is not None:
                bars.append((label(r), sign * value))
    if not bars:
        return None
    bars.sort(key=lambda b: b[0])
    bars = bars[:CHART_GROUPS]
    colors = ["#16a34a" if d >= 0 else "#dc2626" for _, d in bars]
    data = [
        {
            "type": "bar",
            "name": _text(f"change of {column}"),
            "x": [b[0] for b in bars],
            "y": [b[1] for b in bars],
            "marker": {"color": colors},
        }
    ]
    layout = _layout(", ".join(keys), f"change of {column}")
    layout["xaxis"]["type"] = "category"
    return {"data": data, "layout": layout, "column": column, "groups": len(bars)}


def _back(slug: str, text: str, request: HttpRequest, error: ServiceError) -> HttpResponse:
    request.session["query_text"] = text[:100_000]
    part = error.extra.get("part")
    messages.error(request, error.message + (f" (at: {part})" if part else ""), extra_tags="query")
    return redirect(reverse("tables:table_query", args=[slug]) + "#query-form")


@require_POST
@page
def query_run(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    text = request.POST.get("sql", "")
    try:
        at = run.at_version(request.POST["at"]) if request.POST.get("at", "").strip() else None
        job = run.start_query(table, text, request.user, at)
    except ServiceError as exc:
        return _back(table.slug, text, request, exc)
    return redirect(reverse("tables:table_query", args=[table.slug]) + f"?{urlencode({'job': job.pk})}#result")


@require_POST
@page
def query_compare(request: HttpRequest, slug: str) -> HttpResponse:
    table = table_of(slug)
    text = request.POST.get("sql", "")
    try:
        a, b = comparing.start_compare(
            table, text, request.POST.get("from", ""), request.POST.get("to", ""), request.user
        )
    except ServiceError as exc:
        return _back(table.slug, text, request, exc)
    q = {"a": a.pk, "b": b.pk}
    if request.POST.get("keys", "").strip():
        q["keys"] = request.POST["keys"].strip()[:2000]
    return redirect(reverse("tables:table_query", args=[table.slug]) + f"?{urlencode(q)}#compare")


def _result_files(table, pk: int) -> tuple[Job, list[Path]]:
    job = Job.objects.filter(pk=pk, table=table, kind=JobKind.QUERY, status=JobStatus.SUCCEEDED).first()
    path = (job.result or {}).get("path") if job is not None else None
    if not path or not Path(path).exists():
        raise PageError("This query's result is not kept (any more): run it again.", 404, table)
    return job, part_files(path)


def _csv_lines(files: list[Path]) -> Iterator[str]:
    import pyarrow.parquet as pq

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    header = False
    for f in files:
        pf = pq.ParquetFile(f)
        for batch in pf.iter_batches(batch_size=5000):
            if not header:
                writer.writerow(batch.schema.names)
                header = True
            types = [field.type for field in batch.schema]
            for row in zip(*(col.to_pylist() for col in batch.columns), strict=True):
                writer.writerow([_csv_value(json_value(v, t)) for v, t in zip(row, types, strict=True)])
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()


def _csv_value(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return "" if value is None else value


@require_GET
@page
def query_download(request: HttpRequest, slug: str, pk: str, fmt: str) -> HttpResponse:
    """The whole kept result (at most DELTAWEB_QUERY_MAX_ROWS rows) as CSV or Parquet."""
    table = table_of(slug)
    job, files = _result_files(table, int(pk))
    name = f"{table.slug}-query-{job.pk}"
    if fmt == "parquet" and len(files) == 1:
        return FileResponse(open(files[0], "rb"), as_attachment=True, filename=f"{name}.parquet")
    response = StreamingHttpResponse(_csv_lines(files), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response
