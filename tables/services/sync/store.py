"""Syncing a table: replaying its log incrementally into the cached history (Commit and
Anomaly rows) and the table's summary fields.

`start_sync` creates a sync Job and enqueues it on commit (tables.services.jobs.lifecycle); the worker's task
calls `sync_table`, which claims the job (queued -> running, one row), then takes the
table's sync lease, so two syncs of one table never interleave.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from tables import signals
from tables.delta import errors as delta_errors
from tables.delta.gc_pause import gc_paused
from tables.delta.history.chain import commit_digest
from tables.delta.history.growth import FileState, growth_base, growth_start
from tables.delta.history.reachability.compute import DEFAULT_LOG_RETENTION, interval_ms
from tables.delta.history.timeline import scan_versions, table_anomalies
from tables.delta.history.timestamps import CommitTimes, commit_times, times_of
from tables.delta.log.listing import LogFile, commit_name, latest_version, list_log_from, list_log_tail
from tables.delta.snapshot.state import TableConfig, read_commit_bytes
from tables.delta.storage.api import FileInfo, Storage
from tables.delta.storage.opening import as_storage
from tables.models import Anomaly, Commit, Job, JobKind, SeenBlock, SyncState, Table
from tables.services.chain import look as chain
from tables.services.chain import seen as seen_store
from tables.services.errors import public_message
from tables.services.jobs import faults
from tables.services.jobs import lifecycle as jobs
from tables.services.owner.access import owner_of
from tables.services.sync import checksums, incomplete, schedule, vanished
from tables.services.sync.commit_rows import CommitInsert, head_values, info_values
from tables.services.sync.reads import Digests, Infos, Read, prepared_in_processes, read_commits, reader_processes
from tables.services.versions import reachability, row_count

SYNC_LEASE = timedelta(minutes=15)
BATCH = 2000
MAX_ERROR = 5000

logger = logging.getLogger("tables.sync")


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
        with gc_paused():
            result = _sync(table, job)
    except delta_errors.DeltaError as exc:
        _failed(table, job, str(exc)[:MAX_ERROR], exc.code)  # e.g. path_outside_roots, as result.errorCode
        return {"error": str(exc)}
    except (OperationalError, InterfaceError) as exc:
        # the database went away mid-sync (a restart): said as such, once it answers again
        _failed(table, job, f"the database was unavailable during the sync; start it again ({str(exc)[:300]})")
        raise
    except Exception as exc:
        _failed(table, job, f"sync failed unexpectedly ({type(exc).__name__}: {str(exc)[:500]})")
        raise
    jobs.succeed(job, result)
    logger.info(
        "synced table %s: %s new commits, latest version %s",
        table.name,
        result.get("newCommits"),
        result.get("latestVersion"),
    )
    if result.get("newCommits"):  # a worker's, before any page asks
        synced = Table.objects.get(pk=table_id)
        reachability.precompute(synced)
        row_count.count_later(synced)
    return result


def _failed(table: Table, job: Job | None, message: str, code: str | None = None) -> None:
    # users know the table by its name, not by its location on the server
    message = public_message(message, table)
    Table.objects.filter(pk=table.pk).update(sync_state=SyncState.ERROR, last_error=message, sync_lease_until=None)
    schedule.record_sync_failure(table.pk)  # tried again after a backoff, not at every tick
    jobs.fail(job, message, code=code)


# The state of the last few tables synced in this process: the next sync of one lists only the
# log's tail (from the last synced commit on) and carries growth and the configuration on,
# instead of listing the whole log and loading its snapshot twice. A process without it (another
# worker, after a restart) syncs in full once.
MAX_KEPT = 4
KEEP_FILES_MAX = 2_000_000  # active files beyond which a table's state is not kept


@dataclass(slots=True)
class Kept:
    version: int  # the last synced version
    last_file: tuple[int, int]  # its commit file's (size, time): a rewritten log is not continued
    config: TableConfig
    files: FileState


_kept: OrderedDict[str, Kept] = OrderedDict()
_kept_lock = threading.Lock()


def _kept_key(table: Table) -> str:
    return f"{table.pk}:{table.location}"


def _continue(table: Table, storage: Storage, infos: list[FileInfo] | None = None) -> tuple[CommitTimes, Kept] | None:
    """The commit times of the log's tail and the kept state, when this process synced the
    table last and the log only grew since; else None (a full sync). `infos`: the log listed
    from at most the last synced version, when the sync's look listed it already."""
    with _kept_lock:
        kept = _kept.pop(_kept_key(table), None)
    last, earliest = table.last_synced_version, table.earliest_version
    if kept is None or last is None or earliest is None or kept.version != last:
        return None
    tail = list_log_from(storage, last, infos)
    versions = [c.version for c in tail.commits]
    if not versions or versions[0] != last or versions[-1] - last + 1 != len(versions):
        return None  # the last synced commit is gone, or the tail has a gap: the full path says why
    if (
        latest_version(tail) != versions[-1]
        or (tail.commits[0].size, tail.commits[0].modification_time) != kept.last_file
    ):
        return None
    oldest = (
        Commit.objects.filter(table=table, log_expired=False).order_by("version").values_list("version", flat=True)
    ).first()
    if oldest is not None and oldest < last and not storage.exists(commit_name(oldest)):
        return None  # log cleanup since the last sync: the full path marks the rows expired
    return times_of(storage, tail, kept.config, earliest, versions[-1]), kept


