"""A reachability answer as runs: consecutive versions that share one state (readable,
restorable, recoverable, reason, retention windows) stored once, beside the versions'
timestamps and how many files each version misses, in packed arrays. A 100,000-version
answer is a handful of runs and 1.6 MB of arrays instead of 100,000 nested dicts: small enough
for every process to read from a shared store, looked up by version in O(log runs).

The missing files' names are kept apart (`MissingNames`: blocks of intervals of versions with
their names, and a small index of the blocks), so that a process showing a list of versions
never holds them: one version's names are read from the few blocks that can hold them.

Only the retention windows depend on the clock: `ReachRuns.at(now)` gives the answer of a later
time from a stored one (the versions' timestamps against the retentions, vectorised), equal to
computing it again from the table's state at that time.

Entries come out in the API's shape (`VersionReach.to_dict`), built on demand."""

from __future__ import annotations

import bisect
import struct
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import orjson

from tables.delta.history.reachability.compute import MAX_LISTED, Reachability, VersionReach

NO_TIME = -(2**63)  # a version without a timestamp (its commit file is gone)
STORED_FORMAT = 4  # a new layout of the bytes: a new number (readers never meet an older one)
# format, length of the JSON part, versions, first version with missing files, versions counted;
# then the timestamps and the missing counts of [first, first + counted), int64 little-endian
_HEAD = struct.Struct("<BIQQQ")
# a block of missing files: how many; then their first versions, their ends and the ends of their
# names in the names' bytes, int64 little-endian; then the names, UTF-8, one after another
_BLOCK = struct.Struct("<Q")
NAMES_PER_BLOCK = 4096  # a version's names come from a few blocks of this many files
_NOT_REPRODUCIBLE = ("log_expired", "not_reproducible")  # reasons that say no file retention


class PackedPaths(Sequence[str]):
    """The missing files' names as one buffer and their ends, a name decoded when asked: a
    million names as Python strings took 290 MB in every process that read the answer."""

    __slots__ = ("_buf", "_ends", "_start")

    def __init__(self, buf: bytes | memoryview, ends: np.ndarray, start: int = 0) -> None:
        self._buf, self._ends, self._start = buf, ends, start

    @classmethod
    def of(cls, paths: list[str]) -> PackedPaths:
        encoded = [p.encode() for p in paths]
        return cls(b"".join(encoded), np.cumsum([len(e) for e in encoded], dtype=np.int64))

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        lo = self._start + (int(self._ends[i - 1]) if i > 0 else 0)
        return bytes(self._buf[lo : self._start + int(self._ends[i])]).decode()

    def packed(self) -> tuple[np.ndarray, bytes]:
        end = self._start + (int(self._ends[-1]) if len(self._ends) else 0)
        return self._ends, bytes(self._buf[self._start : end])


