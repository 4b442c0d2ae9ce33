"""Syncing a table: replaying its log incrementally into the cached history (Commit and
Anomaly rows) and the table's summary fields.

`start_sync` creates a sync Job and enqueues it on commit (tables.jobs); the worker's task
calls `sync_table`, which claims the job (queued -> running, one row), then takes the
table's sync lease, so two syncs of one table never interleave.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import orjson
from django.db import connections, router, transaction
from django.db.models import Q
from django.db.models.constants import OnConflict
from django.utils import timezone

from alerts import hooks as alert_hooks
from tables.delta import errors as delta_errors
from tables.delta.commitinfo import CommitInfoRead, read_commit_info
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
MAX_KEY = 200  # keys of a JSON object


def truncation_marker(total: int) -> str:
    return f"…[truncated, {total} characters]"


def cut(text: str, limit: int) -> str:
    """`text`, or its start and the marker, in at most `limit` characters."""
    if len(text) <= limit:
        return text
    marker = truncation_marker(len(text))
    return text[: max(limit - len(marker), 0)] + marker


def fits(value: Any, limit: int = MAX_TEXT) -> bool:
    """Whether cut_json would leave `value` as it is (a walk that builds nothing: almost every
    commitInfo fits, and copying it cost more than reading the commit)."""
    if isinstance(value, str):
        return len(value) <= limit
    if isinstance(value, dict):
        return len(value) <= MAX_ITEMS and all(
            isinstance(k, str) and len(k) <= MAX_KEY and fits(v, limit) for k, v in value.items()
        )
    if isinstance(value, list):
        return len(value) <= MAX_ITEMS and all(fits(v, limit) for v in value)
    return True


# a quoted run longer than MAX_KEY before a colon: where a long key may be (or a false alarm,
# which only costs the full walk)
_LONG_KEY = re.compile(rb'"(?:[^"\\]|\\.){%d,}"\s*:' % (MAX_KEY + 1))


def fits_serialized(value: Any, limit: int) -> bool:
    """`fits`, answered from the value's JSON text when that is short: no string (nor, at
    MAX_ITEMS entries, any object or array) can be longer than the text itself, so only long
    keys are left to look for. Longer values are walked."""
    try:
        text = orjson.dumps(value)
    except TypeError:
        return fits(value, limit)
    # an array or object of more than MAX_ITEMS entries takes at least 2 * MAX_ITEMS + 3 bytes
    if len(text) <= min(limit, 2 * MAX_ITEMS + 2):
        return len(text) <= MAX_KEY or _LONG_KEY.search(text) is None
    return fits(value, limit)


def cut_json(value: Any, limit: int = MAX_TEXT) -> Any:
    """A JSON value with long strings cut (marked) and long objects and arrays shortened, with
    a marker entry saying how many entries were left out."""
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, dict):
        items = list(value.items())
        out = {cut(str(k), MAX_KEY): cut_json(v, limit) for k, v in items[:MAX_ITEMS]}
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
    commits. An unreachable broker fails the job and puts the table's state back as it was.
    An identical sync already queued or running is returned as it is: it was sent when created."""
    job, created = jobs.create_or_join(JobKind.SYNC, table, user)
    if not created:
        return job
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


def _row(times: CommitTimes, timeline_row: dict[str, Any], table_id: int, sizes: dict[int, tuple[int, int]]) -> dict:
    """A Commit row's column values (attribute names) for one timeline row."""
    v = timeline_row["version"]
    info = times.reader.get(v).info or {}
    # a commitInfo within the tightest limit has every part within the looser ones too
    whole = fits_serialized(info, MAX_JSON_TEXT)

    def js(value: Any) -> Any:
        return value if whole else cut_json(value)

    fields = {name: info.get(name) for name in HISTORY_FIELDS}
    rv = fields["readVersion"]
    num_files, size_bytes = sizes.get(v, (None, None))
    return {
        "table_id": table_id,
        "version": v,
        "timestamp": timeline_row["timestamp"],
        "timestamp_source": timeline_row["source"],
        "in_commit_timestamp": timeline_row["inCommitTimestamp"],
        "commit_info_timestamp": timeline_row["commitInfoTimestamp"],
        "file_modification_time": timeline_row["fileModificationTime"],
        "adjusted": timeline_row["adjusted"],
        "operation": _text(fields["operation"], 200),
        "operation_parameters": js(fields["operationParameters"]),
        "operation_metrics": js(fields["operationMetrics"]),
        "engine_info": _text(fields["engineInfo"], 500),
        "user_id": _text(fields["userId"], 500),
        "user_name": _text(fields["userName"], 500),
        "read_version": rv if isinstance(rv, int) and not isinstance(rv, bool) else None,
        "isolation_level": _text(fields["isolationLevel"], 100),
        "is_blind_append": fields["isBlindAppend"] if isinstance(fields["isBlindAppend"], bool) else None,
        "user_metadata": _text(fields["userMetadata"], MAX_TEXT),
        "job": js(fields["job"]),
        "notebook": js(fields["notebook"]),
        "cluster_id": _text(fields["clusterId"], 500),
        "commit_info": info if whole else cut_json(info, MAX_JSON_TEXT),
        "num_files": num_files,
        "size_bytes": size_bytes,
        "log_expired": False,
    }


