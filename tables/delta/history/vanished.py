"""Files the log still references that are gone from storage: what a VACUUM (or anyone)
removed outside the log, and which versions it made unreadable.

The referenced files are those of the versions still in the log: the latest snapshot's active
files and the files retained versions removed (what time travel needs), with their sizes, from
reachability's file intervals (`ReachState`). A look compares them with the storage, either
with one listing of the table (`listed_look`) or by asking about a few of them
(`sample_paths`, `absent_among`, `sampled_look`); which versions a vanished file makes
unreadable is reachability's own answer (`answer`, reason `files_missing`), not a second rule.

What a look keeps for the next one is compact: the missing files as sorted 64-bit hashes of
their paths (`pack`/`unpack`), never the referenced files themselves.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from tables.delta.errors import PathOutsideRootsError, PathTooLongError
from tables.delta.history.reachability.compute import ReachState, answer
from tables.delta.history.reachability.compute import _present as present_in  # the one rule for "there"
from tables.delta.history.reachability.compute import _shown as shown_path  # paths as answers show them
from tables.delta.storage.api import Storage

MAX_PATHS = 20  # vanished paths an outcome names (the counts are whole)
HEAD_THREADS = 8

Ranges = list[list[int]]  # [[first, last], ...] of versions, ascending, inclusive


def path_hash(path: str) -> int:
    """A path's 64-bit fingerprint (unsigned): what a look keeps of a missing file."""
    digest = hashlib.blake2b(path.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def pack(hashes: Iterable[int]) -> bytes:
    """Hashes as sorted big-endian uint64 bytes (8 bytes a file)."""
    return np.sort(np.fromiter(hashes, np.uint64)).astype(">u8").tobytes()


def unpack(data: bytes | memoryview | None) -> np.ndarray | None:
    return None if data is None else np.frombuffer(bytes(data), ">u8").astype(np.uint64)


def digest(hashes: Iterable[int]) -> str:
    """An order-free fingerprint of a set of hashes (their sum modulo 2**64), as hex."""
    return f"{sum(hashes) % (1 << 64):016x}"


def to_ranges(versions: Iterable[int]) -> Ranges:
    out: Ranges = []
    for v in sorted(set(versions)):
        if out and out[-1][1] == v - 1:
            out[-1][1] = v
        else:
            out.append([v, v])
    return out


def in_ranges(ranges: Ranges) -> set[int]:
    return {v for first, last in ranges for v in range(first, last + 1)}


# --- what the log references -------------------------------------------------------------------


@dataclass(slots=True)
class RefFile:
    size: int  # bytes (0 for a deletion-vector file: the log gives the vector's size, not the file's)
    removed: int | None  # the version whose commit removed it last; None while the latest holds it


def referenced_files(state: ReachState) -> dict[str, RefFile]:
    """Every file (data or deletion vector, as the log names it) of a version still in the log."""
    out: dict[str, RefFile] = {}

    def note(path: str, size: int, removed: int | None) -> None:
        known = out.get(path)
        if known is None:
            out[path] = RefFile(size, removed)
            return
        known.size = max(known.size, size)
        # held by the latest version in any identity: not a tombstone
        if known.removed is not None:
            known.removed = None if removed is None else max(known.removed, removed)

    for iv in state.closed:
        note(iv.path, iv.size or 0, iv.end)
        if iv.dv_file is not None:
            note(iv.dv_file, 0, iv.end)
    for iv in state.open_.values():
        note(iv.path, iv.size or 0, None)
        if iv.dv_file is not None:
            note(iv.dv_file, 0, None)
    return out


# --- the outcome of a look ---------------------------------------------------------------------


@dataclass(slots=True)
class Before:
    """What the last look kept: its version, its missing files' hashes (None: not kept, too
    many, or no look yet), their count and bytes, and the versions they made unreadable."""

    version: int | None
    hashes: np.ndarray | None
    missing: int = 0
    missing_bytes: int = 0
    unreadable: Ranges = field(default_factory=list)

    def knows(self, paths: list[str]) -> np.ndarray:
        """Per path, whether it was missing at the last look already."""
        if self.hashes is None or not len(self.hashes) or not paths:
            return np.zeros(len(paths), dtype=bool)
        return np.isin(np.fromiter((path_hash(p) for p in paths), np.uint64, len(paths)), self.hashes)


@dataclass(slots=True)
class Outcome:
    """A look: what is missing now, and what vanished since the last look."""

    referenced: int
    missing: dict[str, int]  # every referenced file missing now -> its bytes
    new_files: int  # vanished since the last look
    new_bytes: int
    new_paths: list[str]  # the first MAX_PATHS of them, as answers show paths
    became_unreadable: Ranges  # versions readable at the last look, unreadable now
    unreadable: Ranges  # every version unreadable for missing files now (when computed)
    complete: bool  # a listing of the whole table (else a sample's)
    exact: bool = True  # False: the last look kept no hashes, new counts are differences

    @property
    def missing_bytes(self) -> int:
        return sum(self.missing.values())

    def hashes(self) -> list[int]:
        return [path_hash(p) for p in self.missing]


def _compare(
    state: ReachState,
    storage: Storage,
    ref: dict[str, RefFile],
    missing: dict[str, int],
    before: Before,
    now: int,
    listed: set[str],
    complete: bool,
) -> Outcome:
    paths = sorted(missing)
    known = before.knows(paths)
    exact = before.hashes is not None or before.version is None
    if exact:
        new = [p for p, k in zip(paths, known, strict=True) if not k]
        new_files, new_bytes = len(new), sum(missing[p] for p in new)
    else:  # only counts were kept: what grew is what vanished
        new = []
        new_files = max(0, len(paths) - before.missing)
        new_bytes = max(0, sum(missing.values()) - before.missing_bytes)
    out = Outcome(len(ref), missing, new_files, new_bytes, [shown_path(p) for p in new[:MAX_PATHS]], [], [], complete)
    out.exact = exact
    if not missing:
        return out
    if new_files == 0:
        out.unreadable = before.unreadable
        return out
    state.listed = listed
    if before.version is None:  # the first look: what is missing is where the table starts from
        out.unreadable = to_ranges(
            v.version for v in answer(state, storage, now).versions if v.reason == "files_missing"
        )
        return out
    now_unreadable = {v.version for v in answer(state, storage, now).versions if v.reason == "files_missing"}
    held_before = _versions_holding(state, {p for p, k in zip(paths, known, strict=True) if k}) if exact else set()
    before_set = in_ranges(before.unreadable) if not exact else set()
    out.unreadable = to_ranges(now_unreadable)
    out.became_unreadable = to_ranges(now_unreadable - held_before - before_set)
    return out


def _versions_holding(state: ReachState, paths: set[str]) -> set[int]:
    """The versions whose snapshot holds one of `paths` (a data or deletion-vector file): a
    difference array over the versions, not a set grown interval by interval."""
    if not paths:
        return set()
    marks = np.zeros(state.latest + 2, dtype=np.int64)
    for iv in [*state.closed, *state.open_.values()]:
        if iv.path in paths or (iv.dv_file is not None and iv.dv_file in paths):
            marks[iv.start] += 1
            marks[min(iv.end, state.latest + 1)] -= 1
    return set(np.flatnonzero(np.cumsum(marks)[: state.latest + 1] > 0).tolist())


def listed_look(state: ReachState, storage: Storage, listed: set[str], before: Before, now: int) -> Outcome:
    """A look from one listing of the table's files (`reachability.existing_files`)."""
    ref = referenced_files(state)
    missing = {p: ref[p].size for p in set(ref) - listed if not present_in(storage, p, listed)}
    return _compare(state, storage, ref, missing, before, now, listed, True)


def sampled_look(state: ReachState, storage: Storage, absent: set[str], before: Before, now: int) -> Outcome:
    """A look from a sample: the files missing at the last look (by their hashes) and the
    sampled ones found `absent`; every other referenced file is taken to be there."""
    ref = referenced_files(state)
    paths = list(ref)
    was = before.knows(paths)
    missing = {p: ref[p].size for p, k in zip(paths, was, strict=True) if k or p in absent}
    listed = set(ref) - set(missing)
    return _compare(state, storage, ref, missing, before, now, listed, False)


# --- a sample ----------------------------------------------------------------------------------


def sample_paths(ref: dict[str, RefFile], before: Before, oldest: int, spread: int, rng: random.Random) -> list[str]:
    """What a sampled check asks about: the `oldest` files removed longest ago that were still
    there at the last look (a VACUUM deletes tombstones by age: these go first), and `spread`
    other referenced files at random (one deleted some other way)."""
    removed = sorted((r.removed, p) for p, r in ref.items() if r.removed is not None)
    picked: list[str] = []
    step = max(oldest, 64)
    for i in range(0, len(removed), step):  # skip the ones known missing, a chunk at a time
        chunk = [p for _v, p in removed[i : i + step]]
        picked += [p for p, k in zip(chunk, before.knows(chunk), strict=True) if not k][: oldest - len(picked)]
        if len(picked) >= oldest:
            break
    chosen = set(picked)
    rest = [p for p in ref if p not in chosen]
    if spread and rest:
        others = rng.sample(rest, min(len(rest), spread * 4))
        picked += [p for p, k in zip(others, before.knows(others), strict=True) if not k][:spread]
    return picked


def absent_among(storage: Storage, paths: list[str], exists: Callable[[str], bool] | None = None) -> set[str]:
    """Which of `paths` are not there: one existence check (a HEAD on an object store) each,
    a few at a time. A path outside the allowed roots, or longer than any store holds, is not
    asked about (nor counted gone); any other error is raised: a look that cannot see must not
    report files as gone."""
    ask = exists or storage.exists

    def one(path: str) -> str | None:
        try:
            key = storage.resolve(path)
        except (PathOutsideRootsError, PathTooLongError):
            return None
        return None if ask(key) else path

    with ThreadPoolExecutor(min(HEAD_THREADS, max(1, len(paths)))) as pool:
        return {p for p in pool.map(one, paths) if p is not None}
