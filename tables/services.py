"""Use cases that join the models and the Delta core; views, the API and tasks call these.

Nothing here renders HTML; everything a user can get wrong raises ServiceError (or a core
DeltaError) with a message that can be shown as is.
"""

from __future__ import annotations

import functools
import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from threading import Event, Lock, Thread
from typing import Any
from urllib.parse import unquote

import pyarrow.compute as pc
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.text import slugify

from tables.delta import errors as delta_errors
from tables.delta.actions import Metadata, dv_unique_id, read_json_actions
from tables.delta.changes import commit_actions
from tables.delta.commitinfo import bounded
from tables.delta.history import HISTORY_FIELDS, scan_versions, table_anomalies
from tables.delta.log import list_log
from tables.delta.replay import identity_keys
from tables.delta.report import snapshot_payload
from tables.delta.restore import (
    RestorePlan,
    action_identity,
    commit_restore,
    find_restore_commit,
    plan_fingerprint,
    plan_restore,
)
from tables.delta.snapshot import Snapshot, load_snapshot, read_commit_bytes
from tables.delta.storage import local_path, open_storage
from tables.delta.timestamps import CommitTimes, commit_times, parse_timestamp, resolve_timestamp

from . import roles
from .models import Anomaly, Commit, Job, JobStatus, RestoreEvent, RestoreRequest, RestoreStatus, SyncState, Table

logger = logging.getLogger("tables.services")

SYNC_LEASE = timedelta(minutes=15)
# Cold syncs replay from the earliest version for complete growth charts unless the log
# before the newest checkpoint is longer than this; then they start at the checkpoint.
GROWTH_REPLAY_LIMIT = 5000
BATCH = 2000


