"""Reading a registered table's versions from its log: snapshots (cached per version), a
version's summary and files, TIMESTAMP AS OF, and the diff of two versions.

The UI and the API both call these; a managed table is read through deltaweb's own
commit-owner (tables.services.owner.access), so its ratified, un-backfilled commits are seen too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from threading import Lock
from typing import Any

from tables.delta import errors as delta_errors
from tables.delta.history.timestamps import commit_times, parse_timestamp, resolve_timestamp
from tables.delta.snapshot.checksum import summary_if_unchanged
from tables.delta.snapshot.diff import snapshot_diff
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.opening import as_storage
from tables.models import Commit, Pin, Table, VersionChecksum
from tables.services.errors import ServiceError
from tables.services.history.stored_times import resolve_stored
from tables.services.owner.access import owner_of
from tables.services.versions.reachability import version_reachability
from tables.services.versions.source import Source, source_of

_SNAPSHOTS: OrderedDict[tuple[str, int], Snapshot] = OrderedDict()
_SNAPSHOT_LOCK = Lock()
_SNAPSHOT_CACHE_SIZE = 8


def snapshot_at(table: Table, version: int | None = None) -> Snapshot:
    """A snapshot of a version, cached (a version's state never changes), read where the one
    rule says (tables.services.versions.source): from the table while it gives the version,
    else from the pin that keeps it (its kept table's latest, numbered as the table's
    version; its `location` is the kept table's, where its files' adds and footers are)."""
    return snapshot_and_source(table, version)[0]


def snapshot_and_source(table: Table, version: int | None = None) -> tuple[Snapshot, Source | None]:
    """(the snapshot, where it was read from); the source is None for the latest version."""
    if version is None:
        return load_snapshot(table.location, owner=owner_of(table)), None
    source = source_of(table, version)
    if source.from_pin:
        return _cached((source.location, version), lambda: _pinned(source, version)), source
    try:
        snap = _cached((table.location, version), lambda: load_snapshot(table.location, version, owner=owner_of(table)))
    except (delta_errors.VersionNotFoundError, delta_errors.StateReconstructionError, delta_errors.LogGapError):
        # the log lost the version since the reachability answer was made: a pin may keep it
        from tables.services.pins.queries import holding_pin

        pin = holding_pin(table, version)
        if pin is None:
            raise
        source = Source(pin.store_location, None, pin)
        return _cached((source.location, version), lambda: _pinned(source, version)), source
    return snap, source


def _pinned(source: Source, version: int) -> Snapshot:
    """The version as its pin keeps it: the kept table's latest (0, or 1 once held objects
    were copied), numbered as the table's version."""
    import dataclasses

    return dataclasses.replace(load_snapshot(source.location, source.version), version=version)


def _cached(key: tuple[str, int], load: Callable[[], Snapshot]) -> Snapshot:
    with _SNAPSHOT_LOCK:
        snap = _SNAPSHOTS.get(key)
        if snap is not None:
            _SNAPSHOTS.move_to_end(key)
            return snap
    snap = load()
    with _SNAPSHOT_LOCK:
        _SNAPSHOTS[key] = snap
        while len(_SNAPSHOTS) > _SNAPSHOT_CACHE_SIZE:
            _SNAPSHOTS.popitem(last=False)
    return snap


def read_from(source: Source | None) -> Pin | None:
    """The pin a version was read from, or None (the table)."""
    return None if source is None else source.pin


@dataclass(frozen=True)
class VersionSummary:
    """A version's summary: the core's (`state`, as `Snapshot.summary(files=False)` or the
    checksum's fast path shape it; a managed table's commit-owner state too), where it came
    from (`summary_from`: "replay", "checksum" or "pin", `pin` the pin it is read from), its
    checksum check, and its cached commit (None before a sync). The API's
    VersionSummarySerializer and the version page each show it."""

    state: dict[str, Any]
    summary_from: str
    pin: Pin | None
    checksum: ChecksumState
    commit_info: dict[str, Any] | None
    timestamp: int | None
    timestamp_source: str | None


def version_summary(table: Table, version: int) -> VersionSummary:
    """A version's protocol, metadata, size and (from the cache) its commitInfo and timestamp,
    with what its checksum file said. A version whose checksum was found to agree with the
    log is answered from the checksum ("checksum"), without a replay. A version the table lost
    and a pin keeps is its pin's ("pin", `pin` names it): its files are the kept ones, which a
    reader can open."""
    source = source_of(table, version)
    state = None
    if not source.from_pin and owner_of(table) is None:
        state = verified_summary(table, version)
    summary_from = "checksum" if state is not None else "replay"
    if state is None:
        snap, source = snapshot_and_source(table, version)
        state = snap.summary(files=False)
        if source is not None and source.from_pin:
            summary_from = "pin"
    row = Commit.objects.filter(table=table, version=version).first()
    return VersionSummary(
        state,
        summary_from,
        read_from(source),
        checksum_state(table, version),
        row.commit_info if row else None,
        row.timestamp if row else None,
        row.timestamp_source if row else None,
    )


