"""A reachability answer as runs: consecutive versions that share one state (readable,
restorable, recoverable, reason, missing files, retention windows) stored once, beside the
versions' timestamps in a packed array. A 100,000-version answer is a handful of runs and
800 KB of timestamps instead of 100,000 nested dicts: small enough for every process to read
it from a shared store, and looked up by version in O(log runs).

Entries come out in the API's shape (`VersionReach.to_dict`), built on demand."""

from __future__ import annotations

import bisect
import struct
import sys
import zlib
from array import array
from collections.abc import Iterator
from typing import Any

import orjson

from tables.delta.history.reachability import Reachability, VersionReach

NO_TIME = -(2**63)  # a version without a timestamp (its commit file is gone)
_FORMAT = 1
_HEAD = struct.Struct("<BI")  # format, length of the JSON part; the timestamps follow


def _state(v: VersionReach) -> tuple[Any, ...]:
    """What a run shares: everything of an entry but its version and timestamp."""
    return (
        v.readable,
        v.restorable,
        v.recoverable,
        v.reason,
        v.missing_count,
        tuple(v.missing_files),
        v.inside_log_retention,
        v.inside_file_retention,
    )


def _entry(state: tuple[Any, ...]) -> dict[str, Any]:
    readable, restorable, recoverable, reason, count, paths, in_log, in_files = state
    return {
        "readable": readable,
        "restorable": restorable,
        "recoverable": recoverable,
        "reason": reason,
        "missingFiles": {"count": count, "paths": list(paths)},
        "retention": {"insideLogRetention": in_log, "insideDeletedFileRetention": in_files},
    }


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

    __slots__ = ("head", "stamps", "starts", "states")

    def __init__(self, head: dict[str, Any], starts: array, states: list[dict[str, Any]], stamps: array) -> None:
        self.head = head  # latestVersion, retentions, checkpointMismatches, vacuumForecast (as runs)
        self.starts = starts  # first version of each run, ascending
        self.states = states  # each run's entry without version and timestamp
        self.stamps = stamps  # per version

    @classmethod
    def of(cls, result: Reachability) -> ReachRuns:
        starts, states, last = array("q"), [], None
        stamps = array("q", [NO_TIME]) * (result.latest_version + 1)
        for v in reversed(result.versions):  # oldest first
            state = _state(v)
            if state != last:
                starts.append(v.version)
                states.append(_entry(state))
                last = state
            stamps[v.version] = NO_TIME if v.timestamp is None else v.timestamp
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
        return cls(head, starts, states, stamps)

    # --- stored form ----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        meta = orjson.dumps({"head": self.head, "starts": list(self.starts), "states": self.states})
        stamps = self.stamps if sys.byteorder == "little" else _swapped(self.stamps)
        return zlib.compress(_HEAD.pack(_FORMAT, len(meta)) + meta + stamps.tobytes(), 3)

    @classmethod
    def from_bytes(cls, data: bytes) -> ReachRuns:
        raw = zlib.decompress(data)
        fmt, size = _HEAD.unpack_from(raw)
        if fmt != _FORMAT:
            raise ValueError(f"a stored reachability answer of format {fmt}, not {_FORMAT}")
        meta = orjson.loads(raw[_HEAD.size : _HEAD.size + size])
        stamps = array("q")
        stamps.frombytes(raw[_HEAD.size + size :])
        if sys.byteorder != "little":
            stamps = _swapped(stamps)
        return cls(meta["head"], array("q", meta["starts"]), meta["states"], stamps)

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
        ts = self.stamps[version]
        return {
            "version": version,
            **state,
            "missingFiles": {**state["missingFiles"], "paths": list(state["missingFiles"]["paths"])},
            "retention": {"timestamp": None if ts == NO_TIME else ts, **state["retention"]},
        }

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


def _swapped(values: array) -> array:
    copy = array("q", values)
    copy.byteswap()
    return copy