class MissingNames:
    """Every missing file of an answer as its versions [start, end) and its name, in the
    order they went missing (by start), cut in blocks of NAMES_PER_BLOCK files; the index says
    each block's first start and greatest end, so that one version's names are read from the
    blocks that can hold it only. The blocks are bytes: in memory (`of`), or fetched by the
    caller's `fetch` (block numbers in, their bytes out, None for one that is gone)."""

    __slots__ = ("_cache", "_fetch", "firsts", "last_ends")

    def __init__(
        self, firsts: np.ndarray, last_ends: np.ndarray, fetch: Callable[[list[int]], list[bytes | None]]
    ) -> None:
        self.firsts, self.last_ends, self._fetch = firsts, last_ends, fetch
        self._cache: dict[int, tuple[np.ndarray, np.ndarray, PackedPaths] | None] = {}

    @staticmethod
    def blocks_of(gone: Sequence[tuple[int, int, str]], size: int = NAMES_PER_BLOCK) -> tuple[bytes, list[bytes]]:
        """(the index, the blocks) of the missing files `gone` ((start, end, name) by start)."""
        blocks, firsts, last_ends = [], [], []
        for at in range(0, len(gone), size):
            part = gone[at : at + size]
            starts = np.array([g[0] for g in part], dtype="<i8")
            ends = np.array([g[1] for g in part], dtype="<i8")
            ends_of, names = PackedPaths.of([g[2] for g in part]).packed()
            arrays = b"".join(a.astype("<i8").tobytes() for a in (starts, ends, ends_of))
            blocks.append(zlib.compress(_BLOCK.pack(len(part)) + arrays + names, 3))
            firsts.append(int(starts[0]))
            last_ends.append(int(ends.max()))
        index = np.array([len(blocks), *firsts, *last_ends], dtype="<i8").tobytes()
        return index, blocks

    @classmethod
    def reader(cls, index: bytes, fetch: Callable[[list[int]], list[bytes | None]]) -> MissingNames:
        arr = np.frombuffer(index, dtype="<i8")
        n = int(arr[0])
        return cls(arr[1 : 1 + n], arr[1 + n : 1 + 2 * n], fetch)

    @classmethod
    def of(cls, gone: Sequence[tuple[int, int, str]], size: int = NAMES_PER_BLOCK) -> MissingNames:
        """Held in memory (the computing process's, and tests')."""
        index, blocks = cls.blocks_of(gone, size)
        return cls.reader(index, lambda wanted: [blocks[i] for i in wanted])

    def _blocks(self, wanted: list[int]) -> list[tuple[np.ndarray, np.ndarray, PackedPaths] | None]:
        missing = [i for i in wanted if i not in self._cache]
        if missing:
            for i, data in zip(missing, self._fetch(missing), strict=True):
                self._cache[i] = None if data is None else _block(data)
        return [self._cache[i] for i in wanted]

    def paths(self, version: int, most: int = MAX_LISTED) -> list[str] | None:
        """The first `most` files `version` misses in the order they went missing, sorted by
        name (as the core lists them); None when a block it needs is no longer stored."""
        candidates = np.flatnonzero((self.firsts <= version) & (self.last_ends > version)).tolist()
        found: list[str] = []
        for at in range(0, len(candidates), 4):  # a few blocks per fetch: one or two are the rule
            for block in self._blocks(candidates[at : at + 4]):
                if block is None:
                    return None
                starts, ends, names = block
                k = int(np.searchsorted(starts, version, side="right"))
                active = np.flatnonzero(ends[:k] > version)[: most - len(found)]
                found.extend(names[i] for i in active.tolist())
                if len(found) >= most:
                    return sorted(found)
        return sorted(found)


def _block(data: bytes) -> tuple[np.ndarray, np.ndarray, PackedPaths]:
    raw = zlib.decompress(data)
    (n,) = _BLOCK.unpack_from(raw)
    at, arrays = _BLOCK.size, []
    for _ in range(3):
        arrays.append(np.frombuffer(raw, dtype="<i8", count=n, offset=at))
        at += 8 * n
    starts, ends, name_ends = arrays
    return starts, ends, PackedPaths(memoryview(raw), name_ends, at)


def _state(v: VersionReach) -> tuple[Any, ...]:
    """What a run shares: everything of an entry but its version, timestamp and which files
    are missing (whether it lists them: a version that cannot be rebuilt lists none)."""
    return (
        v.readable,
        v.restorable,
        v.recoverable,
        v.reason,
        v.missing_count > 0,
        v.inside_log_retention,
        v.inside_file_retention,
    )


def _entry(state: tuple[Any, ...]) -> dict[str, Any]:
    readable, restorable, recoverable, reason, missing, in_log, in_files = state
    return {
        "readable": readable,
        "restorable": restorable,
        "recoverable": recoverable,
        "reason": reason,
        "missing": missing,
        "retention": {"insideLogRetention": in_log, "insideDeletedFileRetention": in_files},
    }


_ENTRY_KEYS = ("version", "readable", "restorable", "recoverable", "reason", "missingFiles", "retention")


