"""The chain of what was seen: each commit's SHA-256 stored the first time a sync reads it,
chained to the previous version's entry (tables.delta.history.chain), and every later look at
an already-seen version compared with it.

What was first seen is kept packed per block of commits (seen.py: `record_seen` stores it,
`seen_commits` unpacks it); a commit a look finds other than first seen gets a SeenChange row
while it is, and the findings themselves are HistoryRewrite rows.

A look lists `_delta_log/` once (one request per 1,000 files on an object store) and hashes
again only the commits whose listed size or time changed since the last look (a PUT sets a new
LastModified), those whose time was too close to the read that hashed them to vouch for
anything (hashed once more, later: each commit is read about twice in all), those found gone
and back, and, on the rolling schedule, the few least recently hashed ones (a local file's time can be
set back by hand). It finds:

- rewritten: an already-seen version whose bytes differ from the first seen;
- vanished: a seen commit gone before `delta.logRetentionDuration` allowed log cleanup to take
  it (a commit after the log's earliest one, or one younger than the retention);
- reappeared: a version found gone, or one a shorter log dropped, back with other bytes.

Each finding is a HistoryRewrite row, once per (version, kind, bytes found), announced with
tables.signals.history_rewritten (an app that plugs in may raise an alert on it). The change
probe never calls this: an unchanged table still costs its one request. A sync looks first
(a log with a commit taken out may not replay at all) at its last DELTAWEB_CHAIN_SYNC_WINDOW
versions, then records the new commits; the beat looks at all of every table's log once per
DELTAWEB_CHAIN_CHECK_HOURS (`check_due`), and records a table synced before the chain was kept
as its commits are then (`adopt`).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tables.delta.history.chain import commit_digest
from tables.delta.history.reachability.compute import DEFAULT_LOG_RETENTION, interval_ms
from tables.delta.log.listing import classify, list_log_tail
from tables.delta.storage.api import Capability, FileInfo, Storage
from tables.delta.storage.opening import as_storage
from tables.models import ChainLook, HistoryRewrite, RewriteKind, SeenBlock, SeenChange, Table
from tables.models.chain import pack_ints, unpack_ints
from tables.services.chain.seen import (
    DAILY,
    SYNC,
    Seen,
    block_hashed,
    block_versions,
    record_seen,
    seen_commits,
    store_finding,
    unpack,
)
from tables.services.owner.access import owner_of

logger = logging.getLogger("tables.chain")

CHECK_TASK = "tables.chain_check_due"


@dataclass
class Look:
    """What one look cost and found."""

    requests: int = 0
    hashed: int = 0
    findings: int = 0
    compared: int = 0
    cpu_seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "requests": self.requests,
            "hashed": self.hashed,
            "findings": self.findings,
            "compared": self.compared,
            "cpuSeconds": round(self.cpu_seconds, 6),
        }


def _requests(storage: Storage) -> int | None:
    return storage.requests if Capability.REQUEST_COUNT in storage.capabilities else None


def _listed(
    storage: Storage, since: int | None = None, infos: list[FileInfo] | None = None
) -> dict[int, tuple[str, int, int]]:
    """{version: (path, size, time)} of the commits `_delta_log/` holds now (from `since` on;
    from `infos`, the log listed from `since`, when given)."""
    if infos is None:
        infos = list_log_tail(storage, since or None)
    out: dict[int, tuple[str, int, int]] = {}
    for info in infos or ():
        lf = classify(info)
        if lf is not None and lf.kind == "commit" and lf.version >= (since or 0):
            out[lf.version] = (info.path, info.size, info.modification_time)
    return out


# A listing's times are coarse (S3 lists whole seconds): a file whose time is not clearly before
# the read that hashed it may have been rewritten within the same tick, unseen by its time and,
# at the same size, by its listing. It is hashed again at the next look (git's "racy" files).
RACY_MS = 2000


def _trusted(listed: tuple[int | None, int | None, int | None], size: int, mtime: int) -> bool:
    """Whether the listing alone vouches that a seen commit's bytes are those last hashed, from
    its (listed size, listed time, hashed_ms) at the last look."""
    listed_size, listed_time, hashed_ms = listed
    if (listed_size, listed_time) != (size, mtime) or hashed_ms is None:
        return False
    return mtime < hashed_ms - RACY_MS


def _retention_allows(seen: Seen, earliest_listed: int | None, retention_ms: int, now_ms: int) -> bool:
    """Whether log cleanup may have taken `seen`: older than the log's earliest commit and
    than the retention (cleanup takes the oldest commits, and only past it)."""
    if earliest_listed is not None and seen.version > earliest_listed:
        return False
    return seen.timestamp is not None and seen.timestamp + retention_ms <= now_ms


def _light(table: Table, since: int | None) -> tuple[list[tuple], dict[int, SeenChange]]:
    """Each seen, unexpired commit from `since` on as (block id, index, version, listed size,
    listed time, hashed ms, gone at): what the listing is compared with, without the digests."""
    changes = {c.version: c for c in SeenChange.objects.filter(table=table, version__gte=since or 0)}
    fields = ("pk", "first_version", "last_version", "count", "versions", "sizes", "listed_times", "hashed",
              "expired", "first_seen_at", "seen_after")  # fmt: skip
    out = []
    for row in SeenBlock.objects.filter(table=table, last_version__gte=since or 0).values_list(*fields):
        b = SeenBlock(**dict(zip(fields, row, strict=True)))
        versions, sizes = block_versions(b), unpack_ints(b.sizes, b.count)
        listed, hashed, expired = unpack_ints(b.listed_times, b.count), block_hashed(b), bytes(b.expired or b"")
        for i, v in enumerate(versions):
            if v < (since or 0) or (expired and expired[i]):
                continue
            c = changes.get(v)
            if c is not None:
                out.append((b.pk, i, v, c.listed_size, c.listed_time, c.hashed_ms, c.gone_at))
            else:
                out.append((b.pk, i, v, sizes[i] if listed[i] is not None else None, listed[i], hashed[i], None))
    return out, changes


def look(
    table: Table,
    storage: Storage | None = None,
    found_by: str = SYNC,
    rehash: int = 0,
    since: int | None = None,
    infos: list[FileInfo] | None = None,
) -> Look:
    """Compare every seen, unexpired commit of `table` (from version `since` on) with its log
    now (`infos`: the log listed from `since`, by a caller that uses the listing too);
    `rehash` more of the least recently hashed are read again whatever the listing says.
    Only the blocks of the commits that need a read or a change are loaded whole."""
    cpu0 = time.process_time()
    storage = storage or as_storage(table.location)
    req0 = _requests(storage)
    result = Look(requests=1)
    listed = _listed(storage, since, infos)
    now = timezone.now()
    light, changes = _light(table, since)
    result.compared = len(light)
    # a table deltaweb owns: its newest commits may be ratified and not backfilled yet
    unbackfilled_above = (max(listed) if listed else -1) if owner_of(table) is not None else None
    deep = {(r[0], r[1]) for r in sorted(light, key=lambda r: (r[5] or 0, r[2]))[:rehash]} if rehash else set()
    need: dict[int, set[int]] = {}
    for block, index, version, *last, gone_at in light:
        entry = listed.get(version)
        if entry is None:
            if gone_at is None and (unbackfilled_above is None or version <= unbackfilled_above):
                need.setdefault(block, set()).add(index)
        elif gone_at is not None or (block, index) in deep or not _trusted(tuple(last), entry[1], entry[2]):
            need.setdefault(block, set()).add(index)
    context = (table, storage, listed, now, found_by, min(listed) if listed and not since else None)
    blocks = {b.pk: b for b in SeenBlock.objects.filter(pk__in=list(need))} if need else {}
    todo = [s for pk, b in blocks.items() for s in unpack(b, changes=changes) if s.index in need[pk]]
    changed = [s for s in sorted(todo, key=lambda s: s.version) if _compare(s, context, result)]
    _save_looked(table, changed, changes)
    req1 = _requests(storage)
    result.requests = (req1 - req0) if req0 is not None and req1 is not None else 1 + result.hashed
    result.cpu_seconds = time.process_time() - cpu0
    _record_look(table, result, now)
    return result


def _compare(s: Seen, context: tuple, result: Look) -> bool:
    """Look at one seen commit the listing could not vouch for: expired, vanished, or read and
    compared. Whether its row changed."""
    table, storage, listed, now, found_by, earliest = context
    entry = listed.get(s.version)
    if entry is None:
        retention = table.log_retention_ms  # 0 is a retention ("interval 0 seconds"), not absent
        if retention is None:
            retention = interval_ms(None, DEFAULT_LOG_RETENTION)
        if _retention_allows(s, earliest, retention, int(now.timestamp() * 1000)):
            s.expired = True
        else:
            s.gone_at = now
            result.findings += store_finding(table, s, RewriteKind.VANISHED, "", now, found_by)
        return True
    path, size, mtime = entry
    try:
        digest = commit_digest(storage.read(path))
    except FileNotFoundError:
        return False  # gone since the listing: the next look says so
    result.hashed += 1
    s.listed_size, s.listed_time, s.hashed_ms, s.checked_at = size, mtime, int(now.timestamp() * 1000), now
    if digest != s.sha256:
        kind = RewriteKind.REAPPEARED if s.gone_at is not None else RewriteKind.REWRITTEN
        result.findings += store_finding(table, s, kind, digest, now, found_by)
    s.gone_at = None if digest == s.sha256 else s.gone_at
    s.last_sha256 = digest
    return True


def _save_looked(table: Table, rows: list[Seen], changes: dict[int, SeenChange]) -> None:
    """Keep what the look found: a commit read with its first bytes has its listed time and
    hashing time updated in its block (its SeenChange, if any, deleted), an expired one is
    marked in its block, one gone or with other bytes has a SeenChange row. One UPDATE per
    block touched, on the block as it is now (a sync may have added commits to it since)."""
    by_block: dict[int, list[Seen]] = {}
    keep, clear = [], []
    for s in rows:
        if s.expired or s.matches:
            by_block.setdefault(s.block, []).append(s)
            if s.matches and not s.expired and s.version in changes:
                clear.append(s.version)
        else:
            keep.append(s)
    with transaction.atomic():
        for b in SeenBlock.objects.select_for_update().filter(pk__in=list(by_block)).order_by("pk"):
            listed, hashed = unpack_ints(b.listed_times, b.count), block_hashed(b)
            expired = bytearray(b.expired) if b.expired else bytearray(b.count)
            for s in by_block[b.pk]:
                if s.expired:
                    expired[s.index] = 1
                else:
                    listed[s.index], hashed[s.index] = s.listed_time, s.hashed_ms
            SeenBlock.objects.filter(pk=b.pk).update(
                listed_times=pack_ints(listed),
                hashed=pack_ints(hashed),
                expired=bytes(expired) if any(expired) else b"",
            )
        if clear:
            SeenChange.objects.filter(table=table, version__in=clear).delete()
        for s in keep:
            SeenChange.objects.update_or_create(
                table=table,
                version=s.version,
                defaults={
                    "last_sha256": s.last_sha256,
                    "listed_size": s.listed_size,
                    "listed_time": s.listed_time,
                    "hashed_ms": s.hashed_ms,
                    "checked_at": s.checked_at,
                    "gone_at": s.gone_at,
                },
            )


def sync_window_start(table: Table) -> int | None:
    """Where a sync's look starts: the whole log while it is short, else the last
    DELTAWEB_CHAIN_SYNC_WINDOW versions (a long log on an object store would cost a listing
    page per 1,000 files at every sync; the rolling check looks at all of it once a day)."""
    window = int(getattr(settings, "DELTAWEB_CHAIN_SYNC_WINDOW", 1000))
    last = table.last_synced_version
    if last is None or window <= 0 or last < window:
        return None
    return last - window + 1


def _record_look(table: Table, result: Look, now: datetime) -> None:
    hours = float(getattr(settings, "DELTAWEB_CHAIN_CHECK_HOURS", 24))
    ChainLook.objects.update_or_create(
        table=table,
        defaults={
            "looked_at": now,
            "next_at": now + timedelta(hours=hours),
            "requests": result.requests,
            "hashed": result.hashed,
            "findings": result.findings,
        },
    )


def adopt(table: Table) -> Look | None:
    """A table synced before the chain was kept (none of its commits seen): its commits up to
    the last synced version recorded as they are now, once. None when it has seen commits."""
    if table.last_synced_version is None or SeenBlock.objects.filter(table=table).exists():
        return None
    cpu0 = time.process_time()
    storage = as_storage(table.location)
    listed = _listed(storage)
    stamps = dict(table.commits.values_list("version", "timestamp"))
    commits = []
    for version in sorted(v for v in listed if v <= table.last_synced_version):
        path, size, mtime = listed[version]
        try:
            data = storage.read(path)
        except FileNotFoundError:
            continue
        commits.append((version, commit_digest(data), len(data), size, mtime, stamps.get(version)))
    with transaction.atomic():
        record_seen(table, commits, DAILY)
    result = Look(requests=1 + len(commits), hashed=len(commits), compared=len(commits))
    result.cpu_seconds = time.process_time() - cpu0
    _record_look(table, result, timezone.now())
    return result


def spread_first(now: datetime | None = None) -> datetime:
    """A table's first rolling look: a random point of the interval, so a fleet spreads over it."""
    hours = float(getattr(settings, "DELTAWEB_CHAIN_CHECK_HOURS", 24))
    return (now or timezone.now()) + timedelta(hours=hours) * random.random()


