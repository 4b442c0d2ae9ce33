"""The sync's check of version checksum files (`_delta_log/N.crc`), and their fast path.

Each new version that has a checksum file is compared with the log (tables.delta.snapshot
.checksum) and the answer stored as a VersionChecksum row: the counts of every one against the
sync's own growth pass (free: it counts files and bytes after each commit anyway), every field
of the newest ones against a snapshot of their version (a replay each, hence a few per sync).

What the pages ask of the rows (a version's checksum state, the History badge, the fast
path of a version's summary) is answered by tables.services.versions.read.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from tables.delta import errors as delta_errors
from tables.delta.history.timestamps import CommitTimes
from tables.delta.snapshot.checksum import (
    Checksum,
    ReplayedState,
    check,
    failed_read,
    read_checksums,
    replayed_state,
)
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.api import Storage
from tables.models import Table, VersionChecksum

# versions checked in every field per sync (a snapshot each), newest first; the older new
# versions of a long catch-up are checked on their counts only
FULL_CHECKS_PER_SYNC = 5

logger = logging.getLogger("tables.sync")


def check_after_sync(
    table: Table, storage: Storage, times: CommitTimes, new_versions: list[int], sizes: dict[int, tuple[int, int]]
) -> int:
    """Check the checksum files of `new_versions` and store the answers; how many were checked.
    `sizes`: the growth pass's (files, bytes) after each version (a version without them, before
    where growth started, is checked only among the newest, against a snapshot)."""
    files = times.listing.checksums
    todo = [files[v] for v in new_versions if v in files]
    full = {lf.version for lf in todo[-FULL_CHECKS_PER_SYNC:]}
    todo = [lf for lf in todo if lf.version in full or lf.version in sizes]
    if not todo:
        return 0
    try:
        read = read_checksums(storage, todo)
    except (delta_errors.DeltaError, OSError) as exc:  # the store failed: checked at the next sync's versions
        logger.warning("checksum files of %s not read: %s", table.name, str(exc)[:300])
        return 0
    now = timezone.now()
    rows = []
    for lf, crc in zip(todo, read, strict=True):
        if isinstance(crc, delta_errors.CorruptLogError):
            error = failed_read(lf.version, crc)["error"]
            rows.append(VersionChecksum(table=table, version=lf.version, ok=False, error=error, checked_at=now))
            continue
        state = _state(storage, times, crc, lf.version in full, sizes.get(lf.version))
        if state is None:
            continue
        result = check(crc, state)
        rows.append(
            VersionChecksum(
                table=table,
                version=lf.version,
                ok=result["ok"],
                mismatches=result["mismatches"],
                full=state.complete,
                sha256=crc.sha256,
                checked_at=now,
            )
        )
    with transaction.atomic():
        VersionChecksum.objects.filter(table=table, version__in=[r.version for r in rows]).delete()
        VersionChecksum.objects.bulk_create(rows)
    return len(rows)


def _state(
    storage: Storage, times: CommitTimes, crc: Checksum, full: bool, counts: tuple[int, int] | None
) -> ReplayedState | None:
    """The replay to compare with: a snapshot for a full check, else the growth pass's counts."""
    if full:
        try:
            return replayed_state(load_snapshot(storage, crc.version, listing=times.listing))
        except delta_errors.DeltaError as exc:  # a version the log cannot rebuild is not checked in full
            logger.info("checksum of version %s not checked in full: %s", crc.version, str(exc)[:300])
    if counts is None:
        return None
    files, size = counts
    return ReplayedState(crc.version, files, size)
