"""Use cases that join the models and the Delta core; views, the API and tasks call these.

Nothing here renders HTML; everything a user can get wrong raises ServiceError (or a core
DeltaError) with a message that can be shown as is.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from datetime import timedelta
from pathlib import Path
from threading import Lock
from typing import Any
from urllib.parse import unquote

import pyarrow.compute as pc
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from tables.delta import errors as delta_errors
from tables.delta.actions import Metadata, read_json_actions
from tables.delta.commitinfo import bounded
from tables.delta.history import HISTORY_FIELDS, scan_versions, table_anomalies
from tables.delta.log import list_log
from tables.delta.replay import identity_keys
from tables.delta.report import snapshot_payload
from tables.delta.snapshot import Snapshot, load_snapshot, read_commit_bytes
from tables.delta.storage import local_path, open_storage
from tables.delta.timestamps import CommitTimes, commit_times, parse_timestamp, resolve_timestamp

from .models import Anomaly, Commit, Job, JobStatus, SyncState, Table

SYNC_LEASE = timedelta(minutes=15)
# Cold syncs replay from the earliest version for complete growth charts unless the log
# before the newest checkpoint is longer than this; then they start at the checkpoint.
GROWTH_REPLAY_LIMIT = 5000
BATCH = 2000


class ServiceError(Exception):
    """A request that cannot be served; `code` and `status` map onto API errors."""

    def __init__(self, message: str, code: str = "invalid", status: int = 400) -> None:
        super().__init__(message)
        self.message, self.code, self.status = message, code, status


# --- registration --------------------------------------------------------------------


def allowed_roots() -> list[Path]:
    return [Path(os.path.realpath(r)) for r in settings.DELTAWEB_ALLOWED_ROOTS]


def validate_location(location: str) -> str:
    """The table root, resolved (symlinks, '..'), if it is allowed and a readable Delta table."""
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
        self.keys = snap.metadata.partition_keys()

    def apply(self, storage, lf) -> tuple[int, int]:
        data = read_commit_bytes(storage, lf.path, lf.size)
        batch = read_json_actions([(str(storage.root / lf.path), lf.version, data)], self.keys)
        for _v, name, body in batch.others:
            if name == "metaData":
                self.keys = Metadata.from_dict(body).partition_keys()
        f = batch.files
        if f.num_rows:
            ks = identity_keys(f).to_pylist()
            for key, is_add, size in zip(ks, f.column("is_add").to_pylist(), f.column("size").to_pylist(), strict=True):
                old = self.sizes.pop(key, None)
                if old is not None:
                    self.total -= old
                if is_add:
                    self.sizes[key] = size or 0
                    self.total += size or 0
        return len(self.sizes), self.total


def _sync(table: Table, job: Job | None) -> dict[str, Any]:
    storage = open_storage(table.location)
    _progress(job, "listing the log")
    times = commit_times(storage)
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
    todo = [v for v in versions if v > base]
    for i, v in enumerate(todo):
        out[v] = state.apply(storage, commits[v])
        if i % 500 == 0:
            _progress(job, "replaying commits for growth", i, len(todo))
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
        return load_snapshot(table.location)
    key = (table.location, version)
    with _SNAPSHOT_LOCK:
        snap = _SNAPSHOTS.get(key)
        if snap is not None:
            _SNAPSHOTS.move_to_end(key)
            return snap
    snap = load_snapshot(table.location, version)
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
        return resolve_timestamp(commit_times(table.location), t, allow_latest=allow_latest)
    except delta_errors.TimestampOutOfRangeError as exc:
        raise ServiceError(str(exc), "timestamp_out_of_range", 400) from exc


def _schema_fields(snap: Snapshot) -> dict[str, dict[str, Any]]:
    return {f.get("name"): f for f in (snap.metadata.schema.get("fields") or []) if isinstance(f, dict)}


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
    fa, fb = _schema_fields(a), _schema_fields(b)
    schema = []
    for name in list(fa) + [n for n in fb if n not in fa]:
        if name not in fb:
            schema.append({"column": name, "change": "removed", "from": fa[name], "to": None})
        elif name not in fa:
            schema.append({"column": name, "change": "added", "from": None, "to": fb[name]})
        elif fa[name] != fb[name]:
            schema.append({"column": name, "change": "changed", "from": fa[name], "to": fb[name]})
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