def _keep(table: Table, times: CommitTimes, files: FileState) -> None:
    if len(files.sizes) > KEEP_FILES_MAX or times.latest not in times.versions:
        return
    lf = times.listing.commits[times.index(times.latest)]
    try:
        last_file = (lf.size, lf.modification_time)
    except delta_errors.DeltaError:
        return
    with _kept_lock:
        _kept[_kept_key(table)] = Kept(times.latest, last_file, times.config, files)  # the newest, last
        while len(_kept) > MAX_KEPT:
            _kept.popitem(last=False)


def _changes_config(reads: list[Read]) -> bool:
    """Whether a commit may hold a protocol or metaData action (a mention is enough: the full
    path then decides), or was not kept to look at."""
    return any(data is None or b'"metaData"' in data or b'"protocol"' in data for _lf, data, _r in reads)


def _ahead(items: Iterator[Any], ahead: bool) -> Iterator[Any]:
    """`items`, each computed in a thread of its own while the caller works on the one before.
    Without `ahead`, here."""
    if not ahead:
        yield from items
        return
    done = object()
    step = lambda: next(items, done)  # noqa: E731
    with ThreadPoolExecutor(1) as producer:
        future = producer.submit(step)
        while (item := future.result()) is not done:
            future = producer.submit(step)
            yield item


def _sync(table: Table, job: Job | None) -> dict[str, Any]:
    storage = as_storage(table.location)
    # the log's directory confined first (one resolve; no request to an object store), before
    # any path below decides from kept state or the owner's answer that nothing changed
    storage.resolve(commit_name(0))
    jobs.progress(job, "listing the log")
    listed = None  # the look's listing, the continuation's too: a directory of 1,000,000 commits is read once
    if SeenBlock.objects.filter(table=table).exists():
        # first: a log with a commit taken out may not replay at all, and the finding must stay
        since = chain.sync_window_start(table)  # None (the whole log) while it is short
        if since is not None:  # the window starts at or before the last synced version
            listed = list_log_tail(storage, since)
        chain.look(table, storage, since=since, infos=listed)
    elif table.last_synced_version is not None:
        chain.adopt(table)  # synced before the chain was kept: its commits as they are now, once
    owner = owner_of(table)
    tail = _continue(table, storage, listed) if owner is None else None
    first: tuple[list[Read], Digests] | None = None
    if tail is not None:
        times = tail[0]
        new_lfs = times.listing.commits[1:]
        if len(new_lfs) <= BATCH:
            digests: Digests = {}
            first = read_commits(storage, new_lfs, digests), digests
        if first is None or len(first[0]) != len(new_lfs) or _changes_config(first[0]):
            tail, first = None, None
    if tail is None:
        times = commit_times(storage, owner=owner)
    return _store(table, job, storage, times, tail[1] if tail else None, first)


@dataclass(slots=True)
class _Start:
    """Where _store starts: the commits after `start_after` are new."""

    last: int | None  # the last synced version; None when the history is built anew
    start_after: int
    new_versions: list[int]
    growth_from: int
    ict_changed: bool  # the ICT configuration differs from the one the rows were timed with


