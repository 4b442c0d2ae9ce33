"""Commit timestamps: In-Commit Timestamps, monotonized file times, timestamp -> version.

Rules (SPEC section 2, seed in-commit-timestamps.md, Delta Lake's DeltaHistoryManager):
- ICT is on when the table is on writer version 7 with the `inCommitTimestamp` writer
  feature and `delta.enableInCommitTimestamps=true` (in the latest metadata).
- Version v's commit timestamp is its commitInfo.inCommitTimestamp when ICT applies to v
  (v >= delta.inCommitTimestampEnablementVersion, or every version without the property),
  else its commit file's modification time, monotonized: a time not greater than the
  previous commit's becomes previous + 1 ms.
- TIMESTAMP AS OF t: the latest version with commit timestamp <= t, searching only versions
  >= the enablement version when t >= the enablement timestamp, only versions below it
  otherwise. ICT ranges are searched by bisection; file times come with the listing.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tables.delta.errors import InvalidTimestampError, TimestampOutOfRangeError
from tables.delta.gc_pause import gc_paused
from tables.delta.log.commitinfo import CommitInfoReader
from tables.delta.log.ict import IctConfig, ict_config
from tables.delta.log.listing import (
    LOG_DIR,
    LogFile,
    LogListing,
    available_versions,
    learn_times,
    list_log,
    modification_times,
    trim_incomplete_tip,
)
from tables.delta.managed.owner import CommitOwner
from tables.delta.snapshot.state import TableConfig, load_table_config, ratified_listing
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage


def monotonize(times: list[int], before: int | None = None) -> list[int]:
    """Delta Lake's monotonizeCommitTimestamps: each time > the previous (adjusted) one, the
    first > `before` (the adjusted time of the commit before them) when given.

    a[k] = max(t[k], a[k-1] + 1) is a[k] - k = max(t[k] - k, a[k-1] - (k-1)): a running
    maximum, computed by numpy for long runs (a log of 100,000 commits in milliseconds)."""
    if len(times) < 256:
        out, prev = [], before
        for t in times:
            prev = t if prev is None or t > prev else prev + 1
            out.append(prev)
        return out
    import numpy as np

    steps = np.arange(len(times), dtype=np.int64)
    shifted = np.asarray(times, dtype=np.int64) - steps
    if before is not None:
        shifted[0] = max(int(shifted[0]), before + 1)
    return (np.maximum.accumulate(shifted) + steps).tolist()


# The instants a timestamp may name: years 1..9999 in UTC, the range Python's datetime (and so
# every page, message and the CLI) can format. A timestamp outside it is refused when parsed,
# as invalid_timestamp, instead of failing later while an answer is being worded.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PREFETCH_MIN = 64  # fewer unknown file times than this are stat'ed one by one
MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00.000Z
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_FORMATS = "use ISO-8601, yyyy-MM-dd[ HH:mm:ss[.SSS]] or epoch milliseconds"


def _bounded(ms: int, shown: str) -> int:
    if not MIN_MS <= ms <= MAX_MS:
        raise InvalidTimestampError(
            f"'{shown[:64]}' is out of range: a timestamp must fall between 0001-01-01 and 9999-12-31 (UTC), "
            f"i.e. {MIN_MS}..{MAX_MS} epoch milliseconds"
        )
    return ms


_ISO_SPACE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?")


def parse_timestamp(text: str | int) -> int:
    """Milliseconds since the epoch from ISO-8601 (with or without zone; UTC when none),
    `yyyy-MM-dd`, `yyyy-MM-dd HH:mm:ss[.SSS]`, or epoch milliseconds."""
    if isinstance(text, int):
        return _bounded(text, str(text))
    s = str(text).strip()
    if re.fullmatch(r"-?\d{10,}", s):
        # bounded before int(): a thousand digits must not cost a big-integer conversion
        if len(s.lstrip("-")) > 16:
            return _bounded(MAX_MS + 1, s)
        return _bounded(int(s), s)
    if len(s) > 64 or not s:
        raise InvalidTimestampError(f"'{s[:64]}' is not a timestamp; {_FORMATS}")
    iso = s.replace("Z", "+00:00").replace("z", "+00:00")
    frac = re.search(r"\.(\d+)", iso)
    if frac and len(frac[1]) > 6:  # Python takes at most microseconds
        iso = iso.replace(frac[0], "." + frac[1][:6])
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError as exc:
        raise InvalidTimestampError(
            f"'{s}' is not a timestamp; use ISO-8601, yyyy-MM-dd[ HH:mm:ss[.SSS]] or epoch milliseconds"
        ) from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        # in integers: through a float, 00:00:01.001 came out as 1000 ms (1.001 * 1000 = 1000.99...)
        ms = (dt - EPOCH) // timedelta(milliseconds=1)
    except (OverflowError, ValueError) as exc:  # an offset that leaves datetime's range
        raise InvalidTimestampError(
            f"'{s}' is out of range: a timestamp must fall between 0001-01-01 and 9999-12-31 (UTC)"
        ) from exc
    # an offset can move a valid local time out of years 1..9999 in UTC (9999-12-31T23:59-14:00)
    return _bounded(ms, s)


def format_ms(ms: int | None) -> str | None:
    """ISO-8601 in UTC with milliseconds; a time outside years 1..9999 (a log may say anything)
    is shown as its number rather than failing the page that shows it."""
    if ms is None:
        return None
    if not MIN_MS <= ms <= MAX_MS:
        return f"{ms} ms since the epoch (out of range)"
    # integer arithmetic: a float of ms / 1000 loses the last millisecond near the bounds
    return (EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_IN_LOG_DIR = LOG_DIR + "/"


class FileTimes:
    """Commit file modification times by index, stat'ed only when asked for: an ICT table
    never needs most of them, and a page of history needs only its own."""

    __slots__ = ("_files",)

    def __init__(self, files: list[LogFile]) -> None:
        self._files = files

    def __len__(self) -> int:
        return len(self._files)

    def __getitem__(self, i: int) -> int:
        return self._files[i].modification_time

    def prefetch(self, start: int, stop: int) -> None:
        """The times of indexes start..stop-1 at once: where the storage can (a local log), a
        stat by name of every commit file whose time is unknown, from the log directory opened
        once, instead of a checked stat per file asked for (a non-ICT log of 100,000 commits:
        0.2 s instead of 1.5). Object stores listed the times already."""
        missing = [f for f in self._files[start:stop] if not f.stat_known]
        if len(missing) < PREFETCH_MIN:
            return
        scan = getattr(missing[0].storage, "file_times", None)
        if scan is None:
            return
        # every file's, not only the range's: a binary search over the times asks for later
        # indexes next, and must not stat again; others (staged commits, symbolic links) are
        # stat'ed one by one when asked for
        with gc_paused():  # a tuple of times per file, no cycle among them
            pending = [f for f in self._files if not f.stat_known and f.path.startswith(_IN_LOG_DIR)]
            learn_times(pending, scan(LOG_DIR, [f.path[len(_IN_LOG_DIR) :] for f in pending]), _IN_LOG_DIR)

    def times(self, start: int, stop: int) -> list[int]:
        return modification_times(self._files[start:stop])


class MonotonizedTimes:
    """Delta Lake's monotonized file times by index, computed forward on demand.

    `seed(i, value)` gives the adjusted time of index i when it is known already (a sync
    stored it), so times after it need no stat of anything before it.
    """

    __slots__ = ("_raw", "_start", "_values")

    def __init__(self, raw: FileTimes) -> None:
        self._raw = raw
        self._start = 0  # _values[k] is the adjusted time of index _start + k
        self._values: list[int] = []

    def __len__(self) -> int:
        return len(self._raw)

    def seed(self, i: int, value: int) -> None:
        self._start, self._values = i, [value]

    def __getitem__(self, i: int) -> int:
        if i < 0:
            i += len(self._raw)
        k = i - self._start
        if 0 <= k < len(self._values):
            return self._values[k]
        if k < 0:  # before a seed: recompute from the start
            self._start, self._values = 0, []
        first = self._start + len(self._values)
        self._raw.prefetch(first, i + 1)
        raw = self._raw.times(first, i + 1)
        self._values.extend(monotonize(raw, self._values[-1] if self._values else None))
        return self._values[i - self._start]


@dataclass(slots=True)
class CommitTimes:
    """What the listing and the latest metadata say about every commit's timestamp."""

    storage: Storage
    listing: LogListing
    config: TableConfig
    ict: IctConfig
    versions: list[int]  # versions with a commit file, ascending
    file_times: FileTimes  # raw modification times, by index into `versions` (stat'ed lazily)
    adjusted: MonotonizedTimes  # monotonized file times, by index
    earliest: int  # earliest version whose state can be rebuilt
    latest: int
    reader: CommitInfoReader = field(repr=False)

    def index(self, version: int) -> int:
        i = bisect.bisect_left(self.versions, version)
        if i == len(self.versions) or self.versions[i] != version:
            raise KeyError(version)
        return i

    def file_time(self, version: int) -> int:
        return self.adjusted[self.index(version)]

    def warm(self, start: int, end: int) -> None:
        """Versions start..end's timestamps will be asked for, oldest first: compute the file
        times among them at once (one scan of a local log) rather than one stat per call."""
        if self.ict.applies(start):
            return  # In-Commit Timestamps from `start` on: no file time is needed
        last = end if not self.ict.applies(end) else (self.ict.enablement_version or 0) - 1
        i = bisect.bisect_right(self.versions, last) - 1
        if i >= 0:
            self.adjusted[i]  # computes every time up to it

    def timestamp(self, version: int) -> tuple[int | None, str]:
        """(effective commit timestamp, source) of a version."""
        if self.ict.applies(version):
            return self.reader.get(version).in_commit_timestamp, "ict"
        return self.file_time(version), "file"


