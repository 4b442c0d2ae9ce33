"""Data jobs on Spark: version previews, change data, keyed row diffs and one row's history
(use cases).

Each job is a Job row first (kind "preview", "changes", "rowdiff" or "rowhistory", its
parameters in `Job.params`), created here after the request has been validated (a bad range,
an unknown key column, a key value its column's type cannot hold or a missing version raise
ServiceError and create nothing), then enqueued on
commit (tables.services.jobs.lifecycle). The Celery task (tables.tasks) hands `run_job` the Spark function;
`run_job` claims the row and moves it through
running -> succeeded/failed with its stages and progress, gives the job its own result
directory (`<DELTAWEB_RESULTS_DIR>/job-<id>/`) and stores the Spark job's summary (counts,
columns, the Parquet path) in `Job.result`. A failure is a one-line message on the row.

The web process never imports pyspark: results are paged from Parquet with
`tables.spark.results.read_page` (`result_page`).

Jobs start only on purpose (a POST): reading a result never starts or re-runs one. An
identical job already queued or running is joined, not duplicated (tables.services.jobs.lifecycle.create_or_join,
backed by the database's rule on kind, table and parameters). Previews are also cached per
(table, version): starting a preview when a succeeded one exists (its file still there)
returns that job. A row's history is cached the same way per (table, key, range): the
versions of a range never change. A failed job stays failed until a user starts it again.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from tables.delta import errors as delta_errors
from tables.delta.history.row_history.key import parse_key
from tables.delta.json_values import json_value
from tables.delta.snapshot.partitions import partition_columns
from tables.delta.snapshot.schema.columnmapping import mapping_mode
from tables.models import Job, JobKind, JobStatus, Table, params_hash
from tables.services.data.kinds import UNCHANGED, data_kind
from tables.services.errors import (
    SPARK_UNAVAILABLE,
    ServiceError,
    is_spark_error,
    one_line,
    public_message,
    spark_failure,
)
from tables.services.jobs import lifecycle as jobs
from tables.services.versions.read import snapshot_at
from tables.spark.results import read_page

PREVIEW, CHANGES, ROWDIFF, ROWHISTORY = JobKind.PREVIEW, JobKind.CHANGES, JobKind.ROWDIFF, JobKind.ROWHISTORY
DATA_KINDS = JobKind.data_kinds()
MAX_KEYS = 32
MAX_KEY_TEXT = 1000  # characters of one key value

# A Spark function run by a task: (table location, job parameters, out_dir, progress) -> summary.
Progress = Callable[[str, int, int | None], None]
Compute = Callable[[str, dict[str, Any], Path, Progress], dict[str, Any]]


def results_dir(job: Job | int) -> Path:
    pk = job if isinstance(job, int) else job.pk
    return Path(settings.DELTAWEB_RESULTS_DIR) / f"job-{pk}"


# --- validation ----------------------------------------------------------------------------


def _check_version(table: Table, version: int, what: str = "version"):
    """The snapshot of `version`, or ServiceError (404 version_not_found) naming what exists,
    or (422 version_unreadable) why it can be read neither from the table nor from a pin."""
    if version < 0:
        raise ServiceError(f"{what} must be a non-negative integer, got {version}.", "invalid")
    try:
        snap = snapshot_at(table, version)
    except delta_errors.VersionNotFoundError as exc:
        raise ServiceError(f"{what}: {exc}", "version_not_found", 404) from exc
    refuse_unreadable(table, version)
    return snap


def refuse_unreadable(table: Table, version: int) -> None:
    """Refuse, before a job is created, a version whose files are gone and that no pin keeps
    (Spark would fail later with "N data file(s) are missing"): the version, how many files,
    and what to do instead. A version a pin keeps passes (its job reads the pin); so does one
    whose answer a long log is still computing (the job then says what it finds)."""
    from tables.services.versions.unreadable import unreadable_why

    why = unreadable_why(table, version)
    if why is None:
        return
    raise ServiceError(f"{why['text']} {unreadable_fix(why)}", "version_unreadable", 422, version=version,
                       missingFiles=why["missing"], reason=why["reason"])  # fmt: skip


def unreadable_fix(why: dict[str, Any]) -> str:
    """What to do about an unreadable version (`unreadable.unreadable_why`), in one sentence."""
    steps = []
    if why.get("readableAfter") is not None:
        steps.append(f"choose a readable version (the oldest after it is version {why['readableAfter']})")
    else:
        steps.append("choose a readable version (the Versions tab marks them)")
    if why.get("recoverable"):
        steps.append("restore it recovering its files first from the bucket's old object versions")
    return f"Fix: {' or '.join(steps)}, and pin the versions you will need before the next VACUUM."


def _check_range(table: Table, start: int, end: int) -> tuple[Any, Any]:
    if start > end:
        raise ServiceError(f"'from' ({start}) must not be after 'to' ({end}).", "invalid_range")
    return _check_version(table, start, "from"), _check_version(table, end, "to")


def _columns(snap) -> list[str]:
    return [f.get("name") for f in (snap.metadata.schema.get("fields") or []) if isinstance(f, dict)]


def parse_keys(keys: str | list[str] | None) -> list[str]:
    """Key columns from "a,b" or a list: stripped, empties and repeats dropped, order kept."""
    items = keys.split(",") if isinstance(keys, str) else list(keys or [])
    out = list(dict.fromkeys(k.strip() for k in items if k and k.strip()))
    if len(out) > MAX_KEYS:
        raise ServiceError(f"At most {MAX_KEYS} key columns, got {len(out)}.", "invalid_keys")
    return out


# --- starting jobs ---------------------------------------------------------------------------


def table_state(table: Table) -> dict[str, Any] | None:
    """What the app knows of the table's state (its latest synced version and newest commit's
    time): a finished result is reused while this is unchanged; None before the first sync."""
    if table.last_synced_version is None:
        return None
    return {"version": table.last_synced_version, "lastCommitMs": table.last_commit_ms}


def reusable(table: Table, kind: str, params: dict[str, Any]) -> Job | None:
    """The newest succeeded job of this kind and parameters on the table whose result is still
    there, and, for a kind reused only while the table is unchanged (its declaration's
    `reuse`), computed while the table was as it is now (`table_state`)."""
    unchanged = data_kind(kind).reuse == UNCHANGED
    state = table_state(table)
    if unchanged and state is None:
        return None
    for job in Job.objects.filter(
        table=table, kind=kind, status=JobStatus.SUCCEEDED, params_hash=params_hash(params)
    ).order_by("-pk")[:5]:
        result = job.result or {}
        path = result.get("path")
        if path and Path(path).exists() and (not unchanged or result.get("tableState") == state):
            return job
    return None


def _start(table: Table, kind: str, params: dict[str, Any], user) -> Job:
    """A finished identical job's result while the table has not changed since (`reused`
    set on the job), the identical one queued or running, or a new job sent to the worker."""
    done = reusable(table, kind, params)
    if done is not None:
        done.reused = True  # type: ignore[attr-defined]  # what the answer says (not stored)
        return done
    return new_job(table, kind, params, user)


def new_job(table: Table, kind: str, params: dict[str, Any], user) -> Job:
    """The identical job queued or running, or a new one sent to the worker (no reuse asked:
    the caller looked already)."""
    job, created = jobs.create_or_join(kind, table, user, params)
    if created:
        jobs.enqueue(job, jobs.DATA_JOB_TASK)  # a broker that is down fails this job only
    return job


def preview_params(table: Table, version: int) -> dict[str, Any]:
    """A preview's parameters: the version, and the pin it is read from when the one rule
    (tables.services.versions.source) says the table lost it and a pin keeps it. The pin is
    named by its id, not its kept table's location: a job's parameters are shown by the API,
    the pin store's directory never is; the worker finds the kept table by the id."""
    from tables.services.versions.source import source_of

    source = source_of(table, version)
    return {"version": version} if source.pin is None else {"version": version, "pin": source.pin.pk}


