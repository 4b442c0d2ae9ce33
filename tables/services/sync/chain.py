"""The chain of what was seen: each commit's SHA-256 stored the first time a sync reads it,
chained to the previous version's entry (tables.delta.history.chain), and every later look at
an already-seen version compared with it.

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
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connections, router, transaction
from django.utils import timezone

from tables import signals
from tables.delta.history.chain import chain_entries, chain_entry, commit_digest
from tables.delta.history.reachability import DEFAULT_LOG_RETENTION, interval_ms
from tables.delta.log.listing import classify, list_log_tail
from tables.delta.storage.api import Capability, FileInfo, Storage
from tables.delta.storage.opening import as_storage
from tables.models import ChainLook, HistoryRewrite, RewriteKind, SeenCommit, Table
from tables.services.owner.access import owner_of
from tables.services.sync.commit_rows import copy_rows

logger = logging.getLogger("tables.chain")

CHECK_TASK = "tables.chain_check_due"
SYNC, DAILY = "sync", "daily"


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


def _retention_allows(seen: SeenCommit, earliest_listed: int | None, retention_ms: int, now_ms: int) -> bool:
    """Whether log cleanup may have taken `seen`: older than the log's earliest commit and
    than the retention (cleanup takes the oldest commits, and only past it)."""
    if earliest_listed is not None and seen.version > earliest_listed:
        return False
    return seen.timestamp is not None and seen.timestamp + retention_ms <= now_ms


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
    Only the commits that need a read or a change are loaded as rows."""
    cpu0 = time.process_time()
    storage = storage or as_storage(table.location)
    req0 = _requests(storage)
    result = Look(requests=1)
    listed = _listed(storage, since, infos)
    now = timezone.now()
    light = list(
        SeenCommit.objects.filter(table=table, expired=False, version__gte=since or 0).values_list(
            "pk", "version", "listed_size", "listed_time", "hashed_ms", "gone_at"
        )
    )
    result.compared = len(light)
    # a table deltaweb owns: its newest commits may be ratified and not backfilled yet
    unbackfilled_above = (max(listed) if listed else -1) if owner_of(table) is not None else None
    deep = {r[0] for r in sorted(light, key=lambda r: (r[4] or 0, r[1]))[:rehash]} if rehash else set()
    need = []
    for pk, version, *last, gone_at in light:
        entry = listed.get(version)
        if entry is None:
            if gone_at is None and (unbackfilled_above is None or version <= unbackfilled_above):
                need.append(pk)
        elif gone_at is not None or pk in deep or not _trusted(tuple(last), entry[1], entry[2]):
            need.append(pk)
    changed = []
    context = (table, storage, listed, now, found_by, min(listed) if listed and not since else None)
    for s in SeenCommit.objects.filter(pk__in=need).order_by("version") if need else ():
        if _compare(s, context, result):
            changed.append(s)
    _save_looked(changed)
    req1 = _requests(storage)
    result.requests = (req1 - req0) if req0 is not None and req1 is not None else 1 + result.hashed
    result.cpu_seconds = time.process_time() - cpu0
    _record_look(table, result, now)
    return result


def _compare(s: SeenCommit, context: tuple, result: Look) -> bool:
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
            result.findings += _found(table, s, RewriteKind.VANISHED, "", now, found_by)
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
        result.findings += _found(table, s, kind, digest, now, found_by)
    s.gone_at = None if digest == s.sha256 else s.gone_at
    s.last_sha256 = digest
    return True


_LOOKED = ("listed_size", "listed_time", "hashed_ms", "checked_at", "gone_at", "expired", "last_sha256")


def _save_looked(rows: list[SeenCommit]) -> None:
    """One prepared UPDATE run per changed row (the ORM's bulk_update built a CASE per field and row)."""
    if not rows:
        return
    conn = connections[router.db_for_write(SeenCommit)]
    fields = [SeenCommit._meta.get_field(n) for n in _LOOKED]
    qn = conn.ops.quote_name
    sql = (
        f"UPDATE {qn(SeenCommit._meta.db_table)} SET {', '.join(f'{qn(f.column)} = %s' for f in fields)} "
        f"WHERE {qn(SeenCommit._meta.pk.column)} = %s"
    )
    params = [[*(f.get_db_prep_save(getattr(r, f.attname), conn) for f in fields), r.pk] for r in rows]
    with conn.cursor() as cursor:
        cursor.executemany(sql, params)


def _found(table: Table, seen: SeenCommit, kind: str, digest: str, now: datetime, found_by: str) -> int:
    """Store one finding (once per version, kind and bytes found) and announce it; 1 when new."""
    try:
        with transaction.atomic():
            finding = HistoryRewrite.objects.create(
                table=table,
                version=seen.version,
                kind=kind,
                first_sha256=seen.sha256,
                found_sha256=digest,
                first_seen_at=seen.first_seen_at,
                found_at=now,
                found_by=found_by,
            )
            signals.history_rewritten.send(Table, table=table, finding=finding)
    except IntegrityError:
        return 0  # found already
    logger.warning("table %s: version %s %s (first seen %s)", table.pk, seen.version, kind, seen.sha256)
    return 1


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