def commit_times(
    location: str | Storage, listing: LogListing | None = None, owner: CommitOwner | None = None
) -> CommitTimes:
    """Timestamps of every listed commit; with `owner`, a managed table's un-backfilled
    commits are listed too (their file times are those of the staged files)."""
    storage = as_storage(location)
    listing = listing or list_log(storage)
    if owner is not None:
        listing = ratified_listing(storage, owner, listing)
    trim_incomplete_tip(storage, listing)  # a commit still being written: shown up to the one before
    config = load_table_config(storage, listing)
    rng = available_versions(listing)
    earliest, latest = rng if rng else (config.version, config.version)
    return times_of(storage, listing, config, earliest, latest)


def times_of(storage: Storage, listing: LogListing, config: TableConfig, earliest: int, latest: int) -> CommitTimes:
    """CommitTimes of the commits `listing` holds, with the latest `config` and the range of
    versions known already: a sync that continues from what it stored passes the listing of
    the log's tail (from its last synced commit) and the configuration it kept."""
    commits = {c.version: c for c in listing.commits}
    versions = sorted(commits)
    raw = FileTimes([commits[v] for v in versions])
    return CommitTimes(
        storage=storage,
        listing=listing,
        config=config,
        ict=ict_config(config),
        versions=versions,
        file_times=raw,
        adjusted=MonotonizedTimes(raw),
        earliest=earliest,
        latest=latest,
        reader=CommitInfoReader(storage, commits),
    )