def _preview_param_sets(table: Table, version: int) -> list[dict[str, Any]]:
    """The parameters a preview of the version may have been started with: read from the
    table, or from each pin that holds it (the same rows)."""
    from tables.services.pins.queries import holding_pins

    return [{"version": version}] + [
        {"version": version, "pin": p.pk} for p in holding_pins(table) if p.version == version
    ]


def cached_preview(table: Table, version: int) -> Job | None:
    """The newest succeeded preview of (table, version) whose result file is still there."""
    for params in _preview_param_sets(table, version):
        job = reusable(table, PREVIEW, params)
        if job is not None:
            return job
    return None


def preview_in_flight(table: Table, version: int) -> Job | None:
    for params in _preview_param_sets(table, version):
        job = jobs.active(PREVIEW, table, params)
        if job is not None:
            return job
    return None


def latest_preview(table: Table, version: int) -> Job | None:
    """What a reader of the preview sees, starting nothing: the cached preview, the one being
    computed, else the newest finished one (e.g. a failure, until a user starts it again)."""
    return (
        cached_preview(table, version)
        or preview_in_flight(table, version)
        or Job.objects.filter(table=table, kind=PREVIEW, params__version=version).order_by("-pk").first()
    )


def check_version(table: Table, version: int) -> None:
    """ServiceError (404 version_not_found) unless the table has the version."""
    _check_version(table, version)