def _runs_of(versions: list[int]) -> list[list[int]]:
    """[first, last] runs of consecutive versions (any order in, ascending out)."""
    runs: list[list[int]] = []
    for v in sorted(versions):
        if runs and runs[-1][1] == v - 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return runs


_FLAG = (False, True, None)  # a retention flag as `at` codes it


def _moved(state: dict[str, Any], in_log: bool | None, in_files: bool | None) -> dict[str, Any]:
    """A run's shared state with its retention flags as of another time: `beyond_retention`
    follows the deleted-file retention unless a stronger reason (files missing, a checkpoint
    that disagrees, a log that cannot rebuild it) stands."""
    reason = state["reason"]
    if reason in (None, "beyond_retention"):
        reason = "beyond_retention" if in_files is False else None
    return {
        **state,
        "reason": reason,
        "retention": {"insideLogRetention": in_log, "insideDeletedFileRetention": in_files},
    }


def _counts(gone: Sequence[tuple[int, int, str]]) -> tuple[int, np.ndarray]:
    """(first version, counts): how many of the missing files each version from the first one
    that misses any to the last one misses (a difference array summed)."""
    if not gone:
        return 0, np.zeros(0, dtype=np.int64)
    starts = np.array([g[0] for g in gone], dtype=np.int64)
    ends = np.array([g[1] for g in gone], dtype=np.int64)
    lo, hi = int(starts.min()), int(ends.max())
    diff = np.bincount(starts - lo, minlength=hi - lo + 1) - np.bincount(ends - lo, minlength=hi - lo + 1)
    return lo, np.cumsum(diff[: hi - lo]).astype(np.int64)