def version_files(table: Table, version: int, offset: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
    """(number of active files, one page of them) of a version: the pin's kept files (the same
    relative paths) when the table lost the version and a pin keeps it."""
    snap = snapshot_at(table, version)
    return snap.num_files, snap.file_dicts(offset, limit)


@dataclass(frozen=True)
class Resolution:
    """TIMESTAMP AS OF's answer: the core's (`answer`: the version, its commit timestamp, the
    rule applied, the alternatives) and the version's reachability entry (None while a long
    log's answer is still computed). The API's ResolveSerializer shows it."""

    answer: dict[str, Any]
    reachability: dict[str, Any] | None  # its entry (tables.services.versions.pinned.mark_pin)

    @property
    def version(self) -> int:
        return self.answer["version"]


def resolve(table: Table, timestamp_text: str, allow_latest: bool = False, allow_earliest: bool = False) -> Resolution:
    """TIMESTAMP AS OF: the version current at a time, with the rule applied; allow_latest and
    allow_earliest answer the last / first version for a time after / before every commit."""
    try:
        t = parse_timestamp(timestamp_text)
    except delta_errors.InvalidTimestampError as exc:
        raise ServiceError(str(exc), "invalid_timestamp") from exc
    flags = {"allow_latest": allow_latest, "allow_earliest": allow_earliest}
    try:
        # a time the synced rows decide is answered from them: opening a long log lists it all
        out = resolve_stored(table, t, **flags)
        if out is None:
            out = resolve_timestamp(commit_times(table.location, owner=owner_of(table)), t, **flags)
    except delta_errors.TimestampOutOfRangeError as exc:
        raise ServiceError(str(exc), "timestamp_out_of_range", 400) from exc
    # the answer says before anyone tries whether that version can still be read
    # (null while a long log's answer is still computed: resolving never waits for it)
    return Resolution(out, version_reachability(table, out["version"], wait=False))


@dataclass(frozen=True)
class VersionDiff:
    """What changed between two versions: the core's comparison (`changes`: schema,
    partitioning, properties, protocol, files, counts), the pin each side was read from (None:
    the table), and the cached commits in between (rows of `diff_commits`; None when not
    asked). The API's DiffSerializer and the Compare page each show it."""

    v_from: int
    v_to: int
    changes: dict[str, Any]
    from_pin: Pin | None
    to_pin: Pin | None
    commits: list[dict[str, Any]] | None = None


def diff(
    table: Table,
    v_from: int,
    v_to: int,
    sample: int = 50,
    *,
    added_from: int = 0,
    removed_from: int = 0,
    with_commits: bool = True,
) -> VersionDiff:
    """What changed between two versions: schema, properties, protocol, files (`sample` of each
    side, from `added_from` / `removed_from` on), and the first 500 commits in between (a page
    that lists them in pages of its own asks `diff_commits` instead: with_commits=False)."""
    if v_from > v_to:
        raise ServiceError(f"'from' ({v_from}) must not be after 'to' ({v_to}).", "invalid_range")
    (a, a_source), (b, b_source) = snapshot_and_source(table, v_from), snapshot_and_source(table, v_to)
    changes = snapshot_diff(
        a,
        b,
        sample,
        # each side's files are read where that side was read from (a pin's kept table)
        storage=None if any(s is not None and s.from_pin for s in (a_source, b_source)) else table.location,
        added_from=added_from,
        removed_from=removed_from,
    )
    commits = diff_commits(table, v_from, v_to, 0, 500)[0] if with_commits else None
    return VersionDiff(v_from, v_to, changes, read_from(a_source), read_from(b_source), commits)


def diff_commits(table: Table, v_from: int, v_to: int, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """(one page of the cached commits after `v_from` up to `v_to`, oldest first; how many there are)."""
    qs = Commit.objects.filter(table=table, version__gt=v_from, version__lte=v_to)
    rows = qs.order_by("version").values(
        "version", "timestamp", "timestamp_source", "operation", "user_name", "operation_metrics"
    )[offset : offset + limit]
    return list(rows), qs.count()


@dataclass(frozen=True)
class ChecksumState:
    """What is known of a version's checksum file against the log: `state` is "ok",
    "mismatch", "unreadable" or "none" (no checksum file checked); the rest is the check's
    (tables.services.sync.checksums), None for none. The API's ChecksumStateSerializer and
    the version page each show it."""

    state: str
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    full: bool | None = None
    checked_at: datetime | None = None


def checksum_state(table: Table, version: int) -> ChecksumState:
    """The version's checksum as the sync's check found it."""
    row = VersionChecksum.objects.filter(table=table, version=version).first()
    if row is None:
        return ChecksumState("none")
    state = "ok" if row.ok else ("unreadable" if row.error else "mismatch")
    return ChecksumState(state, row.mismatches, row.error or None, row.full, row.checked_at)


def mismatched_versions(table: Table, versions: list[int]) -> set[int]:
    """Which of `versions` have a checksum that disagrees (the History tab's badge), in one query."""
    qs = VersionChecksum.objects.filter(table=table, version__in=versions, ok=False)
    return set(qs.values_list("version", flat=True))


def verified_summary(table: Table, version: int) -> dict[str, Any] | None:
    """A version's summary from its checksum file (as the sync's check stored it,
    tables.services.sync.checksums), when it was found to agree in every field and its bytes
    are still the ones checked; else None (the caller replays the log): a checksum once found
    to agree in full stands in for the replay."""
    sha = (
        VersionChecksum.objects.filter(table=table, version=version, ok=True, full=True)
        .values_list("sha256", flat=True)
        .first()
    )
    if not sha:
        return None
    try:
        return summary_if_unchanged(as_storage(table.location), version, sha)
    except delta_errors.DeltaError:  # the storage refused (confinement, credentials): replay, which says why
        return None