def start_preview(table: Table, version: int, user=None) -> Job:
    """The cached preview of the version, the one being computed, or a new job."""
    job = cached_preview(table, version)
    if job is not None:
        job.reused = True  # type: ignore[attr-defined]
        return job
    job = preview_in_flight(table, version)
    if job is not None:
        return job
    _check_version(table, version)
    # read where the one rule says: a version the table lost is read from its pin, same rows
    return new_job(table, PREVIEW, preview_params(table, version), user)  # cached_preview found none above


def sides(table: Table, start: int, end: int) -> dict[str, Any]:
    """Where a job over versions start..end reads, decided now by the one rule
    (tables.services.versions.source) and kept in its parameters, so that a queued job reads
    what was decided and a result read from another place is never taken for it: `sources`,
    each side's place (the table, or a pin's kept table), and `kept`, the places of the pins of
    the range's versions whose files the table lost (a range reads those files from them).
    Nothing when the table itself gives every version of the range."""
    from tables.services.pins.queries import pins_by_version
    from tables.services.versions.source import source_of

    ends = {"from": source_of(table, start), "to": source_of(table, end)}
    kept = {s.pin.pk: s for s in ends.values() if s.from_pin}
    for version in sorted(v for v in pins_by_version(table) if start < v < end):
        source = source_of(table, version)
        if source.from_pin:
            kept.setdefault(source.pin.pk, source)
    if not kept:  # the table gives every version: the parameters (and reuse) of any other job
        return {}
    return {
        "sources": {side: s.as_params() for side, s in ends.items()},
        "kept": [kept[pk].as_params() for pk in sorted(kept)],
    }


def start_changes(table: Table, start: int, end: int, user=None) -> Job:
    """Change data of versions start..end (rows with _change_type, _commit_version/_timestamp);
    the files VACUUM took are read from the pins of the range that keep them (`sides`)."""
    _check_range(table, start, end)
    return _start(table, CHANGES, {"from": start, "to": end, **sides(table, start, end)}, user)


def start_row_diff(table: Table, v_from: int, v_to: int, keys: str | list[str] | None, user=None) -> Job:
    """Keyed row diff of two versions; keys must be columns of both versions."""
    keys = parse_keys(keys)
    if not keys:
        raise ServiceError("Give at least one key column for a row diff (keys=a,b).", "invalid_keys")
    if v_from > v_to:
        raise ServiceError(f"'from' ({v_from}) must not be after 'to' ({v_to}).", "invalid_range")
    a, b = _check_range(table, v_from, v_to)
    for v, snap in ((v_from, a), (v_to, b)):
        names = _columns(snap)
        missing = [k for k in keys if k not in names]
        if missing:
            raise ServiceError(
                f"Key column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"not in version {v} of {table.name} (its columns: {', '.join(names)}).",
                "invalid_keys",
                columns=missing,
            )
    # each side read from its own place: the table, or the pin that keeps a vacuumed version
    return _start(table, ROWDIFF, {"from": v_from, "to": v_to, "keys": keys, **sides(table, v_from, v_to)}, user)


