"""A reachability answer as runs: consecutive versions that share one state (readable,
restorable, recoverable, reason, retention windows) stored once, beside the versions'
timestamps in a packed array and the missing files as intervals of versions. A 100,000-version
answer is a handful of runs, 800 KB of timestamps and one row per missing file instead of
100,000 nested dicts (each with its own list of up to 100 paths): small enough for every
process to read from a shared store, and looked up by version in O(log runs) plus a vectorised
pass over the missing files.

Entries come out in the API's shape (`VersionReach.to_dict`), built on demand."""

from __future__ import annotations

import bisect
import struct
import zlib
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import orjson

from tables.delta.history.reachability import MAX_LISTED, Reachability, VersionReach

NO_TIME = -(2**63)  # a version without a timestamp (its commit file is gone)
STORED_FORMAT = 3  # a new layout of the bytes: a new number (readers never meet an older one)
# format, length of the JSON part, versions, missing files; then the timestamps, the missing
# files' first versions and their ends, and the ends of their names in the names' bytes, each
# int64 little-endian; then the names, UTF-8, one after another
_HEAD = struct.Struct("<BIQQ")


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


class ReachRuns:
    """One table's reachability answer, oldest version first inside; `entry`, indexing and
    slicing answer newest first, as the API pages it."""

    __slots__ = ("gone_ends", "gone_paths", "gone_starts", "head", "stamps", "starts", "states")

    def __init__(
        self,
        head: dict[str, Any],
        starts: array,
        states: list[dict[str, Any]],
        stamps: np.ndarray,
        gone: tuple[np.ndarray, np.ndarray, PackedPaths],
    ) -> None:
        self.head = head  # latestVersion, retentions, checkpointMismatches, vacuumForecast (as runs)
        self.starts = starts  # first version of each run, ascending
        self.states = states  # each run's entry without version, timestamp and missing files
        self.stamps = stamps  # per version (int64)
        # each missing file's versions [start, end) and name, by start (Reachability.gone)
        self.gone_starts, self.gone_ends, self.gone_paths = gone

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
        gone = (
            np.array([g[0] for g in result.gone], dtype=np.int64),
            np.array([g[1] for g in result.gone], dtype=np.int64),
            PackedPaths.of([g[2] for g in result.gone]),
        )
        return cls(head, starts, states, stamps, gone)

    # --- stored form ----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        meta = orjson.dumps({"head": self.head, "starts": list(self.starts), "states": self.states})
        head = _HEAD.pack(STORED_FORMAT, len(meta), len(self.stamps), len(self.gone_paths))
        ends, names = self.gone_paths.packed()
        packed = b"".join(a.astype("<i8").tobytes() for a in (self.stamps, self.gone_starts, self.gone_ends, ends))
        return zlib.compress(head + meta + packed + names, 3)

    @classmethod
    def from_bytes(cls, data: bytes) -> ReachRuns:
        """The stored answer; its arrays and names are views of the one decompressed buffer."""
        raw = zlib.decompress(data)
        fmt, size, versions, files = _HEAD.unpack_from(raw)
        if fmt != STORED_FORMAT:
            raise ValueError(f"a stored reachability answer of format {fmt}, not {STORED_FORMAT}")
        at = _HEAD.size + size
        meta = orjson.loads(memoryview(raw)[_HEAD.size : at])
        arrays = []
        for n in (versions, files, files, files):
            arrays.append(np.frombuffer(raw, dtype="<i8", count=n, offset=at))
            at += 8 * n
        stamps, gone_starts, gone_ends, name_ends = arrays
        gone = (gone_starts, gone_ends, PackedPaths(memoryview(raw), name_ends, at))
        return cls(meta["head"], array("q", meta["starts"]), meta["states"], stamps, gone)

    # --- reading --------------------------------------------------------------------------

    @property
    def latest_version(self) -> int:
        return self.head["latestVersion"]

    def __len__(self) -> int:
        return len(self.stamps)

    def _run(self, version: int) -> int:
        return bisect.bisect_right(self.starts, version) - 1

    def entry(self, version: int) -> dict[str, Any] | None:
        """The version's entry (`VersionReach.to_dict`'s shape), None outside the table's log."""
        if not 0 <= version < len(self.stamps):
            return None
        state = self.states[self._run(version)]
        ts = int(self.stamps[version])
        count, paths = self._missing(version) if state["missing"] else (0, [])
        out = {k: v for k, v in state.items() if k != "missing"}
        out["version"] = version
        out["missingFiles"] = {"count": count, "paths": paths}
        out["retention"] = {"timestamp": None if ts == NO_TIME else ts, **state["retention"]}
        return {k: out[k] for k in _ENTRY_KEYS}

    def _missing(self, version: int) -> tuple[int, list[str]]:
        """How many files `version` misses, and the first MAX_LISTED of them in the order they
        went missing, sorted by name (as the core lists them)."""
        k = int(np.searchsorted(self.gone_starts, version, side="right"))  # only those gone by then
        active = np.flatnonzero(self.gone_ends[:k] > version)
        return int(active.size), sorted(self.gone_paths[i] for i in active[:MAX_LISTED])

    def get(self, version: int, default: Any = None) -> dict[str, Any] | None:
        found = self.entry(version) if isinstance(version, int) else None
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
