"""Log file names, listing, and the log segment of a version.

Contract of a segment: the newest complete checkpoint at or before the version (all parts of
a multi-part checkpoint present) plus every commit after it up to the version, with no gap.
`_last_checkpoint` is only a hint: missing, corrupt or pointing at a missing file, the
listing decides. Each version is taken from its file's name, never by counting.

Managed (commit-owner) tables: `_delta_log/_commits/<v>.<uuid>.json` (managedCommit,
coordinatedCommits) and `_delta_log/_staged_commits/<v>.<uuid>.json` (catalogManaged) hold
proposed commits. A file there proves nothing: only the owner knows which one, if any, is
version v. They are listed only on request (`include_staged`), as kind "staged", and enter a
segment only through `merge_ratified`, with what the owner reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from tables.delta.errors import (
    CommitOwnerError,
    CorruptLogError,
    DeltaError,
    LogGapError,
    NotADeltaTableError,
    VersionNotFoundError,
)
from tables.delta.gc_pause import gc_paused
from tables.delta.log.tip import MAX_RUN, TAIL_READ, IncompleteCommit, judge
from tables.delta.storage.api import Capability, FileInfo, Storage

LOG_DIR = "_delta_log"
COMMITS_DIR = f"{LOG_DIR}/_commits"  # managedCommit / coordinatedCommits-preview
STAGED_COMMITS_DIR = f"{LOG_DIR}/_staged_commits"  # catalogManaged
STAGED_DIRS = (COMMITS_DIR, STAGED_COMMITS_DIR)

_CLASSIC_CP = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI_CP = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2_CP = re.compile(r"^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$")
_COMPACTION = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")
_CRC = re.compile(r"^(\d{20})\.crc$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_STAGED = re.compile(rf"^(\d{{20}})\.({_UUID})\.json$")


class LogFile:
    """One file of `_delta_log/`, classified by its name.

    Size and modification time come from a stat made only when first asked for: a log of
    100,000 commits is listed by name, and only the files whose times matter are stat'ed.
    """

    __slots__ = (
        "_mtime", "_size", "_storage", "backfilled", "end_version", "fmt", "kind", "num_parts", "part", "path",
        "v2", "version",
    )  # fmt: skip

    def __init__(
        self,
        kind: str,  # commit | checkpoint | compaction | crc | staged (proposed, not ratified by itself)
        version: int,
        path: str,
        size: int | None = None,
        modification_time: int | None = None,
        part: int = 1,
        num_parts: int = 1,
        end_version: int | None = None,  # compaction files
        v2: bool = False,
        fmt: str = "parquet",
        backfilled: bool = True,  # False: a commit the owner ratified that is not in _delta_log/ yet
        storage: Storage | None = None,
    ) -> None:
        self.kind, self.version, self.path = kind, version, path
        self._size, self._mtime, self._storage = size, modification_time, storage
        self.part, self.num_parts, self.end_version = part, num_parts, end_version
        self.v2, self.fmt, self.backfilled = v2, fmt, backfilled

    def _stat(self) -> None:
        if self._storage is None:
            raise CorruptLogError(f"{self.path}: size and time unknown", file=self.path)
        try:
            info = self._storage.stat(self.path)
        except FileNotFoundError as exc:
            raise CorruptLogError(
                f"{self._storage.display(self.path)}: the file disappeared (log cleanup while reading?)", file=self.path
            ) from exc
        self._size, self._mtime = info.size, info.modification_time

    @property
    def stat_known(self) -> bool:
        return self._mtime is not None

    @property
    def storage(self) -> Storage | None:
        return self._storage

    def known(self, size: int, modification_time: int) -> None:
        """Size and time learnt elsewhere (a read that fstat'ed the file): no stat later."""
        self._size, self._mtime = size, modification_time

    @property
    def size(self) -> int:
        if self._size is None:
            self._stat()
        return self._size  # type: ignore[return-value]

    @property
    def modification_time(self) -> int:
        if self._mtime is None:
            self._stat()
        return self._mtime  # type: ignore[return-value]

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def _key(self) -> tuple:
        return (
            self.kind,
            self.version,
            self.path,
            self.part,
            self.num_parts,
            self.end_version,
            self.v2,
            self.backfilled,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogFile) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"LogFile({self.kind!r}, {self.version}, {self.path!r})"


def _json_commit(version: int, path: str, storage: Storage | None) -> LogFile:
    """LogFile("commit", version, path, fmt="json", storage=storage), made without the call
    of __init__ and its keywords: a listing makes one per commit (100,000: 0.1 s less)."""
    f = _new(LogFile)
    f.kind, f.version, f.path, f._size, f._mtime, f._storage = "commit", version, path, None, None, storage
    f.part, f.num_parts, f.end_version, f.v2, f.fmt, f.backfilled = 1, 1, None, False, "json", True
    return f


_new = object.__new__


def learn_times(files: list[LogFile], found: dict[str, tuple[int, int]], prefix: str) -> None:
    """Give `files` (under `prefix`, their times not known yet) the (size, time) a stat of
    their directory `found` by name; one it did not find (a symbolic link, a file removed
    since) is stat'ed, checked, when its time is asked for."""
    n = len(prefix)
    for f in files:
        info = found.get(f.path[n:])
        if info is not None:
            f._size, f._mtime = info


def modification_times(files: list[LogFile]) -> list[int]:
    """The files' modification times, in order (stat'ing those not known yet)."""
    return [f._mtime if f._mtime is not None else f.modification_time for f in files]


def commit_name(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


def staged_commit_name(version: int, uuid: str, directory: str = COMMITS_DIR) -> str:
    """`_delta_log/_commits/<v>.<uuid>.json` (or the `_staged_commits` directory)."""
    return f"{directory}/{version:020d}.{uuid}.json"


def ratified_commit_path(path: str, version: int) -> bool:
    """Whether an owner may name `path` as the file of `version`: a staged file of that version
    in one of the two staging directories, or the backfilled `_delta_log/<v>.json`. Owners are
    remote and untrusted: nothing else (no `..`, no absolute path) is ever opened."""
    directory, _, name = path.rpartition("/")
    if directory == LOG_DIR:
        return name == f"{version:020d}.json"
    m = _STAGED.match(name)
    return directory in STAGED_DIRS and m is not None and int(m[1]) == version


def backfilled_path(path: str) -> str | None:
    """`_delta_log/<v>.json` for a staged commit's path (where it lands once backfilled)."""
    directory, _, name = path.rpartition("/")
    m = _STAGED.match(name)
    return commit_name(int(m[1])) if directory in STAGED_DIRS and m else None


def classify(info: FileInfo) -> LogFile | None:
    """The LogFile a listed (and stat'ed) file is, or None for anything else."""
    lf = classify_name(info.path)
    if lf is not None:
        lf._size, lf._mtime = info.size, info.modification_time
    return lf


def classify_name(path: str, storage: Storage | None = None) -> LogFile | None:
    """The LogFile a file of the log is by its name alone (temp files, dot files: None)."""
    directory, _, name = path.rpartition("/")
    if directory in STAGED_DIRS:
        if m := _STAGED.match(name):
            return LogFile("staged", int(m[1]), path, fmt="json", backfilled=False, storage=storage)
        return None
    if len(name) == 25 and name.endswith(".json") and name[:20].isdigit():  # the common case, no regex
        return _json_commit(int(name[:20]), path, storage)
    if m := _CLASSIC_CP.match(name):
        return LogFile("checkpoint", int(m[1]), path, storage=storage)
    if m := _MULTI_CP.match(name):
        return LogFile("checkpoint", int(m[1]), path, part=int(m[2]), num_parts=int(m[3]), storage=storage)
    if m := _V2_CP.match(name):
        return LogFile("checkpoint", int(m[1]), path, v2=True, fmt=m[3], storage=storage)
    if m := _COMPACTION.match(name):
        return LogFile("compaction", int(m[1]), path, end_version=int(m[2]), fmt="json", storage=storage)
    if m := _CRC.match(name):
        return LogFile("crc", int(m[1]), path, fmt="json", storage=storage)
    return None


@dataclass(slots=True)
class LogListing:
    """Everything `_delta_log/` holds, classified and sorted by version.

    `commits` are the backfilled commits, plus, after `merge_ratified`, the un-backfilled ones
    the owner ratified (`backfilled=False`). `staged` are the files of the staging directories
    (listed only on request): proposals, whatever the owner made of them.
    """

    commits: list[LogFile] = field(default_factory=list)
    checkpoints: dict[int, list[LogFile]] = field(default_factory=dict)
    compactions: list[LogFile] = field(default_factory=list)
    staged: list[LogFile] = field(default_factory=list)
    owner_merged: bool = False  # the owner's ratified commits are in `commits` already
    owner_view: Any = None  # owner.OwnerView of the merge, when there was one
    # `_last_checkpoint` as tail_listing read it (None: absent or unreadable), kept so that the
    # snapshot checks its checkpoint against the hint without reading it again
    hint: dict | None = None
    hint_read: bool = False
    # the version checksum files (`<v>.crc`) by version: snapshot/checksum.py checks them
    checksums: dict[int, LogFile] = field(default_factory=dict)
    # the newest commits a writer has not finished, left out of `commits` (log/tip.py)
    incomplete: Any = None
    tip_checked: bool = False

    def add(self, lf: LogFile) -> None:
        """File a classified log file (staged ones are listed apart, see list_staged)."""
        if lf.kind == "commit":
            self.commits.append(lf)
        elif lf.kind == "checkpoint":
            self.checkpoints.setdefault(lf.version, []).append(lf)
        elif lf.kind == "compaction":
            self.compactions.append(lf)
        elif lf.kind == "crc":
            self.checksums[lf.version] = lf

    @property
    def latest_commit(self) -> int | None:
        return self.commits[-1].version if self.commits else None

    @property
    def latest_backfilled(self) -> int | None:
        return next((c.version for c in reversed(self.commits) if c.backfilled), None)


def list_log(storage: Storage, include_staged: bool = False) -> LogListing:
    """List and classify the log; raises NotADeltaTableError without a `_delta_log/`.

    `include_staged` lists `_delta_log/_commits/` and `_delta_log/_staged_commits/` too (two
    more listings): only callers that look at proposed commits ask for it.
    """
    if not storage.is_dir(LOG_DIR):
        raise NotADeltaTableError(f"{storage.display()}: not a Delta table (no {LOG_DIR}/ directory)")
    listing = LogListing()
    commits, prefix = listing.commits, LOG_DIR + "/"
    with gc_paused():  # one object per commit, no cycle among them
        for name in storage.list_names(LOG_DIR):
            if len(name) == 25 and name[20:] == ".json" and name[:20].isdigit():  # most entries: inline
                commits.append(_json_commit(int(name[:20]), prefix + name, storage))
                continue
            lf = classify_name(f"{LOG_DIR}/{name}", storage)
            if lf is not None:
                listing.add(lf)
        listing.commits.sort(key=lambda f: f.version)
    if include_staged:
        listing.staged = list_staged(storage)
    if not listing.commits and not listing.checkpoints:
        raise NotADeltaTableError(f"{storage.display()}: not a Delta table ({LOG_DIR}/ holds no commits)")
    return _without_unfinished_tip(storage, listing)


def _without_unfinished_tip(storage: Storage, listing: LogListing) -> LogListing:
    trim_incomplete_tip(storage, listing)  # a commit its writer has not finished: read next time
    return listing


def list_log_tail(storage: Storage, version: int | None) -> list[FileInfo] | None:
    """What `_delta_log/` holds from `version` on (everything with None), listed with the
    storage's `start_after`: an object store lists only the tail. A local directory is first
    probed by name from `version` on (`probe_log_tail`), and read whole only when the probes
    cannot vouch for the tail. None when there is no log directory."""
    try:
        if version is None:
            return list(storage.list_from(LOG_DIR))
        try:
            probed = probe_log_tail(storage, version)
        except (OSError, DeltaError):
            probed = None  # the directory could not be probed: its listing says why
        if probed is not None:
            return probed
        return list(storage.list_from(LOG_DIR, start_after=f"{LOG_DIR}/{version:020d}"))
    except FileNotFoundError:
        return None


PROBE_ROUND = 128  # versions probed by name per round (a stat each of .json, .crc, .checkpoint.parquet)
PROBE_AHEAD = 32  # names after the first missing commit that must be missing too (a gap lists)
_PROBED = ("json", "crc", "checkpoint.parquet")


def probe_log_tail(storage: Storage, version: int) -> list[FileInfo] | None:
    """The tail of a local log from `version` on, found by stat'ing the names that follow it
    (`<v>.json`, `<v>.crc`, `<v>.checkpoint.parquet`, then `_last_checkpoint`) instead of
    reading a directory of a million names (0.4 s): the same FileInfos as `list_from` gives
    for them. None when only a listing can tell: an object store (it lists from a key), no
    commit `version`, a commit found after a missing one (a gap), a checkpoint without its
    commit (a checkpoint-only tail), or a `_last_checkpoint` naming a checkpoint the probes
    did not find (multi-part and v2 checkpoints have names no probe can guess).

    Files the probes never name (compaction files, a multi-part or v2 checkpoint older than
    the hint's) are not in the answer; the sync reads none of them, and its full syncs and the
    chain's daily look list the whole directory."""
    if storage.remote or Capability.FILE_TIMES not in storage.capabilities or version < 0:
        return None
    file_times = storage.file_times
    found: dict[str, tuple[int, int]] = {}
    start, end = version, version + PROBE_ROUND
    missing: int | None = None  # the first version without a commit file
    while True:
        found.update(file_times(LOG_DIR, [f"{v:020d}.{ext}" for v in range(start, end) for ext in _PROBED]))
        for v in range(start, end):
            if missing is None and f"{v:020d}.json" not in found:
                missing = v
            if missing is not None and any(f"{v:020d}.{ext}" in found for ext in _PROBED):
                return None  # a gap, or a checkpoint or checksum without its commit: listed
        if missing == version:
            return None  # the commit itself is gone: the listing says what is there
        if missing is not None and end - missing > PROBE_AHEAD:
            break
        start, end = end, end + 2 * (end - start)  # a long tail in fewer, longer rounds
    hint_info = file_times(LOG_DIR, ["_last_checkpoint"]).get("_last_checkpoint")
    if hint_info is not None:
        hint = read_last_checkpoint(storage)
        if hint is None:
            return None  # unreadable, or replaced since its stat: the listing decides
        at = hint["version"]
        if at >= missing or (at >= version and f"{at:020d}.checkpoint.parquet" not in found):
            return None  # a checkpoint after the commits, or one whose name no probe guesses
        found["_last_checkpoint"] = hint_info
    return [FileInfo(f"{LOG_DIR}/{name}", size, mtime) for name, (size, mtime) in sorted(found.items())]


def list_log_from(storage: Storage, version: int, infos: list[FileInfo] | None = None) -> LogListing:
    """The log's files from `version` on (its commit, checkpoint and checksum, and everything
    later; `list_log_tail`'s answer, or the part of `infos`, a tail listed from at most
    `version`, that is). Staged commits are not listed."""
    listing = LogListing()
    if infos is None:
        infos = list_log_tail(storage, version)
    if infos is None:
        # no log directory (deleted since): an empty tail, as an object store lists it; the
        # callers' full paths then say "not a Delta table"
        return listing
    for info in infos:
        lf = classify(info)
        if lf is not None and lf.version >= version:
            listing.add(lf)
    listing.commits.sort(key=lambda f: f.version)
    return listing


def list_staged(storage: Storage) -> list[LogFile]:
    """Proposed commit files of both staging directories, by version then name."""
    out: list[LogFile] = []
    for directory in STAGED_DIRS:
        try:
            infos = storage.list_dir(directory)
        except FileNotFoundError:
            continue
        out.extend(lf for info in infos if (lf := classify(info)) is not None)
    out.sort(key=lambda f: (f.version, f.path))
    return out


def merge_ratified(
    storage: Storage,
    listing: LogListing,
    ratified: list[LogFile],
    latest_ratified: int,
    *,
    owner_is_authoritative: bool = False,
    owner: str = "the commit-owner",
) -> tuple[LogListing, bool]:
    """The listing with the owner's ratified commits merged in; (listing, relisted).

    `listing` was taken before the owner was asked (list, then ask). Versions after the
    listed latest up to the owner's `latest_ratified` come from `ratified`; any the owner no
    longer reports were backfilled between the listing and the question, so `_delta_log/` is
    listed once more for them (`relisted`). A version in neither place is a gap.

    When the owner's latest is below the listed latest: a managedCommit owner is trusted
    less than the log (a backfilled `<v>.json` proves v is committed), so the log's latest
    stands; a catalog (`owner_is_authoritative`, catalogManaged) is the final word: published
    files above its latest are ignored, and for a version it reports that is published too,
    its file is the one read. `latest_ratified` -1 means the owner never ratified anything.
    """
    base = listing.latest_backfilled
    base = -1 if base is None else base
    backfilled = [c for c in listing.commits if c.backfilled]
    if latest_ratified < 0 or (latest_ratified <= base and not owner_is_authoritative):
        return _with_commits(listing, backfilled, None), False
    target = latest_ratified if owner_is_authoritative else max(base, latest_ratified)
    by_version = {lf.version: lf for lf in ratified if lf.version <= target}
    keep = [c for c in backfilled if c.version <= target and not (owner_is_authoritative and c.version in by_version)]
    extra = [lf for v, lf in by_version.items() if v > base or owner_is_authoritative]
    missing = [v for v in range(base + 1, target + 1) if v not in by_version]
    if owner_is_authoritative and keep:
        # a catalog caps the log below published files: a gap under its latest is one too
        have = {c.version for c in keep} | set(by_version)
        missing = [v for v in range(keep[0].version, target + 1) if v not in have]
    relisted = False
    if missing:
        relisted = True
        fresh = {c.version: c for c in list_log_from(storage, missing[0]).commits}  # the tail only
        found = [fresh[v] for v in missing if v in fresh]
        still = [v for v in missing if v not in fresh]
        if still:
            raise LogGapError(
                f"{storage.display()}: commit versions {_ranges(still)} are neither in {LOG_DIR}/ nor among the "
                f"commits {owner} reported (its latest ratified version is {latest_ratified})",
                missing=still,
            )
        extra += found
    commits = sorted(keep + extra, key=lambda c: c.version)
    return _with_commits(listing, commits, target if owner_is_authoritative else None), relisted


def _with_commits(listing: LogListing, commits: list[LogFile], cap: int | None) -> LogListing:
    checkpoints = listing.checkpoints
    compactions = listing.compactions
    if cap is not None:
        checkpoints = {v: f for v, f in checkpoints.items() if v <= cap}
        compactions = [c for c in compactions if c.end_version is not None and c.end_version <= cap]
    return LogListing(commits, checkpoints, compactions, listing.staged, owner_merged=True, checksums=listing.checksums)


def ratified_log_file(version: int, path: str, size: int, modification_time: int, latest: int, owner: str) -> LogFile:
    """The LogFile of a commit an owner reported, after checking what it said."""
    if not isinstance(version, int) or isinstance(version, bool) or version < 0 or version > latest:
        raise CommitOwnerError(
            f"{owner} reported commit version {version!r} outside 0..{latest} (its latest ratified version)"
        )
    if not isinstance(path, str) or not ratified_commit_path(path, version):
        raise CommitOwnerError(
            f"{owner} reported {str(path)[:200]!r} as the file of version {version}; expected "
            f"{COMMITS_DIR}/ or {STAGED_COMMITS_DIR}/{version:020d}.<uuid>.json"
        )
    return LogFile(
        "commit",
        version,
        path,
        int(size or 0),
        int(modification_time or 0),
        fmt="json",
        backfilled=path == commit_name(version),
    )


def complete_checkpoint(files: list[LogFile]) -> list[LogFile] | None:
    """The files of one complete checkpoint among those listed for a version, or None.

    A v2 (UUID-named) checkpoint is complete by itself; a multi-part one needs parts 1..K of
    the same K; a classic one is a single file.
    """
    v2 = sorted((f for f in files if f.v2), key=lambda f: f.path)
    if v2:
        return [v2[0]]
    classic = [f for f in files if f.num_parts == 1 and not f.v2]
    if classic:
        return classic[:1]
    by_parts: dict[int, dict[int, LogFile]] = {}
    for f in files:
        by_parts.setdefault(f.num_parts, {})[f.part] = f
    for k, parts in sorted(by_parts.items()):
        if len(parts) == k and all(p in parts for p in range(1, k + 1)):
            return [parts[p] for p in range(1, k + 1)]
    return None


def read_last_checkpoint(storage: Storage) -> dict | None:
    """The `_last_checkpoint` hint, or None when missing or unreadable (never fatal)."""
    try:
        hint = orjson.loads(storage.read(f"{LOG_DIR}/_last_checkpoint"))
    except (FileNotFoundError, orjson.JSONDecodeError, OSError):
        return None
    except Exception:
        return None
    if not isinstance(hint, dict) or not isinstance(hint.get("version"), int):
        return None
    return hint


def tail_listing(storage: Storage) -> LogListing:
    """The log from its latest checkpoint on (`_last_checkpoint` names it): one listing of the
    tail (an object store lists only those keys, a local directory stats only them), so the
    cost of the latest state does not grow with the log's length. The whole log when there is
    no usable hint (none, or its checkpoint is missing or incomplete)."""
    hint = read_last_checkpoint(storage)
    listing = None
    if hint is not None and hint["version"] > 0:
        tail = list_log_from(storage, hint["version"])
        if complete_checkpoint(tail.checkpoints.get(hint["version"], [])):
            listing = tail
    listing = listing or list_log(storage)
    listing.hint, listing.hint_read = hint, True
    return _without_unfinished_tip(storage, listing)


@dataclass(slots=True)
class LogSegment:
    """What a snapshot at `version` is built from."""

    version: int
    checkpoint: list[LogFile] | None
    commits: list[LogFile]
    compactions: list[LogFile] = field(default_factory=list)

    @property
    def checkpoint_version(self) -> int | None:
        return self.checkpoint[0].version if self.checkpoint else None


def available_versions(listing: LogListing) -> tuple[int, int] | None:
    """The (earliest, latest) versions whose state can be rebuilt, or None."""
    latest = latest_version(listing)
    if latest is None:
        return None
    commit_versions = {c.version for c in listing.commits}
    starts = [v for v, files in listing.checkpoints.items() if complete_checkpoint(files)]
    if 0 in commit_versions:
        starts.append(0)
    # the earliest start from which commits run contiguously up to the latest
    for start in sorted(set(starts)):
        if all(v in commit_versions for v in range(start + 1, latest + 1)):
            return start, latest
    return None


def latest_version(listing: LogListing) -> int | None:
    candidates = [listing.latest_commit] if listing.commits else []
    candidates += [v for v, files in listing.checkpoints.items() if complete_checkpoint(files)]
    return max(candidates) if candidates else None


def build_segment(storage: Storage, listing: LogListing, version: int | None = None) -> LogSegment:
    """The log segment for `version` (latest when None): the newest complete checkpoint at or
    before it in `listing` (which `_last_checkpoint` could only confirm), and the commits after."""
    latest = latest_version(listing)
    if latest is None:
        raise NotADeltaTableError(f"{storage.display()}: {LOG_DIR}/ holds no complete checkpoint or commit")
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise VersionNotFoundError(
            f"{storage.display()}: version {target} not found; {_describe_available(listing)}",
            version=target,
        )
    cp_files: list[LogFile] | None = None
    for v in sorted((v for v in listing.checkpoints if v <= target), reverse=True):
        cp_files = complete_checkpoint(listing.checkpoints[v])
        if cp_files:
            break
    start = cp_files[0].version + 1 if cp_files else 0
    commits = [c for c in listing.commits if start <= c.version <= target]
    present = {c.version for c in commits}
    missing = [v for v in range(start, target + 1) if v not in present]
    if missing:
        if cp_files is None and missing == list(range(0, missing[-1] + 1)):
            # no checkpoint and the oldest commits were cleaned up: nothing to start from
            raise VersionNotFoundError(
                f"{storage.display()}: version {target} cannot be rebuilt (no checkpoint at or before it and "
                f"commits {_ranges(missing)} are gone); {_describe_available(listing)}",
                version=target,
            )
        raise LogGapError(
            f"{storage.display()}: the log has a gap; missing commit versions {_ranges(missing)}"
            f" between {start} and {target}",
            missing=missing,
        )
    compactions = [
        c for c in listing.compactions if c.version >= start and c.end_version is not None and c.end_version <= target
    ]
    return LogSegment(target, cp_files, commits, compactions)


def _describe_available(listing: LogListing) -> str:
    rng = available_versions(listing)
    if rng is None:
        return "no version of this table can be rebuilt"
    return f"available versions are {rng[0]} to {rng[1]}"


def _ranges(values: list[int]) -> str:
    """[1,2,3,7] -> '1-3, 7' so a long gap stays one readable line."""
    out: list[str] = []
    start = prev = values[0]
    for v in [*values[1:], None]:  # type: ignore[list-item]
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    shown = ", ".join(out[:20])
    return shown + (f" and {len(out) - 20} more ranges" if len(out) > 20 else "")


# --- the tip a writer has not finished (judged by tables.delta.log.tip) ------------------------


def _read(storage: Storage, lf: LogFile) -> tuple[bytes, int] | None:
    """The tip's bytes (the end of a big one, judged there first) and its size; None when it
    is gone (the caller's own read then says so)."""
    paths = [lf.path] + ([alt] if (alt := backfilled_path(lf.path)) else [])
    for path in paths:
        try:
            data = storage.read(path)
        except FileNotFoundError:
            continue
        return data, len(data)
    return None


def _judge_file(storage: Storage, lf: LogFile) -> tuple[str, int] | None:
    got = _read(storage, lf)
    if got is None:
        return None
    data, size = got
    reason = judge(data)
    return (reason, size) if reason is not None else None


def _first_checked(storage: Storage, lf: LogFile) -> bool:
    """Whether the tip's last line is whole, judged from its end only when the file is big
    (the usual answer costs a range read, not the whole commit)."""
    try:
        size = lf.size
    except (DeltaError, OSError):
        return False
    if size <= TAIL_READ:
        return False
    try:
        end = storage.read(lf.path, range=(size - TAIL_READ, size))
    except (FileNotFoundError, OSError, DeltaError):
        return False
    if b"\n" not in end.rstrip(b" \t\r\n"):
        return False  # a last line longer than the read: judged whole
    return judge(end, whole=False) is None


def trim_incomplete_tip(storage: Storage, listing: LogListing) -> IncompleteCommit | None:
    """Leave the newest commits that a writer has not finished out of `listing` (in place)
    and say which; None when the tip is whole. Judged once per listing (`tip_checked`).

    A commit is left out only at the tip, only above every complete checkpoint, and never the
    last one the listing holds: a log of one cut-off commit keeps its error."""
    if listing.tip_checked:
        return listing.incomplete
    listing.tip_checked = True
    cut: list[tuple[LogFile, str, int]] = []
    checkpointed = max((v for v, files in listing.checkpoints.items() if complete_checkpoint(files)), default=-1)
    commits = listing.commits
    for lf in reversed(commits[-MAX_RUN:]):
        if lf.version <= checkpointed or (len(cut) + 1 >= len(commits) and checkpointed < 0):
            break
        if not cut and _first_checked(storage, lf):
            break
        judged = _judge_file(storage, lf)
        if judged is None:
            break
        cut.append((lf, *judged))  # newest first: an older commit is judged only after a newer one
    if not cut:
        return None
    oldest, reason, size = cut[-1]
    del commits[len(commits) - len(cut) :]
    listing.incomplete = IncompleteCommit(
        version=oldest.version,
        path=oldest.path,
        reason=reason,
        size=size,
        later=tuple(lf.version for lf, _r, _s in reversed(cut[:-1])),
    )
    return listing.incomplete
