"""One declaration per data-job kind: a version's preview, change data, a keyed row diff, a row's
history, a SQL query at versions. Each says what the worker runs on Spark and reports while it runs (tables.tasks), how a
finished one is reused (data_jobs.reusable), and how its result page shows its rows
(tables.web.data.rows). Its `kind` is the Job's kind, its metrics label (deltaweb_spark_job_seconds)
and the API's; cancelling is the same for every kind (the job's Spark tag, tables.spark.engine.control).

A new kind: its JobKind choice (tables/models/jobs.py, a migration), its Spark job (tables/spark/),
one entry here, and how it is started (data_jobs, a view and an API endpoint).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tables.models import JobKind

# how a finished job is reused by an identical request
KEPT = "kept"  # while its result files are kept
UNCHANGED = "unchanged"  # while its result is kept and the table has not changed since it ran

Stage = Callable[[str], None]


@dataclass(frozen=True)
class DataKind:
    kind: str
    doing: Callable[[dict[str, Any]], str]  # the stage shown while Spark works
    run: Callable[[Any, str, dict[str, Any], Path, Stage], dict[str, Any]]  # (spark, location, params, out, stage)
    reuse: str
    rows_shown: str = "total"  # what the page counts: the `cached` first rows (a preview) or the `total`
    counts: str = ""  # the page's counts block: "change" (change data) or "diff" (a keyed diff)
    pairs: bool = False  # rows shown before and after, filterable by change type (a keyed diff)
    row_links: bool = False  # each row linked to its history by the key columns (a preview)


# Each run imports its Spark job when called: only a worker that runs one loads pyspark.


def _preview(spark, location: str, p: dict[str, Any], out: Path, _stage: Stage) -> dict[str, Any]:
    from tables.spark.jobs.preview import write_preview

    if p.get("pin") is not None:  # the version as its pin keeps it: the kept table's latest
        from tables.services.pins.queries import kept_location

        kept = kept_location(p["pin"])
        if kept is not None:
            return write_preview(spark, kept, None, out)
    return write_preview(spark, location, p["version"], out)


def _place(location: str, p: dict[str, Any], side: str) -> tuple[str, int | None] | None:
    """(location, version) a job's side is read from, as decided when it was started
    (tables.services.versions.source); None for a job started before sides were recorded."""
    from tables.services.versions.source import from_params

    source = (p.get("sources") or {}).get(side)
    return from_params(source, location) if source else None


def _kept(location: str, p: dict[str, Any]) -> list[str]:
    """The kept tables of the pins a job over a range may read files from (decided when it was
    started: the pins of its versions whose files the table lost)."""
    from tables.services.versions.source import from_params

    return [from_params(s, location)[0] for s in p.get("kept") or [] if s.get("pin") is not None]


def _changes(spark, location: str, p: dict[str, Any], out: Path, _stage: Stage) -> dict[str, Any]:
    from tables.spark.jobs.changes import change_data

    return change_data(spark, location, p["from"], p["to"], out, kept=_kept(location, p))


def _row_diff(spark, location: str, p: dict[str, Any], out: Path, _stage: Stage) -> dict[str, Any]:
    from tables.spark.jobs.rowdiff import keyed_diff

    a, b = _place(location, p, "from"), _place(location, p, "to")
    sources = (a or (location, p["from"]), b or (location, p["to"])) if a or b else None
    return keyed_diff(spark, location, p["from"], p["to"], p["keys"], out, sources=sources)


def _row_history(spark, location: str, p: dict[str, Any], out: Path, stage: Stage) -> dict[str, Any]:
    from tables.spark.jobs.row_history import write_row_history

    return write_row_history(spark, location, p["key"], p["from"], p["to"], out, stage, kept=_kept(location, p))


def _query(spark, _location: str, p: dict[str, Any], out: Path, _stage: Stage) -> dict[str, Any]:
    from tables.models import Table
    from tables.services.pins.queries import kept_location
    from tables.spark.engine.control import job_tag
    from tables.spark.jobs.query import run_query

    frames: dict[int, tuple[str, int | None]] = {}
    for i, b in enumerate(p["bindings"]):
        kept = kept_location(b["pin"]) if b.get("pin") is not None else None
        if kept is not None:  # the version as its pin keeps it: the kept table's latest
            frames[i] = (kept, None)
            continue
        table = Table.objects.filter(pk=b["table"]).first()
        if table is None:
            raise ValueError(f"table {b.get('slug')} is no longer registered")
        frames[i] = (table.location, b["version"])
    out_rows = run_query(spark, frames, p["sql"], out, p["maxRows"], p["seconds"], job_tag(p["job"]))
    return {**out_rows, "references": p["references"]}


def _versions_text(p: dict[str, Any]) -> str:
    return ", ".join(f"{r['slug']}@{r['version']}" for r in p.get("references", []))[:150]


def _key(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in p["key"].items())[:200]


DATA_KINDS: dict[str, DataKind] = {
    k.kind: k
    for k in (
        DataKind(
            JobKind.PREVIEW,
            lambda p: f"reading version {p['version']}",
            _preview,
            KEPT,
            rows_shown="cached",
            row_links=True,
        ),
        DataKind(
            JobKind.CHANGES,
            lambda p: f"reading the changes of versions {p['from']}..{p['to']}",
            _changes,
            UNCHANGED,
            counts="change",
        ),
        DataKind(
            JobKind.ROWDIFF,
            lambda p: f"joining versions {p['from']} and {p['to']} on {', '.join(p['keys'])}",
            _row_diff,
            UNCHANGED,
            counts="diff",
            pairs=True,
        ),
        DataKind(
            JobKind.ROWHISTORY,
            lambda p: f"planning the history of {_key(p)} in versions {p['from']}..{p['to']}",
            _row_history,
            KEPT,
        ),
        DataKind(JobKind.QUERY, lambda p: f"running the query at {_versions_text(p)}", _query, KEPT),
    )
}


def data_kind(kind: str) -> DataKind:
    """The declaration of a data-job kind; ValueError for any other kind."""
    try:
        return DATA_KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown data job kind '{kind}'") from None