class ReachRuns:
    """One table's reachability answer, oldest version first inside; `entry`, indexing and
    slicing answer newest first, as the API pages it. Entries list the missing files' names
    only when asked (`entry(v, paths=True)`, slices and iteration) and `names` is there; `get`
    gives counts only, for lists of versions."""

    __slots__ = ("count_lo", "counts", "head", "names", "stamps", "starts", "states")

    def __init__(
        self,
        head: dict[str, Any],
        starts: array,
        states: list[dict[str, Any]],
        stamps: np.ndarray,
        counts: tuple[int, np.ndarray],
        names: MissingNames | None = None,
    ) -> None:
        self.head = head  # latestVersion, retentions, checkpointMismatches, vacuumForecast (as runs)
        self.starts = starts  # first version of each run, ascending
        self.states = states  # each run's entry without version, timestamp and missing files
        self.stamps = stamps  # per version (int64)
        # how many files each version of [count_lo, count_lo + len(counts)) misses (0 outside)
        self.count_lo, self.counts = counts
        self.names = names  # the missing files' names, read when an entry lists them

    @classmethod
    def of(cls, result: Reachability) -> ReachRuns:
        starts, states, last = array("q"), [], None
        stamps = np.full(result.latest_version + 1, NO_TIME, dtype=np.int64)
        for v in reversed(result.versions):  # oldest first
            state = _state(v)
            if state != last:
                starts.append(v.version)
                states.append(_entry(state))
                last = state
            if v.timestamp is not None:
                stamps[v.version] = v.timestamp
        head: dict[str, Any] = {
            "latestVersion": result.latest_version,
            "logRetentionMs": result.log_retention_ms,
            "deletedFileRetentionMs": result.deleted_file_retention_ms,
        }
        if result.checkpoint_mismatches:
            head["checkpointMismatches"] = [
                {"version": v, "detail": d} for v, d in sorted(result.checkpoint_mismatches.items(), reverse=True)
            ]
        if result.vacuum_breaks is not None:
            head["vacuumForecast"] = {
                "retentionMs": result.vacuum_retention_ms,
                "count": len(result.vacuum_breaks),
                "runs": _runs_of(result.vacuum_breaks),
            }
        return cls(head, starts, states, stamps, _counts(result.gone), MissingNames.of(result.gone))

    # --- the clock ------------------------------------------------------------------------

    def at(self, now: int) -> ReachRuns:
        """The answer as of `now` (ms), from this one: only the retention windows move with
        the clock (a version's timestamp against the log retention, the next version's against
        the deleted-file retention, and `beyond_retention` with it); what can be read, restored
        or recovered, and which files are missing, are the table's state, unchanged. Equal to
        the core's answer computed at `now` from the same state. Not for an answer with a
        VACUUM forecast (the forecast's horizon needs every removal's time)."""
        if "vacuumForecast" in self.head:
            raise ValueError("an answer with a VACUUM forecast is computed at its time, not derived")
        n = len(self.stamps)
        if n == 0:
            return ReachRuns(dict(self.head), array("q"), [], self.stamps, (self.count_lo, self.counts), self.names)
        stamps = self.stamps
        known = stamps != NO_TIME
        in_log = np.where(known, stamps >= now - int(self.head["logRetentionMs"]), 2).astype(np.int8)
        nxt = np.empty(n, dtype=np.int64)
        nxt[:-1] = stamps[1:]
        nxt[-1] = now
        in_files = np.where(nxt != NO_TIME, nxt >= now - int(self.head["deletedFileRetentionMs"]), 2).astype(np.int8)
        in_files[-1] = 1  # the latest version holds its files whatever the clock
        starts = np.frombuffer(self.starts, dtype=np.int64) if len(self.starts) else np.zeros(1, np.int64)
        run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
        repro = np.array([s["reason"] not in _NOT_REPRODUCIBLE for s in self.states], dtype=bool)
        in_files[~repro[run]] = 2  # a version that cannot be rebuilt says nothing of its files
        key = run * 9 + in_log * 3 + in_files
        cuts = np.concatenate(([0], np.flatnonzero(key[1:] != key[:-1]) + 1)).tolist()
        out_starts, out_states = array("q"), []
        for at in cuts:
            state = _moved(self.states[int(run[at])], _FLAG[int(in_log[at])], _FLAG[int(in_files[at])])
            if not out_states or state != out_states[-1]:
                out_starts.append(at)
                out_states.append(state)
        return ReachRuns(dict(self.head), out_starts, out_states, stamps, (self.count_lo, self.counts), self.names)

    # --- stored form ----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The answer without the missing files' names (`MissingNames.blocks_of` stores them)."""
        meta = orjson.dumps({"head": self.head, "starts": list(self.starts), "states": self.states})
        head = _HEAD.pack(STORED_FORMAT, len(meta), len(self.stamps), self.count_lo, len(self.counts))
        packed = b"".join(a.astype("<i8").tobytes() for a in (self.stamps, self.counts))
        return zlib.compress(head + meta + packed, 3)

    @classmethod
    def from_bytes(cls, data: bytes, names: MissingNames | None = None) -> ReachRuns:
        """The stored answer; its arrays are views of the one decompressed buffer."""
        raw = zlib.decompress(data)
        fmt, size, versions, count_lo, counted = _HEAD.unpack_from(raw)
        if fmt != STORED_FORMAT:
            raise ValueError(f"a stored reachability answer of format {fmt}, not {STORED_FORMAT}")
        at = _HEAD.size + size
        meta = orjson.loads(memoryview(raw)[_HEAD.size : at])
        stamps = np.frombuffer(raw, dtype="<i8", count=versions, offset=at)
        counts = np.frombuffer(raw, dtype="<i8", count=counted, offset=at + 8 * versions)
        return cls(meta["head"], array("q", meta["starts"]), meta["states"], stamps, (count_lo, counts), names)

    # --- reading --------------------------------------------------------------------------

    @property
    def latest_version(self) -> int:
        return self.head["latestVersion"]

    def __len__(self) -> int:
        return len(self.stamps)

    def _run(self, version: int) -> int:
        return bisect.bisect_right(self.starts, version) - 1

    def entry(self, version: int, *, paths: bool = True) -> dict[str, Any] | None:
        """The version's entry (`VersionReach.to_dict`'s shape), None outside the table's log;
        without `paths`, its missing files are counted only (`missingFiles` has no `paths`)."""
        if not 0 <= version < len(self.stamps):
            return None
        state = self.states[self._run(version)]
        ts = int(self.stamps[version])
        count = self.missing_count(version) if state["missing"] else 0
        out = {k: v for k, v in state.items() if k != "missing"}
        out["version"] = version
        out["missingFiles"] = {"count": count}
        if paths:
            out["missingFiles"]["paths"] = self.missing_paths(version) if count else []
        out["retention"] = {"timestamp": None if ts == NO_TIME else ts, **state["retention"]}
        return {k: out[k] for k in _ENTRY_KEYS}

    def missing_count(self, version: int) -> int:
        at = version - self.count_lo
        return int(self.counts[at]) if 0 <= at < len(self.counts) else 0

    def missing_paths(self, version: int) -> list[str]:
        """The first MAX_LISTED files `version` misses in the order they went missing, sorted
        by name (as the core lists them); none when the names are not at hand."""
        found = self.names.paths(version) if self.names is not None else None
        return found or []

    def get(self, version: int, default: Any = None) -> dict[str, Any] | None:
        """The version's entry with its missing files counted, not named: what a list of
        versions shows (their names are read for one version's own page only)."""
        found = self.entry(version, paths=False) if isinstance(version, int) else None
        return default if found is None else found

    def __getitem__(self, index: int | slice) -> Any:
        """Newest first, as the answer lists its versions: [0] is the latest version."""
        n = len(self.stamps)
        if isinstance(index, slice):
            return [self.entry(n - 1 - i) for i in range(*index.indices(n))]
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(index)
        return self.entry(n - 1 - index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self.entry(v) for v in range(len(self.stamps) - 1, -1, -1))

    def runs(self, lo: int = 0, hi: int | None = None) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(first, last, shared state) of each run within [lo, hi], oldest first."""
        top = len(self.stamps) - 1 if hi is None else min(hi, len(self.stamps) - 1)
        if top < lo:
            return
        for i in range(max(self._run(lo), 0), len(self.starts)):
            first = self.starts[i]
            if first > top:
                break
            last = self.starts[i + 1] - 1 if i + 1 < len(self.starts) else len(self.stamps) - 1
            yield max(first, lo), min(last, top), self.states[i]

    def versions_where(self, key: str) -> list[int]:
        """The versions whose entry has `key` true, newest first."""
        out: list[int] = []
        for first, last, state in self.runs():
            if state.get(key):
                out.extend(range(first, last + 1))
        out.reverse()
        return out

    def forecast(self, limit: int) -> dict[str, Any] | None:
        """The VACUUM forecast asked with the answer (None when not): its count and the first
        `limit` versions it breaks, newest first."""
        found = self.head.get("vacuumForecast")
        if found is None:
            return None
        broken: list[int] = []
        for first, last in reversed(found["runs"]):
            broken.extend(range(last, max(first - 1, last - (limit - len(broken)) - 1), -1))
            if len(broken) >= limit:
                break
        return {
            "retentionMs": found["retentionMs"],
            "count": found["count"],
            "breaksVersions": broken[:limit],
            "truncated": found["count"] > limit,
        }

    def to_dict(self) -> dict[str, Any]:
        """The whole answer as `Reachability.to_dict` gives it (every version: for tests and
        small tables, never for pages)."""
        out = {k: v for k, v in self.head.items() if k != "vacuumForecast"}
        out["versions"] = list(self)
        if "vacuumForecast" in self.head:
            found = self.head["vacuumForecast"]
            out["vacuumForecast"] = {
                "retentionMs": found["retentionMs"],
                "breaksVersions": self.forecast(found["count"])["breaksVersions"],
            }
        return out
