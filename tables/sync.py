"""Syncing a table: replaying its log incrementally into the cached history (Commit and
Anomaly rows) and the table's summary fields.

`start_sync` creates a sync Job and enqueues it on commit (tables.jobs); the worker's task
calls `sync_table`, which claims the job (queued -> running, one row), then takes the
table's sync lease, so two syncs of one table never interleave.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from alerts import hooks as alert_hooks
from tables.delta import errors as delta_errors
from tables.delta.growth import growth
from tables.delta.history import HISTORY_FIELDS, scan_versions, table_anomalies
from tables.delta.storage import as_storage
from tables.delta.timestamps import CommitTimes, commit_times

from . import jobs
from .errors import public_message
from .models import Anomaly, Commit, Job, JobKind, SyncState, Table
from .owner_access import owner_of

# Strings of a table's log are untrusted and stored bounded; a value that was cut says so, and
# how long it was, so nobody takes a cut userMetadata for the whole of it.
MAX_TEXT = 10_000  # userMetadata and strings inside JSON fields
MAX_JSON_TEXT = 2000  # strings inside the stored commitInfo
MAX_ITEMS = 1000  # entries of a JSON object or array


def truncation_marker(total: int) -> str:
    return f"…[truncated, {total} characters]"


def cut(text: str, limit: int) -> str:
    """`text`, or its start and the marker, in at most `limit` characters."""
    if len(text) <= limit:
        return text
    marker = truncation_marker(len(text))
    return text[: max(limit - len(marker), 0)] + marker


def cut_json(value: Any, limit: int = MAX_TEXT) -> Any:
    """A JSON value with long strings cut (marked) and long objects and arrays shortened, with
    a marker entry saying how many entries were left out."""
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, dict):
        items = list(value.items())
        out = {cut(str(k), 200): cut_json(v, limit) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out["…"] = f"[truncated, {len(items)} entries]"
        return out
    if isinstance(value, list):
        out_list = [cut_json(v, limit) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            out_list.append(f"…[truncated, {len(value)} items]")
        return out_list
    return value


def _text(value: Any, limit: int) -> str:
    return cut(str(value or ""), limit)


SYNC_LEASE = timedelta(minutes=15)
BATCH = 2000
MAX_ERROR = 5000


def start_sync(table: Table, user=None) -> Job:
    """Create the job row, mark the table queued, and enqueue the job once the transaction
    commits. An unreachable broker fails the job and puts the table's state back as it was."""
    job = jobs.create(JobKind.SYNC, table, user)
    before = table.sync_state
    marked = before in (SyncState.NEVER, SyncState.OK, SyncState.ERROR) and (
        Table.objects.filter(pk=table.pk, sync_state=before).update(sync_state=SyncState.QUEUED) == 1
    )

    def unmark() -> None:
        if marked:  # only the state this call set, and only if nothing moved it since
            Table.objects.filter(pk=table.pk, sync_state=SyncState.QUEUED).update(sync_state=before)

    jobs.enqueue(job, jobs.SYNC_TASK, on_unreachable=unmark)
    return job


def claim_lease(table_id: int) -> bool:
    """Take the table's sync lease with a conditional UPDATE that touches exactly one row."""
    now = timezone.now()
    claimed = (
        Table.objects.filter(pk=table_id)
        .filter(~Q(sync_state=SyncState.SYNCING) | Q(sync_lease_until__lt=now) | Q(sync_lease_until__isnull=True))
        .update(sync_state=SyncState.SYNCING, sync_lease_until=now + SYNC_LEASE)
    )
    return claimed == 1


def sync_table(table_id: int, job_id: int | None = None) -> dict[str, Any]:
    """Replay the log incrementally into cached history rows and the timeline.

    Idempotent and safe to run twice at once: the job claim lets one worker run a job, the
    lease lets one run proceed per table, the unique (table, version) constraint keeps rows
    single even if leases overlap.
    """
    job = None
    if job_id is not None:
        if not jobs.claim(job_id, [JobKind.SYNC]):
            status = Job.objects.filter(pk=job_id).values_list("status", flat=True).first()
            return {"skipped": True, "reason": f"job {job_id} is {status or 'gone'}, not queued"}
        job = Job.objects.get(pk=job_id)
    if not claim_lease(table_id):
        result = {"skipped": True, "reason": "another sync of this table is running"}
        jobs.skip(job, result)
        return result
    table = Table.objects.get(pk=table_id)
    try:
        result = _sync(table, job)
    except delta_errors.DeltaError as exc:
        _failed(table, job, str(exc)[:MAX_ERROR])
        return {"error": str(exc)}
    except Exception as exc:
        _failed(table, job, f"sync failed unexpectedly ({type(exc).__name__}: {str(exc)[:500]})")
        raise
    jobs.succeed(job, result)
    return result


def _failed(table: Table, job: Job | None, message: str) -> None:
    # users know the table by its name, not by its location on the server
    message = public_message(message, table)
    Table.objects.filter(pk=table.pk).update(sync_state=SyncState.ERROR, last_error=message, sync_lease_until=None)
    jobs.fail(job, message)