def _last_at_or_before(lo: int, hi: int, ts_of, t: int) -> int | None:
    """Largest v in [lo, hi) with ts_of(v) <= t, by bisection (ts_of must be sorted)."""
    if hi <= lo:
        return None
    a, b = lo, hi  # invariant: answer in [a-1, b-1]
    while a < b:
        mid = (a + b) // 2
        ts = ts_of(mid)
        if ts is not None and ts <= t:
            a = mid + 1
        else:
            b = mid
    return a - 1 if a - 1 >= lo else None


def _ict_or_none(times: CommitTimes, v: int) -> int | None:
    return times.reader.get(v).in_commit_timestamp


def resolve_timestamp(
    times: CommitTimes, t: int, allow_latest: bool = False, allow_earliest: bool = False, alternatives: bool = True
) -> dict[str, Any]:
    """TIMESTAMP AS OF t, as Delta Lake's history manager; the answer explains itself."""
    ict, earliest, latest = times.ict, times.earliest, times.latest
    ev, et = ict.enablement_version, ict.enablement_timestamp
    if ict.enabled and (ev is None or t >= et):
        lo, hi, _source = max(ev or 0, earliest), latest + 1, "ict"
        found = _last_at_or_before(lo, hi, lambda v: _ict_or_none(times, v), t)
        if ev is None:
            rule = (
                f"In-Commit Timestamps are on for every version, so versions {lo}..{latest} were searched "
                f"by inCommitTimestamp (bisection)"
            )
        else:
            rule = (
                f"{format_ms(t)} is at or after the ICT enablement timestamp {format_ms(et)} (version {ev}), "
                f"so only versions {lo}..{latest} were searched, by inCommitTimestamp (bisection)"
            )
    else:
        hi = min(ev, latest + 1) if (ict.enabled and ev is not None) else latest + 1
        lo, _source = earliest, "file"
        found = _last_at_or_before(lo, hi, lambda v: times.file_time(v), t)
        if ict.enabled and ev is not None:
            rule = (
                f"{format_ms(t)} is before the ICT enablement timestamp {format_ms(et)} (version {ev}), so only "
                f"versions {lo}..{hi - 1} were searched, by file modification time (monotonized)"
            )
        else:
            rule = (
                f"In-Commit Timestamps are off, so versions {lo}..{latest} were searched by commit file "
                f"modification time (monotonized)"
            )
    earliest_ts = times.timestamp(earliest)[0]
    latest_ts, _latest_src = times.timestamp(latest)
    base = {"searchRange": [lo, hi], "rule": rule, "requestedTimestamp": t}
    if found is None:
        if not allow_earliest or hi <= lo:
            raise TimestampOutOfRangeError(
                f"The provided timestamp ({format_ms(t)}) is before the earliest version available to this table "
                f"(version {earliest} at {format_ms(earliest_ts)}). Please use a timestamp after {format_ms(earliest_ts)}.",
                reason="before_earliest",
                earliestVersion=earliest,
                earliestTimestamp=earliest_ts,
                **base,
            )
        # Delta's canReturnEarliestCommit: a time before the first commit reads the earliest one
        found = lo
        base["rule"] = f"{rule}; the time is before version {lo}'s commit, so allow_earliest answered version {lo}"
    ts, src = times.timestamp(found)
    if found == latest and ts is not None and t > ts and not allow_latest:
        raise TimestampOutOfRangeError(
            f"The provided timestamp ({format_ms(t)}) is after the latest commit (version {latest} at "
            f"{format_ms(latest_ts)}). Please use a timestamp before or at {format_ms(latest_ts)}.",
            reason="after_latest",
            latestVersion=latest,
            latestTimestamp=latest_ts,
            **base,
        )
    out = {"version": found, "commitTimestamp": ts, "commitTimestampIso": format_ms(ts), "source": src, **base}
    if alternatives:
        out["alternatives"] = _alternatives(times, t)
    return out


def _alternatives(times: CommitTimes, t: int) -> dict[str, int | None]:
    """What a reader using a single timestamp source would answer (None: before its first)."""
    by_info = _last_at_or_before(times.earliest, times.latest + 1, lambda v: times.reader.get(v).timestamp, t)
    by_file = _last_at_or_before(times.earliest, times.latest + 1, times.file_time, t)
    return {"commitInfoTimestamp": by_info, "fileModificationTime": by_file}
