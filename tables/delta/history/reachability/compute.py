"""Which versions can still be read or restored, and why not.

For every version: can its state be rebuilt from the log (a complete checkpoint at or below it
with every later commit present, or every commit from 0), do all its data and deletion-vector
files still exist, and does it lie inside the table's retention. File sets per version come
from the intervals in which each file identity is active (one replay of the log per
reproducible run of versions), not from rebuilding every snapshot; existence from one listing
of the table's files, not a HEAD per file.
"""

from __future__ import annotations

import dataclasses
import heapq
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa

from tables.delta.errors import DeltaError, PathOutsideRootsError
from tables.delta.history.timestamps import commit_times
from tables.delta.log.actions import read_json_actions
from tables.delta.log.checkpoint import read_checkpoint_files, read_checkpoint_others
from tables.delta.log.commitinfo import parse_commit_info
from tables.delta.log.listing import (
    LOG_DIR,
    LogFile,
    LogListing,
    build_segment,
    complete_checkpoint,
    latest_version,
    list_log,
    read_last_checkpoint,
)
from tables.delta.snapshot.checkpoint_check import (
    Replayed,
    footer_disagreement,
    hint_detail,
    newest_checkpoint,
    replay_disagreement,
)
from tables.delta.snapshot.dv import deletion_vector_file
from tables.delta.snapshot.replay import canonical_paths, identity_keys
from tables.delta.snapshot.state import read_commit_bytes
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.text_bounds import echoed_path

MAX_LISTED = 100
DAY_MS = 86_400_000
# Delta Lake's defaults
DEFAULT_LOG_RETENTION = "interval 30 days"
DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"
_UNITS_MS = {
    "nanosecond": 1e-6,
    "microsecond": 1e-3,
    "millisecond": 1,
    "second": 1_000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": DAY_MS,
    "week": 7 * DAY_MS,
}


def _parse_interval(text: str) -> int | None:
    parts = re.findall(r"(-?\d+(?:\.\d+)?)\s*([a-z]+)", text.strip().lower().removeprefix("interval"))
    if not parts:
        return None
    total = 0.0
    for number, unit in parts:
        unit = unit.removesuffix("s")
        if unit not in _UNITS_MS:
            return None
        total += float(number) * _UNITS_MS[unit]
    return int(total)


_STRICT_INTERVAL = re.compile(r"(?:\s*\d+(?:\.\d+)?\s*[a-z]+)+\s*")
MAX_INTERVAL_TEXT = 100


def parse_interval(text: str | None) -> int | None:
    """A retention a person typed ("7 days", "interval 1 week", "24 hours") in milliseconds,
    or None when it is blank, too long, negative or names an unknown unit. Stricter than
    `interval_ms`: every word must be part of the interval, since a forecast for a value we
    half-understood would be worse than an error."""
    if not text or len(text) > MAX_INTERVAL_TEXT:
        return None
    body = text.strip().lower().removeprefix("interval")
    if not _STRICT_INTERVAL.fullmatch(body):
        return None
    return _parse_interval(body)


def interval_ms(text: str | None, default: str) -> int:
    """A Delta interval property ("interval 7 days", "1 week", "168 hours") in milliseconds;
    the default when absent or unreadable (Delta Lake refuses such values on write)."""
    parsed = _parse_interval(text) if text else None
    return parsed if parsed is not None else int(_parse_interval(default) or 0)


@dataclass(slots=True)
class VersionReach:
    version: int
    readable: bool
    restorable: bool
    reason: str | None
    missing_count: int = 0
    missing_files: list[str] = field(default_factory=list)
    timestamp: int | None = None
    inside_log_retention: bool | None = None
    inside_file_retention: bool | None = None
    # unreadable, and readable again once the noncurrent object versions of a versioned bucket
    # are copied back (mark_recoverable); None when not asked (no versioned bucket)
    recoverable: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "readable": self.readable,
            "restorable": self.restorable,
            "recoverable": self.recoverable,
            "reason": self.reason,
            "missingFiles": {"count": self.missing_count, "paths": self.missing_files},
            "retention": {
                "timestamp": self.timestamp,
                "insideLogRetention": self.inside_log_retention,
                "insideDeletedFileRetention": self.inside_file_retention,
            },
        }