class ServiceError(Exception):
    """A request that cannot be served; `code` and `status` map onto API errors."""

    def __init__(self, message: str, code: str = "invalid", status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.message, self.code, self.status = message, code, status
        self.extra = extra  # more machine-readable detail for the API, e.g. files=[...]


# --- registration --------------------------------------------------------------------


def allowed_roots() -> list[Path]:
    return [Path(os.path.realpath(r)) for r in settings.DELTAWEB_ALLOWED_ROOTS]


def allowed_path(location: str) -> Path:
    """An absolute location resolved (symlinks and '..' of its existing part) and checked to
    lie under DELTAWEB_ALLOWED_ROOTS; it need not exist yet."""
    text = (location or "").strip()
    if not text:
        raise ServiceError("Give the table's location (a directory or file:// URI).", "invalid_location")
    if len(text) > 2000 or "\x00" in text:
        raise ServiceError("That location is not a valid path.", "invalid_location")
    try:
        raw = local_path(text)
    except delta_errors.DeltaError as exc:
        raise ServiceError(str(exc), "invalid_location") from exc
    if not raw.is_absolute():
        raise ServiceError("Give an absolute path (or a file:// URI).", "invalid_location")
    real = Path(os.path.realpath(raw))
    roots = allowed_roots()
    if not any(real == root or root in real.parents for root in roots):
        raise ServiceError(
            f"{real} is outside the allowed roots ({', '.join(str(r) for r in roots)}); "
            "ask an administrator to add it to DELTAWEB_ALLOWED_ROOTS.",
            "location_not_allowed",
            403,
        )
    return real


def validate_location(location: str) -> str:
    """The table root, resolved (symlinks, '..'), if it is allowed and a readable Delta table."""
    real = allowed_path(location)
    if not real.is_dir():
        raise ServiceError(f"{real} does not exist or is not a directory.", "invalid_location")
    if not (real / "_delta_log").is_dir():
        raise ServiceError(f"{real} is not a Delta table (no _delta_log/ directory).", "not_a_delta_table")
    if not os.access(real / "_delta_log", os.R_OK | os.X_OK):
        raise ServiceError(f"{real}/_delta_log is not readable by the server.", "invalid_location")
    return str(real)


def register_table(name: str, location: str, description: str = "", user=None) -> Table:
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ServiceError("Give the table a name (at most 200 characters).", "invalid_name")
    slug = slugify(name)[:200]
    if not slug:
        raise ServiceError("The name needs at least one letter or digit.", "invalid_name")
    real = validate_location(location)
    try:
        list_log(open_storage(real))
    except delta_errors.DeltaError as exc:
        raise ServiceError(str(exc), exc.code) from exc
    if Table.objects.filter(name=name).exists() or Table.objects.filter(slug=slug).exists():
        raise ServiceError(f"A table named '{name}' is registered already.", "duplicate", 409)
    try:
        with transaction.atomic():
            return Table.objects.create(
                name=name, slug=slug, location=real, description=description or "", created_by=user
            )
    except IntegrityError as exc:
        raise ServiceError(f"A table named '{name}' is registered already.", "duplicate", 409) from exc


# --- jobs ----------------------------------------------------------------------------


def start_sync(table: Table, user=None) -> Job:
    """Create the job row, then enqueue it once the transaction commits."""
    from . import tasks

    job = Job.objects.create(kind="sync", table=table, created_by=user, stage="queued")
    if table.sync_state in (SyncState.NEVER, SyncState.OK, SyncState.ERROR):
        Table.objects.filter(pk=table.pk, sync_state=table.sync_state).update(sync_state=SyncState.QUEUED)
    transaction.on_commit(lambda: _enqueue(tasks.sync_table, job))
    return job


def _enqueue(task, job: Job) -> None:
    """Send the job to the broker; if it is unreachable, say so on the job instead of failing
    the request that already saved its rows."""
    try:
        task.delay(job.pk)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        message = f"the task queue is unreachable ({type(exc).__name__}); is the worker's Redis running?"
        Job.objects.filter(pk=job.pk).update(status=JobStatus.FAILED, error=message, finished_at=timezone.now())
        if job.table_id:
            Table.objects.filter(pk=job.table_id, sync_state=SyncState.QUEUED).update(sync_state=SyncState.NEVER)


def delete_table(table: Table) -> None:
    """Forget a table: its cached history and jobs go; the table's files are never touched."""
    table.delete()


def _progress(job: Job | None, stage: str, done: int = 0, total: int | None = None) -> None:
    if job is None:
        return
    job.stage, job.done, job.total = stage, done, total
    Job.objects.filter(pk=job.pk).update(stage=stage, done=done, total=total)


# --- sync ----------------------------------------------------------------------------


def _claim(table_id: int) -> bool:
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

    Idempotent and safe to run twice at once: the lease lets one run proceed, the unique
    (table, version) constraint keeps rows single even if leases overlap.
    """
    job = Job.objects.filter(pk=job_id).first() if job_id else None
    if job is not None:
        Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, started_at=timezone.now(), stage="starting")
    if not _claim(table_id):
        result = {"skipped": True, "reason": "another sync of this table is running"}
        if job is not None:
            Job.objects.filter(pk=job.pk).update(
                status=JobStatus.SKIPPED, stage="skipped", result=result, finished_at=timezone.now()
            )
        return result
    table = Table.objects.get(pk=table_id)
    try:
        result = _sync(table, job)
    except delta_errors.DeltaError as exc:
        Table.objects.filter(pk=table.pk).update(
            sync_state=SyncState.ERROR, last_error=str(exc)[:5000], sync_lease_until=None
        )
        if job is not None:
            Job.objects.filter(pk=job.pk).update(
                status=JobStatus.FAILED, error=str(exc)[:5000], finished_at=timezone.now()
            )
        return {"error": str(exc)}
    except Exception as exc:
        message = f"sync failed unexpectedly ({type(exc).__name__}: {str(exc)[:500]})"
        Table.objects.filter(pk=table.pk).update(sync_state=SyncState.ERROR, last_error=message, sync_lease_until=None)
        if job is not None:
            Job.objects.filter(pk=job.pk).update(status=JobStatus.FAILED, error=message, finished_at=timezone.now())
        raise
    if job is not None:
        Job.objects.filter(pk=job.pk).update(
            status=JobStatus.SUCCEEDED, stage="done", result=result, finished_at=timezone.now()
        )
    return result


def _row(times: CommitTimes, timeline_row: dict[str, Any], table: Table) -> Commit:
    v = timeline_row["version"]
    info = times.reader.get(v).info or {}
    fields = {name: bounded(info.get(name)) for name in HISTORY_FIELDS}
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
        operation=str(fields["operation"] or "")[:200],
        operation_parameters=fields["operationParameters"],
        operation_metrics=fields["operationMetrics"],
        engine_info=str(fields["engineInfo"] or "")[:500],
        user_id=str(fields["userId"] or "")[:500],
        user_name=str(fields["userName"] or "")[:500],
        read_version=rv if isinstance(rv, int) and not isinstance(rv, bool) else None,
        isolation_level=str(fields["isolationLevel"] or "")[:100],
        is_blind_append=fields["isBlindAppend"] if isinstance(fields["isBlindAppend"], bool) else None,
        user_metadata=str(fields["userMetadata"] or "")[:10000],
        job=fields["job"],
        notebook=fields["notebook"],
        cluster_id=str(fields["clusterId"] or "")[:500],
        commit_info=bounded(info, 2000),
    )


class _FileState:
    """Active files (identity -> size) carried forward commit by commit to count growth."""

    def __init__(self, snap: Snapshot) -> None:
        keys = identity_keys(snap.files).to_pylist() if snap.num_files else []
        self.sizes = dict(zip(keys, snap.files.column("size").to_pylist(), strict=True)) if keys else {}
        self.total = sum(s or 0 for s in self.sizes.values())

    def apply(self, storage, lfs: list) -> dict[int, tuple[int, int]]:
        """(files, bytes) after each of the commits `lfs` (ascending), parsed in one go.

        Partition values play no part in a file's identity, so they are not even parsed.
        """
        sources = [
            (storage.display(lf.path), lf.version, read_commit_bytes(storage, lf.path, lf.size)) for lf in lfs
        ]
        f = read_json_actions(sources, []).files
        f = f.take(pc.sort_indices(f, sort_keys=[("version", "ascending"), ("seq", "ascending")])) if f.num_rows else f
        out: dict[int, tuple[int, int]] = {}
        rows = zip(
            f.column("version").to_pylist(),
            identity_keys(f).to_pylist() if f.num_rows else [],
            f.column("is_add").to_pylist(),
            f.column("size").to_pylist(),
            strict=True,
        )
        pending = iter(lf.version for lf in lfs)
        current = next(pending, None)
        for version, key, is_add, size in rows:
            while current is not None and current < version:
                out[current] = (len(self.sizes), self.total)
                current = next(pending, None)
            old = self.sizes.pop(key, None)
            if old is not None:
                self.total -= old
            if is_add:
                self.sizes[key] = size or 0
                self.total += size or 0
        while current is not None:
            out[current] = (len(self.sizes), self.total)
            current = next(pending, None)
        return out


# --- managed tables: read through deltaweb's own commit-owner --------------------------------


def owner_of(table: Table):
    """The DatabaseOwner when deltaweb is the table's commit-owner (its ratified, un-backfilled
    commits are then read too), else None (filesystem tables, tables managed elsewhere)."""
    from .models import ManagedTable, OwnerState
    from .owner_db import DatabaseOwner

    if ManagedTable.objects.filter(table=table, state__in=(OwnerState.ACTIVE, OwnerState.RELEASING)).exists():
        return DatabaseOwner()
    return None


# --- end of managed tables ------------------------------------------------------------------


def _sync(table: Table, job: Job | None) -> dict[str, Any]:
    storage = open_storage(table.location)
    _progress(job, "listing the log")
    times = commit_times(storage, owner=owner_of(table))
    ict = times.ict
    ict_changed = (ict.enabled, ict.enablement_version, ict.enablement_timestamp) != (
        table.ict_enabled,
        table.ict_enablement_version,
        table.ict_enablement_timestamp,
    )
    last = table.last_synced_version
    if last is not None and (last > times.latest or last not in times.versions):
        last = None  # the log was replaced or cleaned beyond our cache: rebuild it
        Commit.objects.filter(table=table).delete()
    existing_max = Commit.objects.filter(table=table).order_by("-version").values_list("version", flat=True).first()
    start_after = last if last is not None else (existing_max if existing_max is not None else -1)
    new_versions = [v for v in times.versions if v > start_after]
    growth: dict[int, tuple[int, int]] = {}
    if new_versions:
        growth = _growth(storage, times, table, start_after, new_versions, job)
    prev = None
    if start_after >= 0 and start_after in times.versions:
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
            c.num_files, c.size_bytes = growth.get(r["version"], (None, None))
            commits.append(c)
        with transaction.atomic():
            Commit.objects.bulk_create(commits, ignore_conflicts=True)
            Anomaly.objects.bulk_create([Anomaly(table=table, **a) for a in anomalies])
        stored += len(rows)
        _progress(job, "storing history rows", stored, total)
    if ict_changed and last is not None:
        _progress(job, "recomputing timestamps (ICT configuration changed)")
        _retime(table, times)
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
    return {"latestVersion": times.latest, "newCommits": total, "commitReads": times.reader.reads}


def _growth(
    storage, times: CommitTimes, table: Table, start_after: int, versions: list[int], job
) -> dict[int, tuple[int, int]]:
    """Files and bytes after each new commit, replaying forward from a snapshot."""
    if start_after >= times.earliest:
        base = start_after
    else:
        cps = sorted(v for v in times.listing.checkpoints if v <= times.latest)
        newest_cp = cps[-1] if cps else None
        base = times.earliest
        if newest_cp is not None and newest_cp - times.earliest > GROWTH_REPLAY_LIMIT:
            base = newest_cp
    _progress(job, f"loading the snapshot at version {base}")
    snap = load_snapshot(storage, base, listing=times.listing)
    state = _FileState(snap)
    out = {base: (snap.num_files, snap.size_bytes)}
    commits = {c.version: c for c in times.listing.commits}
    todo = [commits[v] for v in versions if v > base]
    for i in range(0, len(todo), 500):
        out.update(state.apply(storage, todo[i : i + 500]))
        _progress(job, "replaying commits for growth", min(i + 500, len(todo)), len(todo))
    return out


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


# --- reading: snapshots, resolve, diff ----------------------------------------------

_SNAPSHOTS: OrderedDict[tuple[str, int], Snapshot] = OrderedDict()
_SNAPSHOT_LOCK = Lock()
_SNAPSHOT_CACHE_SIZE = 8


def snapshot_at(table: Table, version: int | None = None) -> Snapshot:
    """A snapshot of a version, cached (a version's state never changes)."""
    if version is None:
        return load_snapshot(table.location, owner=owner_of(table))
    key = (table.location, version)
    with _SNAPSHOT_LOCK:
        snap = _SNAPSHOTS.get(key)
        if snap is not None:
            _SNAPSHOTS.move_to_end(key)
            return snap
    snap = load_snapshot(table.location, version, owner=owner_of(table))
    with _SNAPSHOT_LOCK:
        _SNAPSHOTS[key] = snap
        while len(_SNAPSHOTS) > _SNAPSHOT_CACHE_SIZE:
            _SNAPSHOTS.popitem(last=False)
    return snap


def version_summary(table: Table, version: int) -> dict[str, Any]:
    snap = snapshot_at(table, version)
    out = snapshot_payload(snap, files=False)
    row = Commit.objects.filter(table=table, version=version).first()
    out["commitInfo"] = row.commit_info if row else None
    out["timestamp"] = row.timestamp if row else None
    out["timestampSource"] = row.timestamp_source if row else None
    return out


def version_files(table: Table, version: int, offset: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
    snap = snapshot_at(table, version)
    return snap.num_files, snap.file_dicts(offset, limit)


def resolve(table: Table, timestamp_text: str, allow_latest: bool = False) -> dict[str, Any]:
    try:
        t = parse_timestamp(timestamp_text)
    except delta_errors.InvalidTimestampError as exc:
        raise ServiceError(str(exc), "invalid_timestamp") from exc
    try:
        return resolve_timestamp(commit_times(table.location, owner=owner_of(table)), t, allow_latest=allow_latest)
    except delta_errors.TimestampOutOfRangeError as exc:
        raise ServiceError(str(exc), "timestamp_out_of_range", 400) from exc


def _schema_fields(md: Metadata) -> dict[str, dict[str, Any]]:
    return {f.get("name"): f for f in (md.schema.get("fields") or []) if isinstance(f, dict)}


def _schema_changes(a: Metadata, b: Metadata) -> list[dict[str, Any]]:
    """Columns added, removed or changed from schema a to schema b, in column order."""
    fa, fb = _schema_fields(a), _schema_fields(b)
    out = []
    for name in list(fa) + [n for n in fb if n not in fa]:
        if name not in fb:
            out.append({"column": name, "change": "removed", "from": fa[name], "to": None})
        elif name not in fa:
            out.append({"column": name, "change": "added", "from": None, "to": fb[name]})
        elif fa[name] != fb[name]:
            out.append({"column": name, "change": "changed", "from": fa[name], "to": fb[name]})
    return out


def _dict_diff(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            change = "added" if k not in a else "removed" if k not in b else "changed"
            out.append({"key": k, "change": change, "from": a.get(k), "to": b.get(k)})
    return out


def diff(table: Table, v_from: int, v_to: int, sample: int = 50) -> dict[str, Any]:
    """What changed between two versions: schema, properties, protocol, files, commits."""
    if v_from > v_to:
        raise ServiceError(f"'from' ({v_from}) must not be after 'to' ({v_to}).", "invalid_range")
    a, b = snapshot_at(table, v_from), snapshot_at(table, v_to)
    schema = _schema_changes(a.metadata, b.metadata)
    ka, kb = identity_keys(a.files), identity_keys(b.files)
    added = b.files.filter(pc.invert(pc.is_in(kb, value_set=ka))) if b.num_files else b.files
    removed = a.files.filter(pc.invert(pc.is_in(ka, value_set=kb))) if a.num_files else a.files

    def summary(t) -> dict[str, Any]:
        parts = set()
        if t.num_rows and t.schema.field("partitionValues").type.num_fields:
            for pv in t.column("partitionValues").to_pylist():
                parts.add(tuple(sorted((pv or {}).items())))
        size = int(pc.sum(t.column("size")).as_py() or 0) if t.num_rows else 0
        return {
            "count": t.num_rows,
            "bytes": size,
            "partitions": [dict(p) for p in sorted(parts)][:200],
            "partitionCount": len(parts),
        }

    def sample_paths(t) -> list[str]:
        return [unquote(p) for p in t.column("path").to_pylist()[:sample]]

    commits = list(
        Commit.objects.filter(table=table, version__gt=v_from, version__lte=v_to)
        .order_by("version")
        .values("version", "timestamp", "timestamp_source", "operation", "user_name", "operation_metrics")[:500]
    )
    return {
        "from": v_from,
        "to": v_to,
        "schema": schema,
        "partitionColumns": {"from": list(a.metadata.partition_columns), "to": list(b.metadata.partition_columns)},
        "properties": _dict_diff(a.metadata.configuration, b.metadata.configuration),
        "protocol": _dict_diff(a.protocol.to_dict(), b.protocol.to_dict()),
        "filesAdded": {**summary(added), "sample": sample_paths(added)},
        "filesRemoved": {**summary(removed), "sample": sample_paths(removed)},
        "numFiles": {"from": a.num_files, "to": b.num_files},
        "sizeBytes": {"from": a.size_bytes, "to": b.size_bytes},
        "commits": commits,
    }


# --- restores: request, decide, run ----------------------------------------------------
#
# A restore request is a row first. The analyst's request carries a dry-run plan (the pure
# planner; fast). An approver (never the requester) approves it, which queues the run in
# the same transaction and enqueues the task on commit. A worker claims the run with a
# conditional UPDATE (queued -> running) that must touch exactly one row, and the engine
# (Spark, or the pure planner when DELTAWEB_RESTORE_ENGINE=local) re-plans on the current
# head; apply_approved_plan commits only the approved change, with the request's txnId, so a
# retried run never commits twice. Every transition is a
# RestoreEvent. Workers that die are noticed by requeue_stuck_restores (a beat task).

RESTORE_WARNING = (
    "a restore re-emits its files with dataChange=true; streaming and change-data readers will see them again"
)
PLAN_SAMPLE = 50  # files to add / remove listed with a stored plan
MAX_TEXT = 5000  # reason and comments
MAX_RESTORE_ATTEMPTS = 3  # claims by workers that then went silent, before the request fails
_LOG_UNREADABLE = {
    "not_a_delta_table",
    "log_gap",
    "state_reconstruction",
    "unsupported_feature",
    "corrupt_log",
    "corrupt_checkpoint",
    "storage_error",
}

# The engine that plans an approved restore again at run time, on the current head:
# planner(location, *, version, timestamp, ignore_missing_files, allow_protocol_downgrade,
#         check_files, progress) -> RestorePlan. Spark's spark_plan_restore (tables.tasks) or
# the pure plan_restore (local_planner); both make the same plan (same fingerprint).
Planner = Callable[..., RestorePlan]


def _one_line(text: object, limit: int = 500) -> str:
    """The first non-empty line of a message, bounded: no traceback ever reaches a user."""
    first = next((line.strip() for line in str(text).splitlines() if line.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _event(req: RestoreRequest, actor, from_status: str, to_status: str, note: str = "") -> None:
    RestoreEvent.objects.create(
        request=req, actor=actor, from_status=from_status, to_status=to_status, note=note[:MAX_TEXT]
    )


def _text(value: str | None, what: str, required: bool, code: str) -> str:
    text = (value or "").strip()
    if required and not text:
        raise ServiceError(f"Give a {what}.", code)
    if len(text) > MAX_TEXT:
        raise ServiceError(f"The {what} is too long (at most {MAX_TEXT} characters).", code)
    return text


def _restore_target(version: int | None, timestamp: str | None) -> tuple[int | None, str | None]:
    ts = (timestamp or "").strip() if isinstance(timestamp, str) else timestamp
    ts = ts if ts not in ("", None) else None
    if (version is None) == (ts is None):
        raise ServiceError("Give either the version to restore or a timestamp, not both.", "invalid_target")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or not 0 <= version < 2**63):
        raise ServiceError(f"The version to restore must be a number (0 or more), not {version!r}.", "invalid_target")
    if ts is not None and len(str(ts)) > 64:
        raise ServiceError("The timestamp is too long (at most 64 characters).", "invalid_timestamp")
    return version, (str(ts) if ts is not None else None)


def _restore_error(exc: delta_errors.DeltaError) -> ServiceError:
    """A core error met while planning, as the request's answer (nothing is saved)."""
    if isinstance(exc, delta_errors.MissingFilesError):
        count = exc.details.get("count", len(exc.files))
        return ServiceError(exc.message, exc.code, 400, files=exc.files, missingCount=count)
    status = 422 if exc.code in _LOG_UNREADABLE else 400
    return ServiceError(_one_line(exc.message, MAX_TEXT), exc.code, status)


def _file_sample(actions: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if actions is None:
        return None
    out = []
    for a in sorted(actions, key=lambda a: str(a.get("path")))[:PLAN_SAMPLE]:
        dv = a.get("deletionVector") or None
        out.append(
            {
                "path": unquote(str(a.get("path"))),
                "size": a.get("size"),
                "partitionValues": a.get("partitionValues") or {},
                "deletionVector": dv_unique_id(dv) if dv else None,
            }
        )
    return out


def _side(snap: Snapshot) -> dict[str, Any]:
    md = snap.metadata
    return {
        "version": snap.version,
        "numFiles": snap.num_files,
        "sizeBytes": snap.size_bytes,
        "protocol": snap.protocol.to_dict(),
        "partitionColumns": list(md.partition_columns),
        "numColumns": len(_schema_fields(md)),
    }


def _plan_compare(table: Table, plan: dict[str, Any]) -> dict[str, Any]:
    """Current head, target and the table after the restore, side by side."""
    head, target = snapshot_at(table, plan["readVersion"]), snapshot_at(table, plan["targetVersion"])
    after_md = Metadata.from_dict(plan["metadata"])
    metrics = plan.get("metrics") or {}
    after = {
        "numFiles": int(metrics.get("numOfFilesAfterRestore", target.num_files)),
        "sizeBytes": int(metrics.get("tableSizeAfterRestore", target.size_bytes)),
        "protocol": plan["protocol"],
        "partitionColumns": list(after_md.partition_columns),
        "numColumns": len(_schema_fields(after_md)),
    }
    return {
        "head": _side(head),
        "target": _side(target),
        "after": after,
        "schema": _schema_changes(head.metadata, after_md),
        "properties": _dict_diff(head.metadata.configuration, after_md.configuration),
        "protocol": _dict_diff(head.protocol.to_dict(), plan["protocol"]),
        "partitionColumns": {"from": list(head.metadata.partition_columns), "to": after["partitionColumns"]},
    }


def plan_payload(table: Table, plan: dict[str, Any], first_read_version: int | None = None) -> dict[str, Any]:
    """What a request stores of a plan (RestorePlan.to_dict): everything but the file
    actions (the fingerprint stands for them; the run plans again), a bounded sample of
    them, the side-by-side comparison, the warning, and the head of the request's first
    plan (where a retry looks for its own commit)."""
    out = {k: v for k, v in plan.items() if k not in ("adds", "removes")}
    out["sample"] = {"add": _file_sample(plan.get("adds")), "remove": _file_sample(plan.get("removes"))}
    out["compare"] = _plan_compare(table, plan)
    out["warning"] = RESTORE_WARNING
    out["firstReadVersion"] = first_read_version if first_read_version is not None else plan["readVersion"]
    return out


def _resolution_rule(plan: dict[str, Any]) -> str:
    resolution = plan.get("resolution")
    if resolution:
        return str(resolution.get("rule") or "")
    return f"version {plan['targetVersion']} as given"


def request_restore(
    table: Table,
    user,
    *,
    reason: str,
    version: int | None = None,
    timestamp: str | None = None,
    ignore_missing_files: bool = False,
    allow_protocol_downgrade: bool = False,
) -> RestoreRequest:
    """A pending restore request with its dry-run plan; a plan that cannot be made (missing
    files not ignored, target not before the latest version, ...) refuses and saves nothing."""
    if not roles.can_request_restore(user):
        raise ServiceError(
            "Requesting a restore needs the analyst or approver role (or staff).", "permission_denied", 403
        )
    reason = _text(reason, "reason for the restore (the approver reads it)", True, "invalid_reason")
    version, timestamp = _restore_target(version, timestamp)
    try:
        plan = plan_restore(
            table.location,
            version=version,
            timestamp=timestamp,
            ignore_missing_files=bool(ignore_missing_files),
            allow_protocol_downgrade=bool(allow_protocol_downgrade),
            owner=owner_of(table),  # a managed table: as its owner knows it
        )
        payload = plan_payload(table, plan.to_dict())
    except delta_errors.DeltaError as exc:
        raise _restore_error(exc) from exc
    with transaction.atomic():
        req = RestoreRequest.objects.create(
            table=table,
            target_version=version,
            target_timestamp=timestamp or "",
            resolved_version=plan.target_version,
            resolution_rule=_resolution_rule(payload),
            reason=reason,
            ignore_missing_files=bool(ignore_missing_files),
            allow_protocol_downgrade=bool(allow_protocol_downgrade),
            requested_by=user,
            plan=payload,
            plan_head_version=plan.read_version,
            plan_fingerprint=plan.fingerprint,
        )
        _event(req, user, "", RestoreStatus.PENDING, f"requested a restore to version {plan.target_version}: {reason}")
    return req


def check_can_decide(req: RestoreRequest, user) -> None:
    """Approvers (or staff) decide, never on their own request; ServiceError 403 otherwise."""
    if not roles.can_approve(user):
        raise ServiceError(
            "Approving or rejecting restores needs the approver role (or staff).", "permission_denied", 403
        )
    if req.requested_by_id is not None and req.requested_by_id == user.pk:
        raise ServiceError(
            f"You requested restore #{req.pk}; another approver must approve or reject it.", "own_request", 403
        )


def _decide(req: RestoreRequest, user, to_status: str, comment: str, fingerprint: str | None) -> None:
    current = RestoreRequest.objects.filter(pk=req.pk).values_list("status", "plan_fingerprint").first()
    if current is None:
        raise ServiceError(f"There is no restore request {req.pk}.", "not_found", 404)
    status, current_fingerprint = current
    verb = "approved" if to_status == RestoreStatus.APPROVED else "rejected"
    if status not in RestoreStatus.awaiting_approval():
        raise ServiceError(
            f"Restore #{req.pk} is {RestoreStatus(status).label}; only pending or stale requests can be {verb}.",
            "invalid_state",
            409,
        )
    if fingerprint and fingerprint != current_fingerprint:
        raise ServiceError(
            f"The plan of restore #{req.pk} changed since you looked at it; review the new plan.", "plan_changed", 409
        )
    decided = RestoreRequest.objects.filter(pk=req.pk, status=status).update(
        status=to_status, approver=user, approver_comment=comment, decided_at=timezone.now()
    )
    if decided != 1:
        raise ServiceError(f"Restore #{req.pk} was decided by someone else just now.", "invalid_state", 409)
    _event(req, user, status, to_status, comment)


def approve_restore(req: RestoreRequest, user, comment: str = "", fingerprint: str | None = None) -> RestoreRequest:
    """Approve the current plan and queue its run (enqueued once the transaction commits).
    `fingerprint`, when given, must be the plan's: the approver approves what they saw."""
    check_can_decide(req, user)
    comment = _text(comment, "comment", False, "invalid_comment")
    with transaction.atomic():
        _decide(req, user, RestoreStatus.APPROVED, comment, fingerprint)
        _queue_restore(req, user)
    req.refresh_from_db()
    return req


def reject_restore(req: RestoreRequest, user, comment: str = "") -> RestoreRequest:
    check_can_decide(req, user)
    comment = _text(comment, "comment saying why the restore is rejected", True, "invalid_comment")
    with transaction.atomic():
        _decide(req, user, RestoreStatus.REJECTED, comment, None)
        RestoreRequest.objects.filter(pk=req.pk).update(finished_at=timezone.now(), stage="rejected")
    req.refresh_from_db()
    return req


def _queue_restore(req: RestoreRequest, actor) -> None:
    queued = RestoreRequest.objects.filter(pk=req.pk, status=RestoreStatus.APPROVED).update(
        status=RestoreStatus.QUEUED, stage="queued", done=0, total=None, error="", progress_at=timezone.now()
    )
    if queued == 1:
        _event(req, actor, RestoreStatus.APPROVED, RestoreStatus.QUEUED, "queued for a worker")
        pk = req.pk
        transaction.on_commit(lambda: _send_restore(pk))


def _send_restore(pk: int) -> None:
    """Send the run to the broker; if it is unreachable the request stays queued and
    requeue_stuck_restores sends it again later."""
    from . import tasks

    try:
        tasks.run_restore.delay(pk)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        RestoreRequest.objects.filter(pk=pk, status=RestoreStatus.QUEUED).update(
            error=f"the task queue is unreachable ({type(exc).__name__}); the restore stays queued and is sent again"
        )


# --- restores: the worker's side --------------------------------------------------------


class _ClaimLost(Exception):
    """Another worker took the run over (this one was thought dead): stop without writing."""


class _RestoreRun:
    """One worker's claim on a request: progress, heartbeat and the final write all go
    through an UPDATE conditional on (running, this attempt)."""

    def __init__(self, req: RestoreRequest, attempt: int) -> None:
        self.req, self.attempt = req, attempt

    def _mine(self):
        return RestoreRequest.objects.filter(pk=self.req.pk, status=RestoreStatus.RUNNING, attempts=self.attempt)

    def progress(self, stage: str, done: int | None = 0, total: int | None = None, **_ignored: Any) -> None:
        updated = self._mine().update(
            stage=str(stage)[:200], done=int(done or 0), total=total, progress_at=timezone.now()
        )
        if updated != 1:
            raise _ClaimLost()

    def beat(self) -> None:
        self._mine().update(progress_at=timezone.now())

    @contextmanager
    def heartbeat(self):
        """Touch progress_at from a thread while the engine works, so that only a dead worker
        looks stuck. Skipped inside a transaction (tests): another connection cannot see it."""
        every = float(settings.DELTAWEB_RESTORE_HEARTBEAT_SECONDS)
        if every <= 0 or connection.in_atomic_block:
            yield
            return
        stop = Event()

        def loop() -> None:
            try:
                while not stop.wait(every):
                    self.beat()
            finally:
                connection.close()  # this thread's own connection

        thread = Thread(target=loop, name=f"restore-{self.req.pk}-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=every + 5)

    def finish(self, status: str, note: str, **fields: Any) -> bool:
        if status in RestoreStatus.terminal():
            fields.setdefault("finished_at", timezone.now())
        with transaction.atomic():
            done = self._mine().update(status=status, progress_at=timezone.now(), **fields) == 1
            if done:
                _event(self.req, None, RestoreStatus.RUNNING, status, note)
        return done


def _claim_restore(req: RestoreRequest) -> int | None:
    """queued -> running, touching exactly one row; the attempt number, or None."""
    now = timezone.now()
    claimed = RestoreRequest.objects.filter(pk=req.pk, status=RestoreStatus.QUEUED).update(
        status=RestoreStatus.RUNNING,
        started_at=now,
        progress_at=now,
        attempts=F("attempts") + 1,
        stage="claimed by a worker",
        done=0,
        total=None,
        error="",
    )
    if claimed != 1:
        return None
    attempt = RestoreRequest.objects.values_list("attempts", flat=True).get(pk=req.pk)
    _event(req, None, RestoreStatus.QUEUED, RestoreStatus.RUNNING, f"claimed by a worker (attempt {attempt})")
    return attempt


def run_restore(request_id: int, planner: Planner) -> dict[str, Any]:
    """Run an approved, queued restore (the Celery task calls this). Outcomes: succeeded
    (with the new version and its checks), stale (the plan on the current head is not the
    approved one: approve again), failed (missing files, or any error, in one line), conflict
    (a competing commit, named). Safe to run twice: only one claim wins, and the commit
    carries the request's txnId."""
    req = RestoreRequest.objects.select_related("table").filter(pk=request_id).first()
    if req is None:
        return {"skipped": True, "reason": f"there is no restore request {request_id}"}
    attempt = _claim_restore(req)
    if attempt is None:
        status = RestoreRequest.objects.filter(pk=request_id).values_list("status", flat=True).first()
        return {"skipped": True, "reason": f"restore #{request_id} is {status}, not queued"}
    run = _RestoreRun(req, attempt)
    try:
        with run.heartbeat():
            outcome = _execute(req, run, planner)
    except _ClaimLost:
        return {"skipped": True, "reason": "another worker took the restore over"}
    except delta_errors.MissingFilesError as exc:
        run.finish(RestoreStatus.FAILED, "files to restore are missing", error=exc.message, result=_missing(exc))
        return {"status": RestoreStatus.FAILED}
    except delta_errors.CommitConflictError as exc:
        versions = exc.details.get("versions") or [exc.version]
        note = f"conflicts with version{'s' if len(versions) > 1 else ''} {', '.join(map(str, versions))}"
        run.finish(RestoreStatus.CONFLICT, note, error=exc.message, result={"competingVersions": versions})
        return {"status": RestoreStatus.CONFLICT}
    except delta_errors.DeltaError as exc:
        run.finish(RestoreStatus.FAILED, "the restore failed", error=_one_line(exc.message, MAX_TEXT))
        return {"status": RestoreStatus.FAILED}
    except Exception as exc:
        logger.exception("restore #%s failed unexpectedly", request_id)
        error = f"the restore failed unexpectedly ({type(exc).__name__}: {_one_line(exc, 300)})"
        run.finish(RestoreStatus.FAILED, "the restore failed", error=error)
        return {"status": RestoreStatus.FAILED}
    if outcome.get("stale"):
        return _finish_stale(run, outcome["plan"])
    return _finish_succeeded(run, {**outcome, "engine": getattr(planner, "engine", "custom")})


def _missing(exc: delta_errors.MissingFilesError) -> dict[str, Any]:
    return {"missingFiles": exc.files, "missingCount": exc.details.get("count", len(exc.files))}


def _execute(req: RestoreRequest, run: _RestoreRun, planner: Planner) -> dict[str, Any]:
    run.progress("looking for an earlier attempt's commit")
    done = restore_commit_version(req)
    if done is None:
        owner = _restore_owner(req.table, run)
        out = apply_approved_plan(req.table.location, req.plan or {}, req.txn_id, planner, run.progress, owner=owner)
        if not out.get("stale"):
            return out
        done = restore_commit_version(req)  # a silent earlier attempt may have committed meanwhile
        if done is None:
            return out
    return {"version": done, "alreadyCommitted": True, "txnId": req.txn_id}


def restore_commit_version(req: RestoreRequest) -> int | None:
    """The version an earlier attempt committed with this request's txnId, if any: looked
    for after the head of the request's first plan (txn ids are per request)."""
    after = (req.plan or {}).get("firstReadVersion", req.plan_head_version)
    return find_restore_commit(
        req.table.location, -1 if after is None else int(after), req.txn_id, owner=owner_of(req.table)
    )


def _restore_owner(table: Table, run: _RestoreRun):
    """A managed table's restore goes through deltaweb's commit-owner (its policy checks the
    request's txnId); its ratified commits are backfilled first, so that the plan's reads of
    commit files find them in `_delta_log/`. None for a filesystem table."""
    owner = owner_of(table)
    if owner is not None:
        from .owner_services import backfill

        run.progress("backfilling the managed table's ratified commits")
        try:
            backfill(table.pk)
        except delta_errors.DeltaError as exc:  # the plan reads through the owner regardless
            logger.warning("backfill before the restore of %s failed: %s", table, exc)
    return owner


def restore_check(table: Table, version: int, target_version: int) -> dict[str, Any]:
    """Does the new version hold exactly the target's files (path + deletion vector)?"""
    new, target = snapshot_at(table, version), snapshot_at(table, target_version)
    a = set(identity_keys(new.files).to_pylist()) if new.num_files else set()
    b = set(identity_keys(target.files).to_pylist()) if target.num_files else set()

    def sample(keys: set[str]) -> list[str]:
        return sorted(unquote(k.split("\x00")[0]) for k in keys)[:10]

    return {
        "version": version,
        "targetVersion": target_version,
        "filesEqualTarget": a == b,
        "numFiles": len(a),
        "targetNumFiles": len(b),
        "onlyInResult": len(a - b),
        "onlyInTarget": len(b - a),
        "onlyInResultSample": sample(a - b),
        "onlyInTargetSample": sample(b - a),
        "metadataEqualsTarget": new.metadata.schema_string == target.metadata.schema_string
        and new.metadata.partition_columns == target.metadata.partition_columns,
    }


_RESULT_KEYS = (
    "version",
    "alreadyCommitted",
    "txnId",
    "readVersion",
    "targetVersion",
    "rebasedOver",
    "metrics",
    "inCommitTimestamp",
    "protocolOutcome",
    "fingerprint",
    "skippedMissingFiles",
    "engineInfo",
    "engine",
)


def _finish_succeeded(run: _RestoreRun, out: dict[str, Any]) -> dict[str, Any]:
    req = run.req
    version = int(out["version"])
    run.progress(f"checking version {version} against version {req.resolved_version}")
    check = restore_check(req.table, version, int(req.resolved_version))
    commit_check = out.get("verification")
    verified = bool(out["verified"]) if "verified" in out else check["filesEqualTarget"]
    result = {k: out[k] for k in _RESULT_KEYS if k in out}
    sync = start_sync(req.table)
    result["syncJob"] = sync.pk
    note = f"committed version {version}" + (" (found from an earlier attempt)" if out.get("alreadyCommitted") else "")
    run.finish(
        RestoreStatus.SUCCEEDED,
        note,
        stage="done",
        result_version=version,
        verification={"verified": verified, "commit": commit_check, "target": check},
        result=result,
    )
    return {"status": RestoreStatus.SUCCEEDED, "version": version}


def _finish_stale(run: _RestoreRun, plan: dict[str, Any]) -> dict[str, Any]:
    req = run.req
    payload = plan_payload(req.table, plan, (req.plan or {}).get("firstReadVersion", req.plan_head_version))
    note = (
        f"the table moved on (planned on version {req.plan_head_version}, now {plan['readVersion']}) and the "
        f"restore would change other files: approve the new plan"
    )
    run.finish(
        RestoreStatus.STALE,
        note,
        stage="stale: waiting for approval of the new plan",
        plan=payload,
        plan_head_version=plan["readVersion"],
        plan_fingerprint=plan["fingerprint"],
        approver=None,
        approver_comment="",
        decided_at=None,
    )
    return {"status": RestoreStatus.STALE}


def local_planner(location: str, *, progress=None, **kwargs: Any) -> RestorePlan:
    """The pure engine (DELTAWEB_RESTORE_ENGINE=local): plan_restore in the worker."""
    if progress is not None:
        progress("planning on the current head (local engine)", 0, None)
    return plan_restore(location, **kwargs)


local_planner.engine = "local"  # recorded with the result


def apply_approved_plan(
    location: str, approved: dict[str, Any], txn_id: str, planner: Planner, progress, owner=None
) -> dict[str, Any]:
    """Commit the approved change, or report that it no longer applies.

    The restore is planned again on the current head. Same fingerprint: commit that plan.
    Otherwise, when the commits since the approved plan's head only added files the plan does
    not touch, the approved change still applies on top of them (they are kept, not removed):
    commit it, rebased. Anything else (files of the plan changed, metadata, protocol, files
    gone missing) is stale: {"stale": True, "plan": the new plan}, nothing committed. Writers
    that commit while this runs are checked by commit_restore, which rebases over unrelated
    commits or raises CommitConflictError naming the competing versions.
    """
    requested = approved.get("requested") or {}
    timestamp = requested.get("timestamp")
    if owner is not None:  # a managed table: planned as its owner knows it (the local engine reads through it)
        planner = functools.partial(local_planner, owner=owner)
    current = planner(
        location,
        version=requested.get("version") if timestamp is None else None,
        timestamp=timestamp,
        ignore_missing_files=bool(approved.get("ignoreMissingFiles")),
        allow_protocol_downgrade=bool(approved.get("allowProtocolDowngrade")),
        check_files=bool(approved.get("filesChecked", True)),
        progress=progress,
    )
    plan = current if current.fingerprint == approved.get("fingerprint") else _over_appends(location, current, approved)
    if plan is None:
        return {"stale": True, "plan": current.to_dict()}
    progress("committing", 0, 1)
    result = commit_restore(location, plan, txn_id=txn_id, owner=owner)
    progress("committing", 1, 1)
    return result


def _over_appends(location: str, current: RestorePlan, approved: dict[str, Any]) -> RestorePlan | None:
    """The approved change on a head that moved on by appends elsewhere: the current plan
    less the removal of the files added since the approved head, if that is exactly the
    approved change (same fingerprint); else None. The rule of the core's approved_change,
    found from the commits since the approved head, as a request keeps no file actions."""
    head = approved.get("readVersion")
    if head is None or current.read_version <= head:
        return None
    try:
        added = _added_since(location, int(head), current.read_version)
    except (FileNotFoundError, delta_errors.DeltaError, ValueError):
        return None  # a commit we cannot read: let the approver look at the new plan
    kept = [r for r in current.removes if action_identity(r) not in added]
    if not added or len(kept) == len(current.removes):
        return None
    plan = current.replace(removes=kept, read_version=int(head))
    plan.fingerprint = plan_fingerprint(plan)
    return plan if plan.fingerprint == approved.get("fingerprint") else None


def _added_since(location: str, after: int, upto: int) -> set[str]:
    """Identities of the files added by commits after..upto (from the commit files)."""
    storage = open_storage(location)
    return {
        action_identity(body)
        for v in range(after + 1, upto + 1)
        for name, body in commit_actions(storage, v)
        if name == "add" and isinstance(body.get("path"), str)
    }


def requeue_stuck_restores(older_than: timedelta | None = None) -> list[int]:
    """Requests whose worker went silent: running with no progress or heartbeat since
    `older_than` (DELTAWEB_RESTORE_STUCK_MINUTES) go back to queued and are sent again,
    or fail after MAX_RESTORE_ATTEMPTS claims; queued ones whose message was lost are sent
    again. A re-run never commits twice (txnId). Returns the ids acted on."""
    if older_than is None:
        older_than = timedelta(minutes=settings.DELTAWEB_RESTORE_STUCK_MINUTES)
    now = timezone.now()
    silent = Q(progress_at__lt=now - older_than) | Q(progress_at__isnull=True)
    acted = []
    for req in RestoreRequest.objects.filter(silent, status=RestoreStatus.RUNNING):
        if _requeue_one(req, now):
            acted.append(req.pk)
    for req in RestoreRequest.objects.filter(silent, status=RestoreStatus.QUEUED):
        sent = RestoreRequest.objects.filter(pk=req.pk, status=RestoreStatus.QUEUED, progress_at=req.progress_at)
        if sent.update(progress_at=now, stage="queued (sent again)") == 1:
            pk = req.pk
            transaction.on_commit(lambda pk=pk: _send_restore(pk))
            acted.append(req.pk)
    return acted


def _requeue_one(req: RestoreRequest, now) -> bool:
    same = RestoreRequest.objects.filter(
        pk=req.pk, status=RestoreStatus.RUNNING, attempts=req.attempts, progress_at=req.progress_at
    )
    since = req.progress_at.isoformat(timespec="seconds") if req.progress_at else "the claim"
    with transaction.atomic():
        if req.attempts >= MAX_RESTORE_ATTEMPTS:
            error = (
                f"the worker stopped {req.attempts} times while running this restore (last sign of life {since}); "
                "check the worker logs, then request the restore again"
            )
            if same.update(status=RestoreStatus.FAILED, error=error, finished_at=now, progress_at=now) != 1:
                return False
            _event(req, None, RestoreStatus.RUNNING, RestoreStatus.FAILED, error)
            return True
        if (
            same.update(status=RestoreStatus.QUEUED, stage="queued again (the worker went silent)", progress_at=now)
            != 1
        ):
            return False
        _event(req, None, RestoreStatus.RUNNING, RestoreStatus.QUEUED, f"no sign of life since {since}: queued again")
        pk = req.pk
        transaction.on_commit(lambda: _send_restore(pk))
    return True