def _row_key(table: Table, snap, key: dict[str, str]) -> dict[str, str]:
    """The key checked against the version's schema (the range's last: the core reads with it)
    and its values cast to their columns' types, as canonical text in the schema's order
    ("2.250" and "2.25" name the same decimal key, hence the same job)."""
    if not isinstance(key, dict) or not key:
        raise ServiceError("Give the row's key: one or more columns with their values.", "invalid_keys")
    if len(key) > MAX_KEYS:
        raise ServiceError(f"At most {MAX_KEYS} key columns, got {len(key)}.", "invalid_keys")
    for name, text in key.items():
        if not isinstance(name, str) or not isinstance(text, str) or len(text) > MAX_KEY_TEXT:
            raise ServiceError(
                f"Key values are text of at most {MAX_KEY_TEXT} characters (column {str(name)[:80]!r}).",
                "invalid_keys",
                columns=[str(name)[:200]],
            )
    mode = mapping_mode(snap.metadata, snap.protocol)
    schema = snap.metadata.schema
    try:
        keys = parse_key(schema, mode, partition_columns(snap.metadata, mode), list(key.items()))
    except delta_errors.InvalidColumnsError as exc:
        column = exc.details.get("column")
        raise ServiceError(
            public_message(exc.message, table), "invalid_keys", columns=[str(column)[:200]] if column else []
        ) from exc
    order = {f.get("name"): i for i, f in enumerate(schema.get("fields") or [])}
    out = {}
    for k in sorted(keys, key=lambda k: order.get(k.name, 0)):
        value = json_value(k.value)
        out[k.name] = value if isinstance(value, str) else json.dumps(value)
    return out


def start_row_history(table: Table, key: dict[str, str], v_from: int, v_to: int, user=None) -> Job:
    """The history of the row with `key` (column -> value as text) in versions v_from..v_to: the
    cached result, the identical job queued or running, or a new job. Key columns must be
    top-level columns of version `v_to` of a type a key can have; nothing is created otherwise."""
    if v_from > v_to:
        raise ServiceError(f"'from' ({v_from}) must not be after 'to' ({v_to}).", "invalid_range")
    _a, b = _check_range(table, v_from, v_to)
    params = {"key": _row_key(table, b, key), "from": v_from, "to": v_to, **sides(table, v_from, v_to)}
    # a kept result is answered as the job it is (202 as any), not marked reused
    return reusable(table, ROWHISTORY, params) or new_job(table, ROWHISTORY, params, user)


# --- running jobs (called by the Celery task with the Spark function) ---------------------------


def run_job(job_id: int, compute: Compute) -> dict[str, Any]:
    """Run a data job: claim it (queued -> running, exactly one row), compute, record. The
    compute gets the job's id in its parameters (`job`); a compute with an `interrupt(job_id)`
    attribute can be cancelled while it runs (jobs.request_cancel, jobs.cancellable)."""
    claimed = jobs.claim(job_id, DATA_KINDS)
    job = Job.objects.select_related("table").filter(pk=job_id).first()
    if job is None:
        return {"error": f"job {job_id} not found"}
    if not claimed:
        return {"skipped": True, "reason": f"job {job_id} is {job.status}"}
    params = dict(job.params or {})
    out_dir = results_dir(job)
    progress = jobs.reporter(job)
    interrupt = getattr(compute, "interrupt", None)
    state = table_state(job.table) if job.table is not None else None
    try:
        if job.table is None:
            raise ServiceError("the job's table was removed", "not_found", 404)
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        with jobs.cancellable(job.pk, (lambda: interrupt(job.pk)) if interrupt is not None else None):
            summary = compute(job.table.location, {**params, "kind": job.kind, "job": job.pk}, out_dir, progress)
    except Exception as exc:  # every failure ends the job with a one-line message
        shutil.rmtree(out_dir, ignore_errors=True)  # nothing half-written is left
        asked = jobs.cancel_request(job.pk)
        if asked is not None:
            jobs.cancelled(job, asked)
        else:
            code, message, detail = failure(exc)
            jobs.fail(job, one_line(message), stage="failed", detail=detail, code=code)
        return {"error": job.error}
    asked = jobs.cancel_request(job.pk)
    if asked is not None:
        # work with nothing to interrupt (a keyed diff read by pyarrow in this process) runs to
        # its end; the user asked to stop it, so it ends cancelled and its result is dropped
        shutil.rmtree(out_dir, ignore_errors=True)
        jobs.cancelled(job, asked)
        return {"error": job.error}
    result = {"params": params, "tableState": state, **summary}
    jobs.succeed(job, result)
    return result