def _store(
    table: Table,
    job: Job | None,
    storage: Storage,
    times: CommitTimes,
    kept: Kept | None,
    first: tuple[list[Read], Digests] | None,
) -> dict[str, Any]:
    """Store the rows of the commits after the last synced one, in batches: each batch's
    commits are read once (commitInfo, file time and growth). A long local log's next batches
    are read by processes while this one is stored, a remote store's next batch by a thread.
    With `kept` (see _continue) `times` lists only the log's tail."""
    start = _start_point(table, times)
    base, files, sizes = _growth_state(job, storage, times, kept, start)
    prev = _previous_times(table, times, start)
    total = len(start.new_versions)
    by_version = {c.version: c for c in times.listing.commits}
    chunks = [[by_version[v] for v in start.new_versions[i : i + BATCH]] for i in range(0, total, BATCH)]
    insert = CommitInsert()
    processes = reader_processes(storage, total) if first is None else 0
    reads = _read_batches(storage, chunks, base, insert, first, processes)
    batches = _batches(table, storage, times, chunks, reads, insert, files, base, sizes, prev)
    _write_batches(table, job, storage, insert, batches, len(chunks), total)
    _after_batches(table, job, times, kept, start)
    faults.reached("sync-stored")  # the rows stored, the table not yet marked synced
    jobs.progress(job, "checking version checksum files")
    checksums.check_after_sync(table, storage, times, start.new_versions, sizes)
    _mark_synced(table, times, kept, start)
    jobs.progress(job, "looking for files removed outside the log")
    vanished.check_after_sync(table, times.latest, start.new_versions)
    from tables.services.pins.store import look_at_held  # held objects gone whatever the log says

    look_at_held(table)
    if files is not None and (start.new_versions or kept is not None):
        _keep(table, times, files)  # a sync rolled back leaves another last version: not continued
    out = {"latestVersion": times.latest, "newCommits": total, "commitReads": times.reader.reads}
    return {**out, **incomplete.in_result(times)}  # a commit still being written, read again next time


def _start_point(table: Table, times: CommitTimes) -> _Start:
    """The versions to store; the rows of a log replaced by a shorter one are deleted first."""
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
    return _Start(last, start_after, new_versions, growth_from, ict_changed)


def _growth_state(
    job: Job | None, storage: Storage, times: CommitTimes, kept: Kept | None, start: _Start
) -> tuple[int, FileState | None, dict[int, tuple[int, int]]]:
    """(base version, the active files at it, (files, bytes) by version) to count growth from."""
    sizes: dict[int, tuple[int, int]] = {}
    files: FileState | None = None
    base = start.start_after
    if kept is not None:
        files = kept.files
    elif start.new_versions:
        jobs.progress(job, f"loading the snapshot at version {growth_base(times, start.growth_from)}")
        base, files, at_base = growth_start(storage, times, start.growth_from)
        sizes[base] = at_base
    return base, files, sizes


def _previous_times(table: Table, times: CommitTimes, start: _Start) -> tuple[int, int | None] | None:
    """The (file time, ICT) of the last stored commit, and its stored time seeded into `times`."""
    prev = None
    if start.start_after in times.versions:
        prev_row = Commit.objects.filter(table=table, version=start.start_after).first()
        if prev_row is not None:
            prev = (
                prev_row.file_modification_time,
                prev_row.in_commit_timestamp if times.ict.applies(start.start_after) else None,
            )
            if prev_row.timestamp_source == "file" and prev_row.timestamp is not None and not start.ict_changed:
                # the stored monotonized time carries the chain on: no stat of older commits
                times.adjusted.seed(times.index(start.start_after), prev_row.timestamp)
    return prev


def _read_batches(
    storage: Storage,
    chunks: list[list[LogFile]],
    base: int,
    insert: CommitInsert,
    first: tuple[list[Read], Digests] | None,
    processes: int,
) -> Iterator[tuple[list[Read], Infos | None, Digests | None]]:
    """Each batch's reads, with their digests (each commit hashed where its bytes were read),
    and their info_values when processes made them."""
    if first is not None:
        yield first[0], None, first[1]
    elif processes:
        yield from prepared_in_processes(storage, chunks, base, insert.json_text, processes)
    else:
        for chunk in chunks:
            digests: Digests = {}
            yield read_commits(storage, chunk, digests), None, digests


def _batches(
    table: Table,
    storage: Storage,
    times: CommitTimes,
    chunks: list[list[LogFile]],
    reads_by_batch: Iterator[tuple[list[Read], Infos | None, Digests | None]],
    insert: CommitInsert,
    files: FileState | None,
    base: int,
    sizes: dict[int, tuple[int, int]],
    prev: tuple[int, int | None] | None,
) -> Iterator[tuple[list[list[Any]], list[dict[str, Any]], list[tuple]]]:
    """Each batch's INSERT parameters, anomalies and first-seen digests, in order (plain
    Python: no database)."""
    ict = times.ict
    for chunk, (reads, infos, digests) in zip(chunks, reads_by_batch, strict=False):
        times.reader.remember(r for _lf, _data, r in reads if r is not None)
        rows, anomalies = scan_versions(times, [lf.version for lf in chunk], prev)
        if rows:
            last_row = rows[-1]
            prev = (
                last_row["fileModificationTime"],
                last_row["inCommitTimestamp"] if ict.applies(last_row["version"]) else None,
            )
        # each commit hashed where it was read (tables.services.chain.seen's first-seen
        # digest); only one the reads missed is read here, and a big one again for growth
        digests = digests or {}
        kept_bytes = {lf.version: data for lf, data, _r in reads}
        grows = files is not None and chunk[-1].version > base
        contents = {
            lf.version: kept_bytes.get(lf.version) or read_commit_bytes(storage, lf.path, lf.size)
            for lf in chunk
            if lf.version not in digests or (grows and lf.version > base)
        }
        if grows:
            sources = [
                (storage.display(lf.path), lf.version, contents[lf.version]) for lf in chunk if lf.version > base
            ]
            sizes.update(files.apply_sources(sources))
        stamps = {r["version"]: r["timestamp"] for r in rows}
        seen = [
            _seen(lf, digests.get(lf.version) or commit_digest(contents[lf.version]), stamps.get(lf.version))
            for lf in chunk
        ]
        infos = infos or {}
        get, json_text, table_id = times.reader.get, insert.json_text, table.pk
        heads = [head_values(r, table_id, sizes) for r in rows]
        values = [infos.get(r["version"]) or info_values(get(r["version"]).info, json_text) for r in rows]
        yield insert.params(heads, values), anomalies, seen


