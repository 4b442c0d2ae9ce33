"""The change probe: which registered tables have new commits, at about one storage request
each, so that a sync job runs only for a table that changed.

The beat's `probe_due` picks the tables whose `next_check_at` has come (each table's first
check falls at a random point of the interval, so a fleet is spread over it instead of firing
at one instant), claims them with one UPDATE, and sends them in batches to `probe_tables`. A
probe asks the storage for the head of the commit after the last synced one (one request,
through the storage boundary, so confinement holds); a table deltaweb is the commit owner of
is answered from the database without any. Unchanged tables get one UPDATE per batch and no
Job row; a changed one gets its sync job. A table whose probe or sync keeps failing is tried
again after a backoff that doubles up to DELTAWEB_SYNC_BACKOFF_MAX_SECONDS, and its page
says when.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tables.delta import errors as delta_errors
from tables.delta.log.listing import commit_name
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.models import OwnerState, SyncState, Table
from tables.services.errors import one_line, public_message
from tables.services.sync import incomplete
from tables.services.sync.schedule import backoff, interval
from tables.services.sync.store import start_sync

logger = logging.getLogger("tables.probe")

CLAIM = timedelta(minutes=5)  # a claimed table is not picked again while its batch runs


def first_check(now: datetime | None = None) -> datetime:
    """A new table's first check: a random point of the interval, so tables spread over it."""
    return (now or timezone.now()) + interval() * random.random()


def spread_unscheduled(now: datetime | None = None) -> int:
    """Give every table without a check time one at a random point of the next interval."""
    now = now or timezone.now()
    ids = list(Table.objects.filter(next_check_at__isnull=True).values_list("pk", flat=True))
    rows = [Table(pk=pk, next_check_at=first_check(now)) for pk in ids]
    Table.objects.bulk_update(rows, ["next_check_at"], batch_size=500)
    return len(rows)


def claim_due(limit: int, now: datetime | None = None) -> list[int]:
    """The ids of tables whose check is due, oldest first, claimed so that no other tick sends
    them again while their batch runs (the probe sets their next check)."""
    now = now or timezone.now()
    with transaction.atomic():
        due = Table.objects.filter(next_check_at__lte=now).order_by("next_check_at")
        ids = list(due.values_list("pk", flat=True)[:limit])
        Table.objects.filter(pk__in=ids).update(next_check_at=now + CLAIM)
    return ids


def batches(ids: list[int], size: int) -> Iterable[list[int]]:
    for i in range(0, len(ids), size):
        yield ids[i : i + size]


@dataclass
class ProbeResult:
    unchanged: list[int] = field(default_factory=list)
    changed: list[int] = field(default_factory=list)
    busy: list[int] = field(default_factory=list)  # a sync queued or running already
    failed: dict[int, str] = field(default_factory=dict)
    requests: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "unchanged": len(self.unchanged),
            "changed": len(self.changed),
            "busy": len(self.busy),
            "failed": len(self.failed),
            "requests": self.requests,
        }


def confined(table: Table) -> Storage:
    """The table's storage, its log's directory resolved through the storage boundary: on local
    disk one realpath (a `_delta_log` swapped for a symbolic link out of the roots raises
    PathOutsideRootsError here), on an object store no request at all."""
    storage = as_storage(table.location)
    storage.resolve(commit_name(0))
    return storage


def has_new_commit(table: Table, storage: Storage | None = None) -> bool:
    """Whether the commit after the last synced one exists: one HEAD (or stat) of its file.
    A commit the last sync found incomplete (its writer not done) counts once its size
    changed: a writer that stopped half-way does not cost a sync at every tick."""
    version = table.last_synced_version + 1
    try:
        info = (storage or confined(table)).head(commit_name(version))
    except FileNotFoundError:
        return False
    return not _same_incomplete(table, version, info.size)


def _same_incomplete(table: Table, version: int, size: int) -> bool:
    """Whether the last sync left `version` out as incomplete at this very size (read only
    for a table whose next commit file exists: the metadata is loaded then)."""
    stored = table.latest_metadata.get(incomplete.KEY) if isinstance(table.latest_metadata, dict) else None
    return isinstance(stored, dict) and stored.get("version") == version and stored.get("size") == size


def _classify(table: Table, owned: dict[int, int], result: ProbeResult) -> None:
    if table.sync_state in (SyncState.QUEUED, SyncState.SYNCING):
        result.busy.append(table.pk)
        return
    if table.last_synced_version is None or table.sync_state in (SyncState.ERROR, SyncState.NEVER):
        result.changed.append(table.pk)  # never synced, or its last sync failed: its backoff is over
        return
    try:
        # confinement first, whatever answers "changed": a table whose log now leads out of the
        # roots is refused at this tick, not at its next commit (the database answers an owned one)
        storage = confined(table)
        if table.pk in owned:  # deltaweb ratifies its commits: the database knows
            changed = owned[table.pk] > table.last_synced_version
        else:
            result.requests += 1
            changed = has_new_commit(table, storage)
    except (delta_errors.DeltaError, OSError) as exc:
        result.failed[table.pk] = public_message(one_line(exc), table)
        return
    (result.changed if changed else result.unchanged).append(table.pk)


def probe_tables(ids: list[int]) -> ProbeResult:
    """Probe these tables, start a sync job for each that changed, and schedule the next check
    of every one (unchanged and busy: the interval; failed: the backoff)."""
    fields = ("pk", "name", "location", "sync_state", "last_synced_version", "failures")
    tables = list(Table.objects.filter(pk__in=ids).only(*fields))
    owned = dict(
        Table.objects.filter(pk__in=ids, managed__state=OwnerState.ACTIVE).values_list("pk", "managed__latest_version")
    )
    result = ProbeResult()
    for table in tables:
        _classify(table, owned, result)
    now = timezone.now()
    calm = result.unchanged + result.busy
    Table.objects.filter(pk__in=calm).update(checked_at=now, next_check_at=now + interval(), failures=0)
    # a changed table's next check is after its sync: the sync's end (or failure) sets none, so
    # the interval from now, like the others
    Table.objects.filter(pk__in=result.changed).update(checked_at=now, next_check_at=now + interval())
    _start_syncs(result.changed)
    for table in tables:
        if table.pk in result.failed:
            _record_failure(table.pk, table.failures + 1, result.failed[table.pk], now)
    return result


def _start_syncs(ids: list[int]) -> None:
    for table in Table.objects.filter(pk__in=ids):
        with transaction.atomic():
            start_sync(table)


def _record_failure(pk: int, failures: int, message: str, now: datetime) -> None:
    Table.objects.filter(pk=pk).update(
        checked_at=now, failures=failures, next_check_at=backoff(failures, now), last_error=message[:2000]
    )
    logger.info("probe of table %s failed (%s in a row): %s", pk, failures, message)


def probe_due(now: datetime | None = None) -> dict[str, int]:
    """The beat's tick: spread new tables, claim the due ones, send them in batches."""
    from tables.services.jobs import lifecycle as jobs

    spread = spread_unscheduled(now)
    size = max(1, int(settings.DELTAWEB_PROBE_BATCH))
    ids = claim_due(size * max(1, int(settings.DELTAWEB_PROBE_MAX_BATCHES)), now)
    sent = 0
    for batch in batches(ids, size):
        jobs.send(jobs.PROBE_TASK, batch)
        sent += 1
    return {"spread": spread, "due": len(ids), "batches": sent}
