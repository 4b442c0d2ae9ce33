"""The sync's look at the files a table's log still references: when some are gone since the
last look (a VACUUM, or anyone deleting outside the log), a FileRemovalEvent with how many
files and bytes, the versions that became unreadable and the VACUUM commits around it.

How it looks (docs/fleet.md, "Files removed outside the log"):
- the referenced files come from reachability's kept state of the table (the versions still in
  the log, brought up to date with the new commits; tables.services.versions.reachability);
- a table is never listed at every sync, on local disk (a walk of a 100,000-file table is a
  second of CPU) or in an object store: every DELTAWEB_VACUUM_CHECK_EVERY_SYNCS syncs, or at
  once when the new commits hold a VACUUM START or END, a HEAD (a stat on disk) of each of
  DELTAWEB_VACUUM_CHECK_SAMPLE files that VACUUM deletes first (those removed longest ago that
  were there at the last look) and a quarter as many others at random; only when one is gone
  is the table listed, for exact counts (DELTAWEB_VACUUM_CHECK_LIST_ON_MISS=0: the sample's
  count alone, the event marked incomplete). The first look lists the table once: in the sync
  for a table of fewer than DELTAWEB_REACHABILITY_INLINE_VERSIONS versions, else sent to a
  worker of its own (it replays the whole retained log: seconds at 100,000 versions, which a
  first sync's job should not wait for);
- the look keeps counts and the missing files' 64-bit hashes (FileLook), not the files.

A look never fails the sync: its errors are logged and the next sync looks again.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Max, QuerySet
from django.utils import timezone

from tables import signals
from tables.delta.history import vanished as core
from tables.delta.history.metrics import normalized
from tables.delta.history.reachability.compute import ReachState, existing_files
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.models import Commit, FileLook, FileRemovalEvent, Table
from tables.services.versions import reachability

logger = logging.getLogger("tables.sync")

VACUUM_START, VACUUM_END = "VACUUM START", "VACUUM END"
VACUUM_OPS = (VACUUM_START, VACUUM_END)


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def enabled() -> bool:
    return bool(_setting("DELTAWEB_VACUUM_CHECK", True))


def every_syncs() -> int:
    """A table is looked at every this many syncs (1: every sync)."""
    return max(1, int(_setting("DELTAWEB_VACUUM_CHECK_EVERY_SYNCS", 10)))


def sample_size() -> int:
    return max(1, int(_setting("DELTAWEB_VACUUM_CHECK_SAMPLE", 16)))


def list_on_miss() -> bool:
    return bool(_setting("DELTAWEB_VACUUM_CHECK_LIST_ON_MISS", True))


def kept_max() -> int:
    """Missing files beyond which a look keeps their counts only (no hashes)."""
    return int(_setting("DELTAWEB_VACUUM_MISSING_KEPT", 500_000))


LOOK_TASK = "tables.look_at_files"


def check_after_sync(table: Table, latest: int, new_versions: list[int]) -> FileRemovalEvent | None:
    """The look after a sync stored the commits up to `latest`; the event when files vanished.
    Never raises: a look that fails is logged and the next sync looks again."""
    if not enabled():
        return None
    try:
        if not FileLook.objects.filter(table=table).exists() and latest + 1 >= reachability.inline_versions():
            from tables.services.jobs import lifecycle as jobs

            jobs.send(LOOK_TASK, table.pk, latest)  # the first look of a long log: a worker's own
            return None
        return look_at_files(table, latest, new_versions)
    except Exception:
        logger.warning("the look at the files of table %s failed", table.pk, exc_info=True)
        return None


def look_in_worker(table_id: int, latest: int) -> bool:
    """The worker's side of a first look sent by `check_after_sync`; False when the table is gone
    or another look came first."""
    table = Table.objects.filter(pk=table_id).first()
    if table is None or FileLook.objects.filter(table=table).exists():
        return False
    look_at_files(table, latest, force=True)
    return True


def look_at_files(
    table: Table, latest: int, new_versions: list[int] | None = None, *, force: bool = False
) -> FileRemovalEvent | None:
    """Look at the table's referenced files now if one is due (`force`: whatever the rate)."""
    look = FileLook.objects.filter(table=table).first()
    storage = as_storage(table.location)
    due = force or look is None or look.syncs_since + 1 >= every_syncs() or _vacuum_among(table, new_versions or [])
    if not due:
        FileLook.objects.filter(pk=look.pk).update(syncs_since=F("syncs_since") + 1)
        return None
    before = _before(look)
    now = int(time.time() * 1000)
    outcome = reachability.with_file_state(
        table.location, lambda state: _look(state, storage, before, now, sample=look is not None)
    )
    return _record(table, look, latest, outcome)


def _vacuum_among(table: Table, versions: list[int]) -> bool:
    """Whether the new commits hold a VACUUM START or END (their files go now)."""
    if not versions:
        return False
    return Commit.objects.filter(
        table=table, version__gte=min(versions), version__lte=max(versions), operation__in=VACUUM_OPS
    ).exists()


def _before(look: FileLook | None) -> core.Before:
    if look is None:
        return core.Before(None, None)
    return core.Before(
        look.version, core.unpack(look.missing_hashes), look.missing, look.missing_bytes, list(look.unreadable or [])
    )