def failure(exc: BaseException) -> tuple[str | None, str, str | None]:
    """(error code, message a user may read, technical detail for staff) of a failed job."""
    code = getattr(exc, "code", None)
    if isinstance(exc, ServiceError | delta_errors.DeltaError):
        return code, exc.message, reader_detail(exc)
    if code == SPARK_UNAVAILABLE:
        # the Connect server is down: its address (no secret), and what to do
        return code, str(exc), None
    if is_spark_error(exc):
        # Py4JJavaError's text is a Java stack trace naming internal objects (o2546.parquet):
        # users get what went wrong in words, staff the technical detail in the job's result
        return spark_failure(exc)
    return None, f"{type(exc).__name__}: {exc}", None


def reader_detail(exc: BaseException) -> str | None:
    """The technical detail of a failure our words name in place of a reader's (a data file
    Spark or pyarrow could not read, tables.spark.jobs.file_errors: raised from the reader's
    exception): the reader's own, as spark_failure keeps it for staff; None for our own errors."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, ServiceError | delta_errors.DeltaError):
        return None
    if is_spark_error(cause):
        return spark_failure(cause)[2]
    lines = [line.rstrip() for line in str(cause).splitlines() if line.strip()][:20]
    return (f"{type(cause).__name__}: " + "\n".join(lines))[:4000]


# --- reading results (pyarrow only) -----------------------------------------------------------


@dataclass(frozen=True)
class ResultPage:
    """A page of a finished data job's rows and what its Spark work reported beside them; the
    API's answer is made of it by tables.api.data.rows.ResultsPageSerializer, the pages read it."""

    job: int
    kind: str
    columns: list[dict[str, str]]  # [{name, type}], the types by Delta's names
    rows: list[dict[str, Any]]  # {column: JSON-safe value}
    total: int  # rows in the result; a preview's: rows in the version
    offset: int
    limit: int
    cached: int | None  # a preview's: the version's first rows it keeps; None for the other kinds
    # the job's summary as it was stored (Job.result): counts, keys, key, files, its versions...
    summary: Mapping[str, Any]


def result_page(job: Job, offset: int, limit: int) -> ResultPage:
    """A page of a finished data job's rows, with its counts; ServiceError while not ready."""
    if job.kind not in DATA_KINDS:
        raise ServiceError(f"Job {job.pk} is a {job.kind} job; it has no rows to page.", "no_results", 404)
    if job.status != JobStatus.SUCCEEDED:
        if job.status == JobStatus.FAILED:
            raise ServiceError(f"Job {job.pk} failed: {job.error}", "job_failed", 409)
        raise ServiceError(
            f"Job {job.pk} is {job.status}; poll /api/jobs/{job.pk}/ until it succeeds.", "not_ready", 409
        )
    result = job.result or {}
    path = result.get("path")
    if not path or not Path(path).exists():
        raise ServiceError(f"The results of job {job.pk} are gone; start the job again.", "results_gone", 410)
    page = read_page(path, offset, limit)
    # the cached preview holds the version's first rows; its `total` is the version's row count
    cached = data_kind(job.kind).rows_shown == "cached"
    return ResultPage(
        job=job.pk,
        kind=job.kind,
        columns=page["columns"],
        rows=page["rows"],
        total=result.get("total", page["total"]) if cached else page["total"],
        offset=page["offset"],
        limit=page["limit"],
        cached=page["total"] if cached else None,
        summary=result,
    )