def _row(times: CommitTimes, timeline_row: dict[str, Any], table: Table) -> Commit:
    v = timeline_row["version"]
    info = times.reader.get(v).info or {}
    fields = {name: info.get(name) for name in HISTORY_FIELDS}
    rv = fields["readVersion"]
    return Commit(
        table=table,
        version=v,
        timestamp=timeline_row["timestamp"],
        timestamp_source=timeline_row["source"],
        in_commit_timestamp=timeline_row["inCommitTimestamp"],
        commit_info_timestamp=timeline_row["commitInfoTimestamp"],
        file_modification_time=timeline_row["fileModificationTime"],
        adjusted=timeline_row["adjusted"],
        operation=_text(fields["operation"], 200),
        operation_parameters=cut_json(fields["operationParameters"]),
        operation_metrics=cut_json(fields["operationMetrics"]),
        engine_info=_text(fields["engineInfo"], 500),
        user_id=_text(fields["userId"], 500),
        user_name=_text(fields["userName"], 500),
        read_version=rv if isinstance(rv, int) and not isinstance(rv, bool) else None,
        isolation_level=_text(fields["isolationLevel"], 100),
        is_blind_append=fields["isBlindAppend"] if isinstance(fields["isBlindAppend"], bool) else None,
        user_metadata=_text(fields["userMetadata"], MAX_TEXT),
        job=cut_json(fields["job"]),
        notebook=cut_json(fields["notebook"]),
        cluster_id=_text(fields["clusterId"], 500),
        commit_info=cut_json(info, MAX_JSON_TEXT),
    )


def _sync(table: Table, job: Job | None) -> dict[str, Any]:
    storage = as_storage(table.location)
    jobs.progress(job, "listing the log")
    times = commit_times(storage, owner=owner_of(table))
    ict = times.ict
    ict_changed = (ict.enabled, ict.enablement_version, ict.enablement_timestamp) != (
        table.ict_enabled,
        table.ict_enablement_version,
        table.ict_enablement_timestamp,
    )
    last = table.last_synced_version
    if last is not None and last > times.latest:
        last = None  # the log was replaced by a shorter one: another table's history, rebuild it
        Commit.objects.filter(table=table).delete()
    existing_max = Commit.objects.filter(table=table).order_by("-version").values_list("version", flat=True).first()
    start_after = last if last is not None else (existing_max if existing_max is not None else -1)
    new_versions = [v for v in times.versions if v > start_after]
    # log cleanup may have deleted the last synced commit too: growth then replays from the
    # earliest version the log still holds (the rows already synced stay, see below)
    growth_from = start_after if start_after in times.versions else -1
    sizes: dict[int, tuple[int, int]] = {}
    if new_versions:
        sizes = growth(storage, times, growth_from, new_versions, lambda *a: jobs.progress(job, *a))
    prev = None
    if start_after in times.versions:
        prev_row = Commit.objects.filter(table=table, version=start_after).first()
        if prev_row is not None:
            prev = (prev_row.file_modification_time, prev_row.in_commit_timestamp if ict.applies(start_after) else None)
            if prev_row.timestamp_source == "file" and prev_row.timestamp is not None and not ict_changed:
                # the stored monotonized time carries the chain on: no stat of older commits
                times.adjusted.seed(times.index(start_after), prev_row.timestamp)
    total = len(new_versions)
    stored = 0
    for i in range(0, total, BATCH):
        chunk = new_versions[i : i + BATCH]
        rows, anomalies = scan_versions(times, chunk, prev)
        if rows:
            last_row = rows[-1]
            prev = (
                last_row["fileModificationTime"],
                last_row["inCommitTimestamp"] if ict.applies(last_row["version"]) else None,
            )
        commits = []
        for r in rows:
            c = _row(times, r, table)
            c.num_files, c.size_bytes = sizes.get(r["version"], (None, None))
            commits.append(c)
        with transaction.atomic():
            Commit.objects.bulk_create(commits, ignore_conflicts=True)
            Anomaly.objects.bulk_create([Anomaly(table=table, **a) for a in anomalies])
        stored += len(rows)
        jobs.progress(job, "storing history rows", stored, total)
    if ict_changed and last is not None:
        jobs.progress(job, "recomputing timestamps (ICT configuration changed)")
        _retime(table, times)
    # history outlives the log: rows of commits log cleanup deleted stay, marked expired
    first_listed = times.versions[0] if times.versions else times.earliest
    Commit.objects.filter(table=table, version__lt=first_listed, log_expired=False).update(log_expired=True)
    with transaction.atomic():
        Anomaly.objects.filter(table=table, kind="enablement_properties_inconsistent").delete()
        Anomaly.objects.filter(table=table, kind="enablement_not_after_previous").delete()
        Anomaly.objects.bulk_create([Anomaly(table=table, **a) for a in table_anomalies(times)])
        latest_row = Commit.objects.filter(table=table, version=times.latest).first()
        Table.objects.filter(pk=table.pk).update(
            sync_state=SyncState.OK,
            sync_lease_until=None,
            last_synced_version=times.latest,
            last_synced_at=timezone.now(),
            last_error="",
            ict_enabled=ict.enabled,
            ict_enablement_version=ict.enablement_version,
            ict_enablement_timestamp=ict.enablement_timestamp,
            earliest_version=times.earliest,
            num_files=latest_row.num_files if latest_row else table.num_files,
            size_bytes=latest_row.size_bytes if latest_row else table.size_bytes,
        )
        alert_hooks.commits_stored(table, new_versions, first_sync=last is None)  # evaluated by a worker
    return {"latestVersion": times.latest, "newCommits": total, "commitReads": times.reader.reads}


def _retime(table: Table, times: CommitTimes) -> None:
    rows = list(Commit.objects.filter(table=table).only("id", "version", "in_commit_timestamp"))
    for c in rows:
        if c.version in times.versions:
            ts, src = times.timestamp(c.version)
            c.timestamp, c.timestamp_source = ts, src
            c.adjusted = (
                src == "file" and times.adjusted[times.index(c.version)] != times.file_times[times.index(c.version)]
            )
    Commit.objects.bulk_update(rows, ["timestamp", "timestamp_source", "adjusted"], batch_size=BATCH)