def _look(state: ReachState, storage: Storage, before: core.Before, now: int, *, sample: bool) -> core.Outcome:
    """A look: a listing of the table, or (`sample`) a HEAD of a few files and a listing only
    when one of them is gone."""
    if sample:
        ref = core.referenced_files(state)
        size = sample_size()
        asked = core.sample_paths(ref, before, size, max(1, size // 4), random.Random())
        absent = core.absent_among(storage, asked)
        if not absent or not list_on_miss():
            return core.sampled_look(state, storage, absent, before, now)
    return core.listed_look(state, storage, existing_files(storage), before, now)


@dataclass(frozen=True)
class _Vacuum:
    start: Commit | None
    end: Commit | None


def _vacuum_of(table: Table, previous: int | None, latest: int) -> _Vacuum:
    """The VACUUM a look noticing vanished files after `previous` is attributed to: the last
    VACUUM END after the previous look (with the START before it), else a VACUUM START after it
    (a VACUUM still running)."""
    rows = Commit.objects.filter(table=table, operation__in=VACUUM_OPS, version__lte=latest).order_by("-version")
    after = rows.filter(version__gt=previous) if previous is not None else rows
    end = after.filter(operation=VACUUM_END).first()
    if end is not None:
        return _Vacuum(rows.filter(operation=VACUUM_START, version__lt=end.version).first(), end)
    return _Vacuum(after.filter(operation=VACUUM_START).first(), None)


def _metric(commit: Commit | None, *names: str) -> int | None:
    metrics = normalized(commit.operation_metrics) if commit and isinstance(commit.operation_metrics, dict) else {}
    for name in names:
        try:
            return int(metrics[name])
        except (KeyError, TypeError, ValueError):
            continue
    return None


def _attribute(event: FileRemovalEvent, vacuum: _Vacuum) -> None:
    """The VACUUM's versions, user, time and own count on the event; an earlier event of the
    same VACUUM (noticed while it ran) gets its END too."""
    commit = vacuum.end or vacuum.start
    if commit is None:
        return
    event.vacuum_start_version = vacuum.start.version if vacuum.start else None
    event.vacuum_end_version = vacuum.end.version if vacuum.end else None
    event.vacuum_user = (commit.user_name or commit.user_id or "")[:500]
    event.vacuum_timestamp = commit.timestamp
    event.vacuum_deleted_files = _metric(vacuum.end, "numDeletedFiles")
    if event.vacuum_deleted_files is None:
        event.vacuum_deleted_files = _metric(vacuum.start, "numFilesToDelete")
    if vacuum.start is not None and vacuum.end is not None:
        FileRemovalEvent.objects.filter(
            table_id=event.table_id, vacuum_start_version=vacuum.start.version, vacuum_end_version__isnull=True
        ).update(vacuum_end_version=vacuum.end.version, vacuum_deleted_files=event.vacuum_deleted_files)


def _record(table: Table, look: FileLook | None, latest: int, outcome: core.Outcome) -> FileRemovalEvent | None:
    """The event (when files vanished since a look) and the new look, in one transaction."""
    now = timezone.now()
    hashes = outcome.hashes()
    kept = len(hashes) <= kept_max()
    event = None
    with transaction.atomic():
        if look is not None and outcome.new_files > 0:
            event = _event(table, look, latest, outcome, now)
        FileLook.objects.update_or_create(
            table=table,
            defaults={
                "version": latest,
                "looked_at": now,
                "listed_at": now if outcome.complete else (look.listed_at if look else None),
                "syncs_since": 0,
                "referenced": outcome.referenced,
                "missing": len(hashes),
                "missing_bytes": outcome.missing_bytes,
                "missing_digest": core.digest(hashes),
                "missing_hashes": core.pack(hashes) if kept else None,
                "unreadable": outcome.unreadable,
                "complete": outcome.complete,
            },
        )
        if event is not None:
            signals.files_removed.send(Table, table=table, event=event)
            from tables.services.pins.store import settle_after_commit  # pins by legal holds: their objects copied

            settle_after_commit(table)
    return event


def _event(table: Table, look: FileLook, latest: int, outcome: core.Outcome, now) -> FileRemovalEvent:
    ranges = outcome.became_unreadable
    event = FileRemovalEvent(
        table=table,
        noticed_at=now,
        version=latest,
        previous_version=look.version,
        files=outcome.new_files,
        bytes=outcome.new_bytes,
        paths=outcome.new_paths,
        unreadable=ranges,
        unreadable_count=sum(last - first + 1 for first, last in ranges),
        unreadable_from=ranges[0][0] if ranges else None,
        unreadable_to=ranges[-1][1] if ranges else None,
        complete=outcome.complete,
        exact=outcome.exact,
    )
    _attribute(event, _vacuum_of(table, look.version, latest))
    event.save()
    return event


def events_of(table: Table) -> QuerySet[FileRemovalEvent]:
    """The table's file-removal events, newest first (what the API, the export and pages show)."""
    return FileRemovalEvent.objects.filter(table=table).order_by("-version", "-id")


def events_token(table: Table) -> str:
    """Names the table's file-removal events ("0" for none): cached pages showing them key by it
    (a look records an event just after the sync that cached pages are keyed by)."""
    found = FileRemovalEvent.objects.filter(table=table).aggregate(n=Count("id"), last=Max("id"))
    return f"{found['n']}:{found['last']}" if found["n"] else "0"
