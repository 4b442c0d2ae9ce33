"""Log file names, listing, and the log segment of a version.

Contract of a segment: the newest complete checkpoint at or before the version (all parts of
a multi-part checkpoint present) plus every commit after it up to the version, with no gap.
`_last_checkpoint` is only a hint: missing, corrupt or pointing at a missing file, the
listing decides. Each version is taken from its file's name, never by counting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import orjson

from .errors import LogGapError, NotADeltaTableError, VersionNotFoundError
from .storage import FileInfo, LocalStorage

LOG_DIR = "_delta_log"

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC_CP = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI_CP = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2_CP = re.compile(r"^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$")
_COMPACTION = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")
_CRC = re.compile(r"^(\d{20})\.crc$")


@dataclass(frozen=True, slots=True)
class LogFile:
    """One file of `_delta_log/`, classified by its name."""

    kind: str  # commit | checkpoint | compaction | crc
    version: int
    path: str
    size: int
    modification_time: int
    part: int = 1
    num_parts: int = 1
    end_version: int | None = None  # compaction files
    v2: bool = False
    fmt: str = "parquet"

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def commit_name(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


def classify(info: FileInfo) -> LogFile | None:
    """The LogFile a listed file is, or None for anything else (temp files, dot files)."""
    name = info.path.rsplit("/", 1)[-1]
    size, mtime = info.size, info.modification_time
    if m := _COMMIT.match(name):
        return LogFile("commit", int(m[1]), info.path, size, mtime, fmt="json")
    if m := _CLASSIC_CP.match(name):
        return LogFile("checkpoint", int(m[1]), info.path, size, mtime)
    if m := _MULTI_CP.match(name):
        return LogFile("checkpoint", int(m[1]), info.path, size, mtime, part=int(m[2]), num_parts=int(m[3]))
    if m := _V2_CP.match(name):
        return LogFile("checkpoint", int(m[1]), info.path, size, mtime, v2=True, fmt=m[3])
    if m := _COMPACTION.match(name):
        return LogFile("compaction", int(m[1]), info.path, size, mtime, end_version=int(m[2]), fmt="json")
    if m := _CRC.match(name):
        return LogFile("crc", int(m[1]), info.path, size, mtime, fmt="json")
    return None


@dataclass(slots=True)
class LogListing:
    """Everything `_delta_log/` holds, classified and sorted by version."""

    commits: list[LogFile] = field(default_factory=list)
    checkpoints: dict[int, list[LogFile]] = field(default_factory=dict)
    compactions: list[LogFile] = field(default_factory=list)

    @property
    def latest_commit(self) -> int | None:
        return self.commits[-1].version if self.commits else None


def list_log(storage: LocalStorage) -> LogListing:
    """List and classify the log; raises NotADeltaTableError without a `_delta_log/`."""
    if not storage.is_dir(LOG_DIR):
        raise NotADeltaTableError(f"{storage.root}: not a Delta table (no {LOG_DIR}/ directory)")
    listing = LogListing()
    for info in storage.list_dir(LOG_DIR):
        lf = classify(info)
        if lf is None:
            continue
        if lf.kind == "commit":
            listing.commits.append(lf)
        elif lf.kind == "checkpoint":
            listing.checkpoints.setdefault(lf.version, []).append(lf)
        elif lf.kind == "compaction":
            listing.compactions.append(lf)
    listing.commits.sort(key=lambda f: f.version)
    if not listing.commits and not listing.checkpoints:
        raise NotADeltaTableError(f"{storage.root}: not a Delta table ({LOG_DIR}/ holds no commits)")
    return listing


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


def read_last_checkpoint(storage: LocalStorage) -> dict | None:
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


def build_segment(
    storage: LocalStorage, listing: LogListing, version: int | None = None, use_hint: bool = True
) -> LogSegment:
    """The log segment for `version` (latest when None)."""
    latest = latest_version(listing)
    if latest is None:
        raise NotADeltaTableError(f"{storage.root}: {LOG_DIR}/ holds no complete checkpoint or commit")
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise VersionNotFoundError(
            f"{storage.root}: version {target} not found; {_describe_available(listing)}",
            version=target,
        )
    hint = read_last_checkpoint(storage) if use_hint and version is None else None
    cp_files: list[LogFile] | None = None
    if hint is not None and hint["version"] <= target and hint["version"] in listing.checkpoints:
        cp_files = complete_checkpoint(listing.checkpoints[hint["version"]])
    candidates = sorted((v for v in listing.checkpoints if v <= target), reverse=True)
    if cp_files is None or (candidates and candidates[0] > cp_files[0].version):
        # the hint is missing, stale or points at something incomplete: the listing decides
        cp_files = None
        for v in candidates:
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
                f"{storage.root}: version {target} cannot be rebuilt (no checkpoint at or before it and "
                f"commits {_ranges(missing)} are gone); {_describe_available(listing)}",
                version=target,
            )
        raise LogGapError(
            f"{storage.root}: the log has a gap; missing commit versions {_ranges(missing)}"
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