def check_due(limit: int | None = None) -> dict[str, float]:
    """The beat's rolling check: the tables whose look is due (every table once per
    DELTAWEB_CHAIN_CHECK_HOURS), at most DELTAWEB_CHAIN_CHECK_BATCH per tick; their costs summed."""
    now = timezone.now()
    limit = limit or int(getattr(settings, "DELTAWEB_CHAIN_CHECK_BATCH", 500))
    rehash = int(getattr(settings, "DELTAWEB_CHAIN_REHASH_PER_LOOK", 10))
    unscheduled = Table.objects.filter(chain_look__isnull=True, last_synced_version__isnull=False)
    with_seen = set(SeenBlock.objects.filter(table__in=unscheduled).values_list("table_id", flat=True).distinct())
    for t in unscheduled.values_list("pk", flat=True)[:limit]:
        # a table synced before the chain was kept is recorded at once; others spread over the interval
        first = spread_first(now) if t in with_seen else now
        ChainLook.objects.get_or_create(table_id=t, defaults={"looked_at": now, "next_at": first})
    due = list(Table.objects.filter(chain_look__next_at__lte=now).order_by("chain_look__next_at")[:limit])
    totals = Look()
    for table in due:
        try:
            adopted = adopt(table)
            one = look(table, found_by=DAILY, rehash=rehash) if not adopted else adopted
        except Exception as exc:  # one table's store failing must not stop the others
            logger.warning("chain check of table %s failed: %s", table.pk, str(exc)[:300])
            ChainLook.objects.filter(table=table).update(next_at=now + timedelta(hours=1))
            continue
        for name in ("requests", "hashed", "findings", "compared", "cpu_seconds"):
            setattr(totals, name, getattr(totals, name) + getattr(one, name))
    return {"tables": len(due), **totals.as_dict()}


def state_of(table: Table, version: int) -> dict[str, object] | None:
    """What the version page shows: whether the bytes still match what was first seen, and
    if not, both digests and when."""
    found = seen_commits(table, version, version)
    if not found:
        return None
    seen = found[0]
    findings = list(HistoryRewrite.objects.filter(table=table, version=version).order_by("found_at"))
    return {
        "sha256": seen.sha256,
        "entry": seen.entry,
        "firstSeenAt": seen.first_seen_at,
        "checkedAt": seen.checked_at,
        "matches": seen.matches and not seen.expired,
        "expired": seen.expired,
        "findings": [
            {"kind": f.get_kind_display(), "found": f.found_sha256, "foundAt": f.found_at, "by": f.found_by}
            for f in findings
        ],
    }