def insert_commits(rows: list[dict[str, Any]]) -> None:
    """Store Commit rows (column values by attribute name), leaving versions stored already
    as they are: one prepared INSERT run for every row (executemany) instead of the ORM's
    model instances and statements of a few dozen rows each (SQLite's parameter limit), which
    made most of a cold sync's time."""
    if not rows:
        return
    conn = connections[router.db_for_write(Commit)]
    fields = [f for f in Commit._meta.concrete_fields if not f.primary_key]
    qn = conn.ops.quote_name
    sql = (
        f"{conn.ops.insert_statement(on_conflict=OnConflict.IGNORE)} {qn(Commit._meta.db_table)} "
        f"({', '.join(qn(f.column) for f in fields)}) VALUES ({', '.join(['%s'] * len(fields))})"
    )
    suffix = conn.ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None)
    if suffix:
        sql += " " + suffix
    as_json = {f.attname for f in fields if f.get_internal_type() == "JSONField"}

    def prep(value: Any) -> Any:
        if value is None:
            return None  # SQL NULL, as the ORM stores None in a nullable JSONField
        if conn.vendor == "sqlite":  # stored as text there: orjson writes it several times faster
            try:
                return orjson.dumps(value).decode()
            except TypeError:
                pass
        return conn.ops.adapt_json_value(value, None)

    # a column the rows do not name (one added to the model later) gets the field's default
    defaults = {f.attname: f.get_db_prep_save(f.get_default(), conn) for f in fields if f.attname not in rows[0]}
    names = [f.attname for f in fields]
    params = [
        tuple(defaults[n] if n in defaults else prep(r[n]) if n in as_json else r[n] for n in names) for r in rows
    ]
    with conn.cursor() as cursor:
        cursor.executemany(sql, params)


READ_THREADS = 4  # local commits are read and stat'ed in threads: the waits on the OS overlap


def _read_batch(times: CommitTimes, commits: dict[int, Any], versions: list[int]) -> None:
    """Read the commitInfo and the file time of `versions` in threads (local storage; a remote
    store's reader batches its requests itself). A commit that fails here is read again, in
    order, by the scan, which reports it."""
    if getattr(times.storage, "remote", False) or len(versions) < 64:
        return
    lfs = [commits[v] for v in versions if v in commits]

    def read(part: list) -> list[CommitInfoRead]:
        out = []
        for lf in part:
            try:
                out.append(read_commit_info(times.storage, lf))
                _ = lf.modification_time  # the stat, cached on the LogFile
            except delta_errors.DeltaError:
                continue
        return out

    step = max(16, len(lfs) // (READ_THREADS * 4))
    with ThreadPoolExecutor(READ_THREADS) as pool:
        for reads in pool.map(read, [lfs[i : i + step] for i in range(0, len(lfs), step)]):
            times.reader.remember(reads)


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
    by_version = {c.version: c for c in times.listing.commits}
    for i in range(0, total, BATCH):
        chunk = new_versions[i : i + BATCH]
        _read_batch(times, by_version, chunk)
        rows, anomalies = scan_versions(times, chunk, prev)
        if rows:
            last_row = rows[-1]
            prev = (
                last_row["fileModificationTime"],
                last_row["inCommitTimestamp"] if ict.applies(last_row["version"]) else None,
            )
        commits = [_row(times, r, table.pk, sizes) for r in rows]
        with transaction.atomic():
            insert_commits(commits)
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
