"""What was first seen of each commit, packed per block of up to BLOCK commits, one SeenBlock
row each: the digests side by side, the chain entry before the block and at its end (the
entries between follow from the digests), sizes and times packed, one first-seen time with
per-commit offsets only when they differ. `record_seen` stores a sync's new commits (filling the
last block while it has room); `seen_commits` and `entry_before` unpack them for the version
page, the look (look.py) and the audit export (audit.py).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from tables import signals
from tables.delta.history.chain import DOMAIN, GENESIS, chain_entries
from tables.models import HistoryRewrite, RewriteKind, SeenBlock, SeenChange, Table
from tables.models.chain import pack_ints, unpack_ints

logger = logging.getLogger("tables.chain")

SYNC, DAILY = "sync", "daily"  # who found a finding: a sync, or the beat's daily look

# A block packs up to this many commits in one row (about 64 bytes each, against a row and an
# index entry per commit): a cold sync of 100,000 commits writes 100 rows, and a sync's few new
# commits are added to the last block while it has room.
BLOCK = 1000


@dataclass(slots=True)
class Seen:
    """One seen commit, as its SeenBlock and any SeenChange hold it."""

    version: int
    sha256: str
    size: int
    first_seen_at: datetime
    timestamp: int | None
    listed_size: int | None
    listed_time: int | None
    hashed_ms: int | None
    checked_at: datetime | None
    gone_at: datetime | None = None
    expired: bool = False
    last_sha256: str = ""  # blank: the bytes last read are the first seen
    entry: str = ""  # the chain entry (filled when asked for)
    block: int = 0  # its SeenBlock's id
    index: int = 0  # its place in the block

    @property
    def matches(self) -> bool:
        """Whether the bytes were, at the last look, those first seen."""
        return self.gone_at is None and self.last_sha256 in ("", self.sha256)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def block_versions(b: SeenBlock) -> list[int]:
    if b.versions:
        return unpack_ints(b.versions, b.count)  # type: ignore[return-value]
    return list(range(b.first_version, b.last_version + 1))


def block_seen_at(b: SeenBlock) -> list[datetime]:
    if not b.seen_after:
        return [b.first_seen_at] * b.count
    return [b.first_seen_at + timedelta(microseconds=us) for us in unpack_ints(b.seen_after, b.count)]


def block_hashed(b: SeenBlock, seen_at: list[datetime] | None = None) -> list[int]:
    if b.hashed:
        return unpack_ints(b.hashed, b.count)  # type: ignore[return-value]
    return [_ms(at) for at in (seen_at or block_seen_at(b))]


def _block_entries(b: SeenBlock, versions: list[int], digests: list[str]) -> list[str]:
    if not b.previous:  # a single commit whose entry did not follow from the one before
        return [b.entry]
    return chain_entries(b.previous, zip(versions, digests, strict=True))


def unpack(b: SeenBlock, entries: bool = False, changes: dict[int, SeenChange] | None = None) -> list[Seen]:
    """The commits of block `b` (their chain entries too with `entries`), with the state a
    look found kept in `changes` ({version: SeenChange}) laid over."""
    versions = block_versions(b)
    raw = bytes(b.digests)
    digests = [raw[i * 32 : i * 32 + 32].hex() for i in range(b.count)]
    seen_at = block_seen_at(b)
    hashed = block_hashed(b, seen_at)
    sizes = unpack_ints(b.sizes, b.count)
    stamps = unpack_ints(b.timestamps, b.count)
    listed = unpack_ints(b.listed_times, b.count)
    expired = bytes(b.expired) if b.expired else b""
    chain = _block_entries(b, versions, digests) if entries else None
    out = []
    for i, v in enumerate(versions):
        # the time last hashed, or first seen when never hashed since (a stored row's time may be unknown)
        checked = seen_at[i] if not b.hashed or hashed[i] is None else datetime.fromtimestamp(hashed[i] / 1000, UTC)
        s = Seen(v, digests[i], sizes[i] or 0, seen_at[i], stamps[i], sizes[i] if listed[i] is not None else None,
                 listed[i], hashed[i], checked, expired=bool(expired and expired[i]), block=b.pk, index=i)  # fmt: skip
        if chain is not None:
            s.entry = chain[i]
        c = changes.get(v) if changes else None
        if c is not None:
            s.listed_size, s.listed_time, s.hashed_ms = c.listed_size, c.listed_time, c.hashed_ms
            s.checked_at, s.gone_at, s.last_sha256 = c.checked_at, c.gone_at, c.last_sha256
        out.append(s)
    return out


def seen_commits(table: Table, lo: int | None = None, hi: int | None = None, entries: bool = True) -> list[Seen]:
    """The seen commits of `table` from version `lo` to `hi` (default: all), in version order;
    the first seen of a version seen twice (two syncs overlapping)."""
    blocks = SeenBlock.objects.filter(table=table)
    changes = SeenChange.objects.filter(table=table)
    if lo is not None:
        blocks, changes = blocks.filter(last_version__gte=lo), changes.filter(version__gte=lo)
    if hi is not None:
        blocks, changes = blocks.filter(first_version__lte=hi), changes.filter(version__lte=hi)
    by_version = {c.version: c for c in changes}
    out: dict[int, Seen] = {}
    for b in blocks.order_by("first_seen_at", "first_version"):
        for s in unpack(b, entries, by_version):
            if (lo is None or s.version >= lo) and (hi is None or s.version <= hi):
                out.setdefault(s.version, s)
    return [out[v] for v in sorted(out)]


def entry_before(table: Table, version: int) -> str | None:
    """The chain entry of the last seen version before `version`; None when there is none."""
    b = SeenBlock.objects.filter(table=table, first_version__lt=version).order_by("-first_version").first()
    if b is None:
        return None
    if b.last_version < version:
        return b.entry
    inside = [s for s in unpack(b, entries=True) if s.version < version]
    return inside[-1].entry


def record_seen(
    table: Table, commits: list[tuple[int, str, int, int | None, int | None, int | None]], found_by: str = SYNC
) -> int:
    """Store the first look at each of `commits` (version, sha256, size, listed size, listed
    time, commit timestamp; ascending), chained to the entry of the version before, packed in
    blocks. A version seen already (a history rebuilt after a shorter log) is compared
    instead: other bytes are a finding. Returns the findings."""
    if not commits:
        return 0
    now = timezone.now()
    lo, hi = commits[0][0], commits[-1][0]
    # the common case, a sync's new commits: all after the last block, chained on from its end
    last = SeenBlock.objects.filter(table=table).select_for_update().order_by("-last_version").first()
    if last is None or last.last_version < lo:
        _store_run(table, last.entry if last is not None else None, commits, now, last)
        return 0
    known = {s.version: s for s in seen_commits(table, lo, hi)}
    previous = entry_before(table, lo)
    run: list[tuple] = []
    findings = 0
    for commit in commits:
        old = known.get(commit[0])
        if old is None:
            run.append(commit)
            continue
        if commit[1] != old.sha256:
            kind = RewriteKind.REAPPEARED if old.gone_at is not None or old.expired else RewriteKind.REWRITTEN
            findings += store_finding(table, old, kind, commit[1], now, found_by)
        # the new commits between two seen ones are a block of their own, chained from the one before
        _store_run(table, previous, run, now)
        run, previous = [], old.entry
    _store_run(table, previous, run, now)
    return findings


def _chained(previous: str | None, commits: list[tuple], raws: list[bytes]) -> str:
    """The chain entry of the last of `commits` (their digests' bytes `raws`) after `previous`:
    tables.delta.history.chain's entry, the 32 bytes carried on (a block needs only its last)."""
    prev, sha = bytes.fromhex(previous or GENESIS), hashlib.sha256
    for c, raw in zip(commits, raws, strict=True):
        prev = sha(DOMAIN + prev + c[0].to_bytes(8, "big") + raw).digest()
    return prev.hex()


def _store_run(
    table: Table, previous: str | None, commits: list[tuple], now: datetime, last: SeenBlock | None = None
) -> None:
    """Store `commits`, chained after `previous`, in blocks: first into the table's `last`
    block (locked by the caller) while it has room and they follow it, the rest in new ones."""
    if not commits:
        return
    raws = [bytes.fromhex(c[1]) for c in commits]
    if last is not None and last.count < BLOCK and last.last_version < commits[0][0] and last.previous:
        if last.entry == (previous or GENESIS):  # it ends where these are chained from
            room = min(BLOCK - last.count, len(commits))
            previous = _extend(table, last, commits[:room], raws[:room], now)
            commits, raws = commits[room:], raws[room:]
            if not commits:
                return
    blocks = []
    for i in range(0, len(commits), BLOCK):
        block = _packed(table, previous, commits[i : i + BLOCK], raws[i : i + BLOCK], now)
        blocks.append(block)
        previous = block.entry
    # a block stored already (two syncs overlapping) is left as it is
    SeenBlock.objects.bulk_create(blocks, ignore_conflicts=True)


def _packed(table: Table, previous: str | None, commits: list[tuple], raws: list[bytes], now: datetime) -> SeenBlock:
    """One block of `commits` (version, sha256, size, listed size, listed time, commit time)."""
    first, last = commits[0][0], commits[-1][0]
    return SeenBlock(
        table=table,
        first_version=first,
        last_version=last,
        count=len(commits),
        versions=b"" if last - first + 1 == len(commits) else pack_ints([c[0] for c in commits]),
        digests=b"".join(raws),
        previous=previous or GENESIS,
        entry=_chained(previous, commits, raws),
        sizes=pack_ints([c[2] for c in commits]),
        timestamps=pack_ints([c[5] for c in commits]),
        first_seen_at=now,
        listed_times=pack_ints([c[4] if c[3] is not None else None for c in commits]),
    )


def _extend(table: Table, b: SeenBlock, commits: list[tuple], raws: list[bytes], now: datetime) -> str:
    """Add `commits` to the end of block `b` (first seen `now`, maybe later than its others);
    the block's new last entry."""
    add = _packed(table, b.entry, commits, raws, now)
    old_versions, new_versions = block_versions(b), block_versions(add)
    contiguous = not b.versions and not add.versions and new_versions[0] == b.last_version + 1
    offsets = unpack_ints(b.seen_after, b.count) if b.seen_after else [0] * b.count
    offsets += [int((now - b.first_seen_at) / timedelta(microseconds=1))] * len(commits)
    b.versions = b"" if contiguous else pack_ints(old_versions + new_versions)
    b.seen_after = pack_ints(offsets) if any(offsets) else b""
    if b.hashed:  # each one hashed when first seen, unless kept apart
        b.hashed = bytes(b.hashed) + pack_ints([_ms(now)] * len(commits))
    if b.expired:
        b.expired = bytes(b.expired) + bytes(len(commits))
    for name in ("digests", "sizes", "timestamps", "listed_times"):
        setattr(b, name, bytes(getattr(b, name)) + bytes(getattr(add, name)))
    b.last_version, b.count, b.entry = new_versions[-1], b.count + len(commits), add.entry
    b.save()
    return add.entry


def store_finding(table: Table, seen: Seen, kind: str, digest: str, now: datetime, found_by: str) -> int:
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