@dataclass(slots=True)
class Reachability:
    latest_version: int
    log_retention_ms: int
    deleted_file_retention_ms: int
    versions: list[VersionReach]  # newest first
    vacuum_retention_ms: int | None = None
    vacuum_breaks: list[int] | None = None  # readable versions a VACUUM now would break, newest first
    # checkpoint version -> what it says against the log; the versions read from it are not
    # readable (reason checkpoint_mismatch)
    checkpoint_mismatches: dict[int, str] = field(default_factory=dict)
    # each missing file's versions [start, end) and its name as answers show it, by start: what
    # the versions' missing files are made of (an answer stored as runs lists them from here)
    gone: list[tuple[int, int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "latestVersion": self.latest_version,
            "logRetentionMs": self.log_retention_ms,
            "deletedFileRetentionMs": self.deleted_file_retention_ms,
            "versions": [v.to_dict() for v in self.versions],
        }
        if self.checkpoint_mismatches:  # only then: the answer's shape is unchanged otherwise
            out["checkpointMismatches"] = [
                {"version": v, "detail": d} for v, d in sorted(self.checkpoint_mismatches.items(), reverse=True)
            ]
        if self.vacuum_breaks is not None:
            out["vacuumForecast"] = {"retentionMs": self.vacuum_retention_ms, "breaksVersions": self.vacuum_breaks}
        return out


# --- the log: which versions can be rebuilt ------------------------------------------------------


def reproducible_runs(listing: LogListing) -> tuple[int, list[tuple[int, int, bool]]]:
    """(latest, runs): maximal runs [first, last] of versions whose state can be rebuilt, each
    with whether it starts from a checkpoint (else from commit 0)."""
    latest = latest_version(listing)
    if latest is None:
        return -1, []
    commits = {c.version for c in listing.commits}
    checkpoints = {v for v, files in listing.checkpoints.items() if complete_checkpoint(files)}
    runs: list[tuple[int, int, bool]] = []
    start: int | None = None
    from_checkpoint = False
    for v in range(latest + 1):
        if v in checkpoints and start is None:
            start, from_checkpoint = v, True
        elif v in commits and (start is not None or v == 0):
            if start is None:
                start, from_checkpoint = v, False
        elif v not in checkpoints:
            if start is not None:
                runs.append((start, v - 1, from_checkpoint))
            start = None
    if start is not None:
        runs.append((start, latest, from_checkpoint))
    return latest, runs


# --- files: the interval in which each identity is active ----------------------------------------


@dataclass(slots=True)
class Interval:
    start: int
    end: int  # exclusive; latest + 1 while still active
    path: str
    dv_file: str | None
    key: str | None = None  # the file identity (path and deletion vector)
    size: int | None = None  # the add's size in bytes (what a vanished file took)


Events = list[tuple[int, str, dict[str, Any]]]  # (version, "protocol" or "metaData", body) in log order
_CONFIG = ("protocol", "metaData")


def _run_files(
    storage: Storage, listing: LogListing, first: int, last: int, from_checkpoint: bool
) -> tuple[pa.Table, Events]:
    """The file actions of a run, and its protocol and metaData actions (to check the
    checkpoints inside it against)."""
    tables = []
    events: Events = []
    if from_checkpoint:
        files = complete_checkpoint(listing.checkpoints[first]) or []
        others = read_checkpoint_others(storage, files)
        meta = [b for n, b in others if n == "metaData"]
        keys = list(meta[0].get("partitionColumns") or []) if meta else []
        tables.append(read_checkpoint_files(storage, files, others, keys).select(_COLUMNS))
        events = [(first, n, b) for n, b in others if n in _CONFIG]
    commits = {c.version: c for c in listing.commits}
    lo = first + 1 if from_checkpoint else first
    sources = [
        (storage.display(commits[v].path), v, read_commit_bytes(storage, commits[v].path, commits[v].size))
        for v in range(lo, last + 1)
    ]
    if sources:
        batch = read_json_actions(sources, [])
        tables.append(batch.files.select(_COLUMNS))
        events += [(v, n, b) for v, n, b in batch.others if n in _CONFIG]
    return (pa.concat_tables(tables) if tables else pa.table({c: [] for c in _COLUMNS})), events


_COLUMNS = ["version", "seq", "is_add", "path", "size", "deletionVector"]


def file_intervals(
    storage: Storage, listing: LogListing, first: int, last: int, from_checkpoint: bool
) -> list[Interval]:
    """The intervals of every file identity active somewhere in [first, last]."""
    closed: list[Interval] = []
    open_: dict[str, Interval] = {}
    extend_intervals(closed, open_, _run_files(storage, listing, first, last, from_checkpoint)[0], first, last)
    return closed + list(open_.values())


def extend_intervals(
    closed: list[Interval], open_: dict[str, Interval], files: pa.Table, first: int, last: int
) -> None:
    """Apply file actions of versions up to `last` (rows before `first`, a checkpoint's, count
    from `first`): an add opens an identity's interval, a later action closes it. Intervals
    still open end at `last` + 1; `open_` (identity -> interval) carries them to the next
    update, so that new commits extend the intervals without reading the old ones again."""
    for iv in open_.values():
        iv.end = last + 1
    if files.num_rows == 0:
        return
    files = files.sort_by([("version", "ascending"), ("seq", "ascending")])
    keys = identity_keys(files).to_pylist()
    paths = canonical_paths(files.column("path")).to_pylist()
    dvs = files.column("deletionVector").to_pylist()
    sizes = files.column("size").to_pylist()
    for key, version, is_add, path, dv, size in zip(
        keys, files.column("version").to_pylist(), files.column("is_add").to_pylist(), paths, dvs, sizes, strict=True
    ):
        version = max(version, first)  # checkpoint rows: active at the run's first version
        current = open_.pop(key, None)
        if current is not None:
            current.end = version
            if current.end > current.start:
                closed.append(current)
        if is_add:
            open_[key] = Interval(version, last + 1, path, deletion_vector_file(dv), key, size)


def existing_files(storage: Storage) -> set[str]:
    """Every file under the table root outside the log, decoded and relative: one listing."""
    return set(storage.list_tree("", exclude=(LOG_DIR,)))


def _present(storage: Storage, log_path: str, listed: set[str]) -> bool:
    if log_path in listed and "%" not in log_path:  # the common case, without decoding
        return True
    key = unquote(log_path) if not log_path.startswith("file:") else log_path
    if key in listed:
        return True
    if "://" not in key and not key.startswith(("/", "file:")) and ".." not in key:
        return False
    try:  # a location outside the table root: checked (and confined) one by one, they are rare
        return storage.exists(storage.resolve(log_path))
    except (PathOutsideRootsError, DeltaError, OSError):
        return False


# --- checkpoints: the state they stand for -------------------------------------------------------

# Checkpoints of a run are compared path by path with the replay of the log before them, newest
# first (the newest always), while their files add up to no more than the replay read (the check
# at most doubles the cost), or FULL_CHECK_MIN on a small log; older ones by the add count their
# Parquet footers give, no data read: a log of thousands of checkpoints is not read over.
FULL_CHECK_MIN = 100_000


def full_check_budget(replayed_rows: int) -> int:
    return max(replayed_rows, FULL_CHECK_MIN)


def _config_at(events: Events, version: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The protocol and metaData in force at `version` (the last of each at or before it)."""
    protocol = metadata = None
    for v, name, body in events:
        if v > version:
            break
        if name == "protocol":
            protocol = body
        else:
            metadata = body
    return protocol, metadata


class _Active:
    """The identities active at a version, from intervals (ends exclusive): counts by binary
    search over sorted starts and ends, the keys themselves by one vectorized mask."""

    def __init__(self, intervals: list[Interval]) -> None:
        self.intervals = intervals
        self.starts = np.fromiter((iv.start for iv in intervals), np.int64, len(intervals))
        self.ends = np.fromiter((iv.end for iv in intervals), np.int64, len(intervals))
        self._s, self._e = np.sort(self.starts), np.sort(self.ends)
        self._keys: list[str] | None = None

    def count(self, v: int) -> int:
        # every interval that ended by v started before it
        return int(np.searchsorted(self._s, v, "right") - np.searchsorted(self._e, v, "right"))

    def keys(self, v: int) -> set[str]:
        if self._keys is None:  # once, and only for a run with a checkpoint compared in full
            self._keys = [str(iv.key) for iv in self.intervals]
        idx = np.flatnonzero((self.starts <= v) & (self.ends > v)).tolist()
        return set(map(self._keys.__getitem__, idx))


def checked_checkpoints(
    storage: Storage,
    checkpoints: dict[int, list[LogFile]],
    run: tuple[int, int, bool],
    intervals: list[Interval],
    events: Events,
    hint: tuple[int | None, dict[str, Any] | None],
    budget: int,
) -> dict[int, str]:
    """checkpoint version -> what it says against the log, for the complete `checkpoints` of
    `run` (first, last, from_checkpoint): each after the run's start against the replay of the
    log before it (`intervals` cover every identity active at them, `events` the protocol and
    metaData), the newest checkpoint of the log (`hint`: its version and `_last_checkpoint`)
    against the hint too; path by path while their files fit `budget`, else by count. A run's
    first checkpoint has nothing before it to compare with."""
    first, last, from_checkpoint = run
    versions = sorted((v for v in checkpoints if first <= v <= last), reverse=True)
    if from_checkpoint and versions[-1:] == [first] and hint[0] != first:
        versions.pop()  # the run starts from it: nothing before it to compare with, nor a hint
    if not versions:
        return {}
    active, out = _Active(intervals), {}
    source = f"the checkpoint at version {first}" if from_checkpoint else f"version {first}"
    for v in versions:
        count, adds, problem = active.count(v), None, None
        if v == first and from_checkpoint:
            adds = count  # the run starts from it: its own files, for the hint alone
        else:
            full = v == versions[0] or count <= budget
            want = Replayed(v, active.keys(v) if full else None, count, *_config_at(events, v), source)
            check = replay_disagreement if full else footer_disagreement
            problem, adds = check(storage, checkpoints[v], want)
            budget -= count if full else 0
        if problem is None and v == hint[0] and adds is not None:
            problem = hint_detail(hint[1], v, adds)
        if problem is not None:
            out[v] = problem
    return out


def _governed(state: ReachState) -> list[bool]:
    """Per version, whether its snapshot starts from a checkpoint that disagrees with the log
    (readers start from the newest complete checkpoint at or below a version)."""
    out = [False] * (state.latest + 1)
    cps = sorted(state.checkpoints)
    for v in state.mismatches:
        nxt = next((c for c in cps if c > v), state.latest + 1)
        out[v : min(nxt, state.latest + 1)] = [True] * (min(nxt, state.latest + 1) - v)
    return out


# --- the whole map ---------------------------------------------------------------------------


@dataclass(slots=True)
class ReachState:
    """What a reachability answer is computed from, kept to answer again after new commits
    without reading the old ones: the log's shape, each commit's time, the file intervals (the
    open ones by identity) and the last listing of the table's files."""

    latest: int
    first_commit: int
    commits: set[int]  # versions with a commit file
    checkpoints: set[int]  # versions with a complete checkpoint
    runs: list[tuple[int, int, bool]]
    stamps: list[int | None]  # each version's commit time (None when unknown)
    ict: Any  # the IctConfig of the table config the state was built with
    log_ret: int
    file_ret: int
    closed: list[Interval]
    open_: dict[str, Interval]  # identities active at `latest` (the last run reaches it)
    listed: set[str]
    updates: int = 0  # incremental updates since the full computation (benchmarks, tests)
    # checkpoint version -> what it says against the log (checked_checkpoints)
    mismatches: dict[int, str] = field(default_factory=dict)
    # the protocol and metaData at `latest` by the replay: new commits that change neither
    # leave them, so checkpoints written after an update are checked against them
    config: tuple[dict[str, Any] | None, dict[str, Any] | None] = (None, None)


def reach_state(location: str | Storage, listing: LogListing | None = None, *, list_files: bool = True) -> ReachState:
    """The full computation: every reproducible run replayed once, every file listed once
    (without `list_files`, the files are not listed: `listed` stays empty for the caller to
    fill, as the sync's check of vanished files does on an object store)."""
    storage = as_storage(location)
    listing = listing or list_log(storage)
    latest, runs = reproducible_runs(listing)
    times = commit_times(storage, listing)  # loads the latest table config too: used below
    conf = times.config.metadata.configuration or {}
    log_ret = interval_ms(conf.get("delta.logRetentionDuration"), DEFAULT_LOG_RETENTION)
    file_ret = interval_ms(conf.get("delta.deletedFileRetentionDuration"), DEFAULT_DELETED_FILE_RETENTION)
    stamps = [_timestamp(times, v) for v in range(latest + 1)]  # each commit's time, read once
    closed: list[Interval] = []
    open_: dict[str, Interval] = {}
    checkpoints = {v: f for v, files in listing.checkpoints.items() if (f := complete_checkpoint(files))}
    hint = (newest_checkpoint(listing), read_last_checkpoint(storage) if checkpoints else None)
    mismatches: dict[int, str] = {}
    config: tuple[dict[str, Any] | None, dict[str, Any] | None] = (None, None)
    for run in runs:
        first, last, from_checkpoint = run
        run_open: dict[str, Interval] = {}
        files, events = _run_files(storage, listing, first, last, from_checkpoint)
        before = len(closed)
        extend_intervals(closed, run_open, files, first, last)
        run_intervals = closed[before:] + list(run_open.values())
        budget = full_check_budget(files.num_rows)
        mismatches.update(checked_checkpoints(storage, checkpoints, run, run_intervals, events, hint, budget))
        if last == latest:
            open_, config = run_open, _config_at(events, latest)
        else:
            closed.extend(run_open.values())
    return ReachState(
        latest=latest,
        first_commit=min((c.version for c in listing.commits), default=0),
        commits={c.version for c in listing.commits},
        checkpoints={v for v, files in listing.checkpoints.items() if complete_checkpoint(files)},
        runs=runs,
        stamps=stamps,
        ict=times.ict,
        log_ret=log_ret,
        file_ret=file_ret,
        closed=closed,
        open_=open_,
        listed=existing_files(storage) if list_files else set(),
        mismatches=mismatches,
        config=config,
    )


def update_state(state: ReachState | None, location: str | Storage, *, list_files: bool = True) -> ReachState:
    """The state after what changed since it was built: the new commits are read and extend
    the intervals, the file listing is taken again (names only) and compared. Falls back to
    the full computation when the old part of the log changed (log cleanup, a checkpoint
    written below the old latest version), a new commit changes the table's metadata or
    protocol (its retention), or the new versions do not continue the last reproducible run.
    Without `list_files` the table's files are not listed again: `listed` is the last listing
    (or empty), for callers that look at the files their own way."""
    storage = as_storage(location)
    listing = list_log(storage)
    if state is None:
        return reach_state(storage, listing, list_files=list_files)
    latest = latest_version(listing)
    commits = {c.version for c in listing.commits}
    checkpoints = {v for v, files in listing.checkpoints.items() if complete_checkpoint(files)}
    old = state.latest
    if (
        latest is None
        or latest < old
        or {v for v in commits if v <= old} != state.commits
        or {v for v in checkpoints if v <= old} != state.checkpoints
        or not state.runs
        or state.runs[-1][1] != old
        or any(v not in commits for v in range(old + 1, latest + 1))
        # a disagreement found may have been with `_last_checkpoint`, which a new checkpoint
        # moves on from: rare enough to compute again rather than to tell the two apart
        or (state.mismatches and any(v > old for v in checkpoints))
    ):
        return reach_state(storage, listing, list_files=list_files)
    if latest == old:
        if list_files:
            state.listed = existing_files(storage)
        state.updates += 1
        return state
    by_version = {c.version: c for c in listing.commits}
    new = [by_version[v] for v in range(old + 1, latest + 1)]
    blobs = storage.read_many([c.path for c in new])
    batch = read_json_actions([(storage.display(c.path), c.version, b) for c, b in zip(new, blobs, strict=True)], [])
    if any(name in ("metaData", "protocol") for _v, name, _b in batch.others):
        return reach_state(storage, listing, list_files=list_files)
    stamps = list(state.stamps)
    infos = {v: parse_commit_info(b, c) for v, c, b in zip(range(old + 1, latest + 1), new, blobs, strict=True)}
    prev = stamps[-1] if stamps else None
    for c in new:
        if state.ict.applies(c.version):
            stamps.append(infos[c.version].in_commit_timestamp)
        else:  # file times, monotonized as commit_times does
            t = c.modification_time
            stamps.append(t if prev is None or t > prev else prev + 1)
        prev = stamps[-1]
    first, _last, from_checkpoint = state.runs[-1]
    before = len(state.closed)
    extend_intervals(state.closed, state.open_, batch.files.select(_COLUMNS), old + 1, latest)
    state.runs = [*state.runs[:-1], (first, latest, from_checkpoint)]
    new_checkpoints = {
        v: f for v, files in listing.checkpoints.items() if v > old and (f := complete_checkpoint(files))
    }
    if new_checkpoints:  # what is active after `old` is open, or was closed just now
        touched = state.closed[before:] + list(state.open_.values())
        events = [(old, n, b) for n, b in zip(_CONFIG, state.config, strict=True) if b is not None]
        hint = (newest_checkpoint(listing), read_last_checkpoint(storage))
        run = state.runs[-1]
        budget = full_check_budget(batch.files.num_rows)
        state.mismatches.update(checked_checkpoints(storage, new_checkpoints, run, touched, events, hint, budget))
    state.latest, state.commits, state.checkpoints, state.stamps = latest, commits, checkpoints, stamps
    if list_files:
        state.listed = existing_files(storage)
    state.updates += 1
    return state


def reachability(
    location: str | Storage, now: int, listing: LogListing | None = None, vacuum_retention: int | None = None
) -> Reachability:
    """Reachability of every version of the table, newest first, as of `now` (ms).

    With `vacuum_retention` (ms), also the forecast of a VACUUM with that retention run now:
    the versions readable today that it would break (it deletes every file the latest version
    no longer holds whose removal is older than the retention)."""
    storage = as_storage(location)
    return answer(reach_state(storage, listing), storage, now, vacuum_retention)


def answer(state: ReachState, location: str | Storage, now: int, vacuum_retention: int | None = None) -> Reachability:
    """The reachability map of a state as of `now` (see `reachability`)."""
    storage = as_storage(location)
    latest, stamps, listed = state.latest, state.stamps, state.listed
    log_ret, file_ret = state.log_ret, state.file_ret
    missing_all = [0] * (latest + 2)  # difference arrays over versions
    missing_added = [0] * (latest + 2)  # ... of files the latest version does not hold
    gone: list[Interval] = []
    reproducible = [False] * (latest + 1)
    doomed = [0] * (latest + 2)  # files a VACUUM with `vacuum_retention` would delete
    horizon = None if vacuum_retention is None else now - vacuum_retention
    for first, last, _from_checkpoint in state.runs:
        for v in range(first, last + 1):
            reproducible[v] = True
    intervals = [*state.closed, *state.open_.values()]
    # which named files are absent: set differences in C, then the few left checked one by one
    named = {iv.path for iv in intervals}
    named.update(iv.dv_file for iv in intervals if iv.dv_file is not None)
    absent = {p for p in named - listed if not _present(storage, p, listed)}
    for iv in intervals:
        if horizon is not None and iv.end <= latest:
            removed_at = stamps[iv.end]
            if removed_at is not None and removed_at < horizon:
                doomed[iv.start] += 1
                doomed[iv.end] -= 1
        if iv.path not in absent and (iv.dv_file is None or iv.dv_file not in absent):
            continue
        lost = [p for p in (iv.path, iv.dv_file) if p is not None and p in absent]
        gone.append(Interval(iv.start, iv.end, _shown(lost[0]), iv.dv_file, iv.key))
        missing_all[iv.start] += 1
        missing_all[iv.end] -= 1
        # a RESTORE adds the files the latest version does not hold: a file removed and added
        # again later (the same identity) is held, so its absence does not stop a restore
        if iv.end <= latest and iv.key not in state.open_:
            missing_added[iv.start] += 1
            missing_added[iv.end] -= 1

    first_commit = state.first_commit
    governed = _governed(state)
    gone.sort(key=lambda iv: iv.start)
    out: list[VersionReach] = []
    active: dict[int, Interval] = {}  # missing files of version v, in the order they went missing
    expiry: list[tuple[int, int]] = []  # (end, key) of the active ones: no scan of all per version
    n_all = n_added = 0
    g = 0
    listed_paths: list[str] | None = None
    for v in range(latest + 1):
        n_all += missing_all[v]
        n_added += missing_added[v]
        while g < len(gone) and gone[g].start <= v:
            active[g] = gone[g]
            heapq.heappush(expiry, (gone[g].end, g))
            g += 1
            listed_paths = None
        while expiry and expiry[0][0] <= v:
            del active[heapq.heappop(expiry)[1]]
            listed_paths = None
        ts = stamps[v]
        in_log = None if ts is None else ts >= now - log_ret
        nxt = stamps[v + 1] if v < latest else now
        in_files = True if v == latest else (None if nxt is None else nxt >= now - file_ret)
        if not reproducible[v]:
            reason = "log_expired" if v < first_commit else "not_reproducible"
            out.append(VersionReach(v, False, False, reason, timestamp=ts, inside_log_retention=in_log))
            continue
        if listed_paths is None:  # the same missing files as the version before: the same list
            listed_paths = sorted(iv.path for iv in islice(active.values(), MAX_LISTED))
        paths = listed_paths if n_all else []
        # a snapshot read from a checkpoint that disagrees with the log lists other files
        readable = n_all == 0 and not governed[v]
        restorable = readable or (n_added == 0 and not governed[v])
        reason = "files_missing" if n_all else ("beyond_retention" if in_files is False else None)
        reason = "checkpoint_mismatch" if governed[v] else reason
        out.append(VersionReach(v, readable, restorable, reason, n_all, list(paths), ts, in_log, in_files))
    out.reverse()
    result = Reachability(latest, log_ret, file_ret, out, checkpoint_mismatches=dict(state.mismatches))
    result.gone = [(iv.start, iv.end, iv.path) for iv in gone]
    if horizon is not None:
        _forecast(result, doomed, vacuum_retention)
    return result


def _forecast(result: Reachability, doomed: list[int], vacuum_retention: int | None) -> None:
    """The readable versions a VACUUM would break: those holding a file it deletes (`doomed`,
    a difference array over versions)."""
    readable = {v.version for v in result.versions if v.readable}
    running, broken = 0, []
    for v in range(result.latest_version + 1):
        running += doomed[v]
        if running and v in readable:
            broken.append(v)
    result.vacuum_breaks = sorted(broken, reverse=True)
    result.vacuum_retention_ms = vacuum_retention


def _shown(log_path: str) -> str:
    """A missing file as answers list it: relative to the table as the log names it, decoded;
    a file named by an absolute path or URI only by its name (answers never tell the server's
    directories or another bucket's layout)."""
    key = unquote(log_path)
    if key.startswith(("/", "file:")) or "://" in key:
        return echoed_path(".../" + key.rstrip("/").rsplit("/", 1)[-1])
    return echoed_path(key)


def _timestamp(times: Any, version: int) -> int | None:
    try:
        return times.timestamp(version)[0]
    except (KeyError, DeltaError, OSError):
        return None


# --- recovery: what the noncurrent versions of a versioned bucket would make readable again ------


def recovery_state(state: ReachState, view: Storage, recovered: Iterable[str]) -> ReachState:
    """The state as it would be were the `recovered` keys (relative to the table) back, `view`
    being the storage that shows them. When none is in the log, only the listing of the
    table's files changes (no replay); else the log itself differs, and the state is computed
    again on the view."""
    keys = set(recovered)
    if any(k.startswith(LOG_DIR + "/") for k in keys):
        return reach_state(view)
    return dataclasses.replace(state, listed=state.listed | keys)


def mark_recoverable(result: Reachability, recovered: Reachability | None) -> None:
    """Mark each version of `result`: recoverable when unreadable now and readable in the
    answer of the recovery state (`recovered`; None: nothing to recover, none is)."""
    readable = {v.version for v in recovered.versions if v.readable} if recovered is not None else set()
    for v in result.versions:
        v.recoverable = not v.readable and v.version in readable


def recovery_needs(state: ReachState, view: Storage, version: int) -> set[str]:
    """Every key (relative to the table, decoded) `version` needs in the recovery state: its
    log segment (checkpoint parts, and sidecars of a v2 checkpoint, the commits after it) and
    the data and deletion-vector files active at it. Files the log names outside the table's
    root are left out: they are not the table's to recover."""
    listing = list_log(view)
    segment = build_segment(view, listing, version)
    keys = {c.path for c in segment.commits}
    if segment.checkpoint:
        keys.update(f.path for f in segment.checkpoint)
        if any(f.v2 for f in segment.checkpoint):  # its sidecars: those the view lists
            keys.update(view.list_tree(f"{LOG_DIR}/_sidecars"))
    for iv in [*state.closed, *state.open_.values()]:
        if iv.start <= version < iv.end:
            for path in (iv.path, iv.dv_file):
                key = _table_key(view, path) if path is not None else None
                if key is not None:
                    keys.add(key)
    return keys


def _table_key(storage: Storage, log_path: str) -> str | None:
    """The key of a path the log names when it lies under the table's root, else None."""
    try:
        key = storage.resolve(log_path)
    except (PathOutsideRootsError, DeltaError):
        return None
    return None if "://" in key else key