def _seen(lf: LogFile, digest: str, timestamp: int | None) -> tuple[int, str, int, int | None, int | None, int | None]:
    """A commit's first look for record_seen (chain/seen.py): its digest, size, listed size and time."""
    try:
        listed: tuple[int | None, int | None] = (lf.size, lf.modification_time)
    except delta_errors.DeltaError:
        listed = (None, None)
    return lf.version, digest, listed[0] or 0, listed[0], listed[1], timestamp


def _write_batches(
    table: Table,
    job: Job | None,
    storage: Storage,
    insert: CommitInsert,
    batches: Iterator[tuple[list[list[Any]], list[dict[str, Any]], list[tuple]]],
    num_chunks: int,
    total: int,
) -> None:
    """Insert each batch's rows and anomalies in a transaction of its own, reporting progress."""
    stored = 0
    # a remote store's next batch is fetched in a thread while this one is written (its reads
    # wait on the network); a local log's in processes or, when short, here
    remote = storage.remote
    for params, anomalies, seen in _ahead(batches, remote and num_chunks > 1):
        with transaction.atomic():
            insert.run(params)
            Anomaly.objects.bulk_create([Anomaly(table=table, **a) for a in anomalies])
            seen_store.record_seen(table, seen)
        stored += len(params)
        jobs.progress(job, "storing history rows", stored, total)
        faults.reached("sync-batch-stored")


def _after_batches(table: Table, job: Job | None, times: CommitTimes, kept: Kept | None, start: _Start) -> None:
    """Retime the rows when the ICT configuration changed, and mark the rows of deleted commits expired."""
    if start.ict_changed and start.last is not None:
        jobs.progress(job, "recomputing timestamps (ICT configuration changed)")
        _retime(table, times)
    if kept is None:
        # history outlives the log: rows of commits log cleanup deleted stay, marked expired
        # (a continued sync checked that nothing was deleted)
        first_listed = times.versions[0] if times.versions else times.earliest
        Commit.objects.filter(table=table, version__lt=first_listed, log_expired=False).update(log_expired=True)


def _mark_synced(table: Table, times: CommitTimes, kept: Kept | None, start: _Start) -> None:
    """In one transaction: the table's anomalies (full sync), its summary fields, the signal."""
    ict = times.ict
    with transaction.atomic():
        if kept is None:  # a continued sync keeps the configuration, hence these anomalies
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
            failures=0,
            ict_enabled=ict.enabled,
            ict_enablement_version=ict.enablement_version,
            ict_enablement_timestamp=ict.enablement_timestamp,
            earliest_version=times.earliest,
            num_files=latest_row.num_files if latest_row else table.num_files,
            size_bytes=latest_row.size_bytes if latest_row else table.size_bytes,
            last_commit_ms=latest_row.timestamp if latest_row else table.last_commit_ms,
            log_retention_ms=_log_retention(times),
            latest_metadata=incomplete.with_notice(_metadata(times), times),
        )
        signals.commits_stored.send(Table, table=table, versions=start.new_versions, first_sync=start.last is None)


MAX_SCHEMA_TEXT = 200_000  # a log's schema is hostile input too: a longer one is not kept


def _metadata(times: CommitTimes) -> dict[str, Any] | None:
    md = times.config.metadata if times.config else None
    if md is None or len(md.schema_string) > MAX_SCHEMA_TEXT:
        return None
    return {
        "schemaString": md.schema_string,
        "partitionColumns": list(md.partition_columns),
        "configuration": {str(k)[:1000]: str(v)[:1000] for k, v in list(md.configuration.items())[:500]},
    }


def _log_retention(times: CommitTimes) -> int:
    conf = (times.config.metadata.configuration or {}) if times.config else {}
    return interval_ms(conf.get("delta.logRetentionDuration"), DEFAULT_LOG_RETENTION)


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