def record_seen(
    table: Table, commits: list[tuple[int, str, int, int | None, int | None, int | None]], found_by: str = SYNC
) -> int:
    """Store the first look at each of `commits` (version, sha256, size, listed size, listed
    time, commit timestamp; ascending), chained to the entry of the version before. A version
    seen already (a history rebuilt after a shorter log) is compared instead: other bytes are
    a finding. Returns the findings."""
    if not commits:
        return 0
    now = timezone.now()
    lo, hi = commits[0][0], commits[-1][0]
    known = {s.version: s for s in SeenCommit.objects.filter(table=table, version__gte=lo, version__lte=hi)}
    before = SeenCommit.objects.filter(table=table, version__lt=lo).order_by("-version").first()
    previous = before.entry if before is not None else None
    if not known:  # the common case, a sync's new commits: chained in one loop
        entries = chain_entries(previous, [(c[0], c[1]) for c in commits])
        # last_sha256 blank: the bytes last read are the first seen (64 bytes less a row)
        rows = [(v, d, e, size, ts, ls, lt, "") for (v, d, size, ls, lt, ts), e in zip(commits, entries, strict=True)]
        _insert_seen(table, rows, now)
        return 0
    rows, findings = [], 0
    for version, digest, size, listed_size, listed_time, ts in commits:
        old = known.get(version)
        if old is not None:
            if digest != old.sha256:
                kind = RewriteKind.REAPPEARED if old.gone_at is not None or old.expired else RewriteKind.REWRITTEN
                findings += _found(table, old, kind, digest, now, found_by)
            previous = old.entry
            continue
        previous = chain_entry(previous, version, digest)
        rows.append((version, digest, previous, size, ts, listed_size, listed_time, ""))
    _insert_seen(table, rows, now)
    return findings


_SEEN_COLUMNS = (
    "version", "sha256", "entry", "size", "timestamp", "listed_size", "listed_time", "last_sha256", "hashed_ms",
)  # fmt: skip


def _insert_seen(table: Table, rows: list[tuple], now: datetime) -> None:
    """INSERT the rows, a version stored already left as it is, as the history's rows go in
    (commit_rows.CommitInsert): SQLite takes 500 rows per statement, PostgreSQL takes them
    with COPY (commit_rows.copy_rows), other databases one statement run per row. A cold sync of 100,000 commits stores 100,000."""
    if not rows:
        return
    conn = connections[router.db_for_write(SeenCommit)]
    named = [SeenCommit._meta.get_field(n) for n in ("table", *_SEEN_COLUMNS, "first_seen_at", "checked_at")]
    # the other columns (gone_at, expired, and any added later) get their field's default
    others = [f for f in SeenCommit._meta.concrete_fields if not f.primary_key and f not in named]
    fields = named + others
    stamp = conn.ops.adapt_datetimefield_value(now)
    tail = [f.get_db_prep_save(f.get_default(), conn) for f in others]
    now_ms = int(now.timestamp() * 1000)
    params = [(table.pk, *r, now_ms, stamp, stamp, *tail) for r in rows]
    if copy_rows(conn, SeenCommit._meta.db_table, [f.column for f in fields], params):
        return  # PostgreSQL's COPY
    qn = conn.ops.quote_name
    head = f"INSERT INTO {qn(SeenCommit._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) VALUES "
    one = f"({', '.join(['%s'] * len(fields))})"
    with conn.cursor() as cursor:
        if conn.vendor != "sqlite":
            cursor.executemany(f"{head}{one} ON CONFLICT DO NOTHING", params)
            return
        step, raw = _SQLITE_ROWS, cursor.cursor
        whole = len(params) - len(params) % step
        if whole:
            sql = f"{head}{', '.join([one] * step)} ON CONFLICT DO NOTHING".replace("%s", "?")
            batches = [[x for row in params[i : i + step] for x in row] for i in range(0, whole, step)]
            sqlite3.Cursor.executemany(raw, sql, batches)
        if whole < len(params):
            rest = params[whole:]
            sql = f"{head}{', '.join([one] * len(rest))} ON CONFLICT DO NOTHING".replace("%s", "?")
            sqlite3.Cursor.execute(raw, sql, [x for row in rest for x in row])


_SQLITE_ROWS = 500  # rows per statement (SQLite takes 32,766 parameters from 3.32 on)


def adopt(table: Table) -> Look | None:
    """A table synced before the chain was kept (none of its commits seen): its commits up to
    the last synced version recorded as they are now, once. None when it has seen commits."""
    if table.last_synced_version is None or SeenCommit.objects.filter(table=table).exists():
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
    with_seen = set(SeenCommit.objects.filter(table__in=unscheduled).values_list("table_id", flat=True).distinct())
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
    seen = SeenCommit.objects.filter(table=table, version=version).first()
    if seen is None:
        return None
    findings = list(HistoryRewrite.objects.filter(table=table, version=version).order_by("found_at"))
    return {
        "sha256": seen.sha256,
        "entry": seen.entry,
        "firstSeenAt": seen.first_seen_at,
        "checkedAt": seen.checked_at,
        "matches": seen.gone_at is None and not seen.expired and seen.last_sha256 in ("", seen.sha256),
        "expired": seen.expired,
        "findings": [
            {"kind": f.get_kind_display(), "found": f.found_sha256, "foundAt": f.found_at, "by": f.found_by}
            for f in findings
        ],
    }
