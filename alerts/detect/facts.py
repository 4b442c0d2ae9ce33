"""What the rules look at for one commit: its cached history row, the row before it, its own
actions (read through the storage layer, the only door to files), and, only for commits that
change the metadata or protocol, the table's state at the version before.

Everything a commit's log names is untrusted: values are read defensively and never trusted
to be of the type the protocol says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tables.delta.history.metrics import normalized
from tables.delta.log.actions import Metadata, Protocol, parse_actions
from tables.delta.log.listing import LogFile, list_log
from tables.delta.snapshot.files import file_rows, log_add_actions
from tables.delta.snapshot.state import Snapshot, ratified_listing, read_commit_bytes
from tables.delta.storage.opening import as_storage
from tables.models import Anomaly, Commit, Table, VersionChecksum
from tables.services.owner.access import owner_of
from tables.services.versions.read import snapshot_at

# How many earlier commits tell what is usual on a table (writers, users, commit intervals).
HISTORY_WINDOW = 200
# Rows before a commit are counted from the statistics of every live file's add action; beyond
# this many files that read is left out (the byte share, from cached sizes, still applies).
ROWS_FILE_LIMIT = 10_000
ROWS_DELETED_METRICS = ("numDeletedRows", "numTargetRowsDeleted")


@dataclass
class CommitFacts:
    """One commit as the rules see it."""

    table: Table
    commit: Commit
    previous: Commit | None
    actions: list[tuple[str, dict[str, Any]]]
    anomalies: list[Anomaly]
    earlier: list[Commit]  # earlier commits, newest first (at most HISTORY_WINDOW)
    load_before: Callable[[], Snapshot | None] = field(repr=False)

    @property
    def version(self) -> int:
        return self.commit.version

    @property
    def operation(self) -> str:
        return (self.commit.operation or "").strip()

    @property
    def parameters(self) -> dict[str, Any]:
        p = self.commit.operation_parameters
        return p if isinstance(p, dict) else {}

    @cached_property
    def metrics(self) -> dict[str, Any]:
        """operationMetrics under one vocabulary (Spark's camelCase names, whoever wrote them)."""
        m = self.commit.operation_metrics
        return normalized(m) if isinstance(m, dict) else {}

    def metric(self, name: str) -> float | None:
        """An operationMetrics value as a number (engines write them as strings)."""
        value = self.metrics.get(name)
        if isinstance(value, bool):
            return None
        try:
            return float(value)
        except (TypeError, ValueError):
            return None

    def bodies(self, kind: str) -> list[dict[str, Any]]:
        return [body for name, body in self.actions if name == kind]

    @cached_property
    def new_metadata(self) -> Metadata | None:
        found = self.bodies("metaData")
        return Metadata.from_dict(found[-1]) if found else None

    @cached_property
    def new_protocol(self) -> Protocol | None:
        found = self.bodies("protocol")
        try:
            return Protocol.from_dict(found[-1]) if found else None
        except (TypeError, ValueError):
            return None

    @cached_property
    def checksum(self) -> VersionChecksum | None:
        """What the sync found of the version's checksum file (None: none was checked)."""
        return VersionChecksum.objects.filter(table=self.table, version=self.version).first()

    @cached_property
    def before(self) -> Snapshot | None:
        """The state at the version before (None for version 0 or when it cannot be read)."""
        return self.load_before()

    def removes_data(self) -> bool:
        """Whether the commit removes files as a data change (not OPTIMIZE's rewrite)."""
        return any(b.get("dataChange") is not False for b in self.bodies("remove"))

    def rows_removed(self) -> tuple[int, str] | None:
        """(rows the commit removed, where that comes from): operationMetrics, else the rows of
        the removed files less those of the added ones, when every such file has statistics."""
        for name in ROWS_DELETED_METRICS:
            value = self.metric(name)
            if value is not None and value >= 0:
                return int(value), "operationMetrics"
        net = 0
        for kind, sign in (("remove", 1), ("add", -1)):
            for body in self.bodies(kind):
                if body.get("dataChange") is False:
                    continue
                n = file_rows(body)
                if n is None:
                    return None
                net += sign * n
        return (net, "file statistics") if net > 0 else None

    @cached_property
    def rows_before(self) -> int | None:
        """Live rows at the version before, from its files' statistics (numRecords less deletion
        vectors); None without statistics for every file, or beyond ROWS_FILE_LIMIT files."""
        snap = self.before
        if snap is None or snap.num_files > ROWS_FILE_LIMIT:
            return None
        adds, _found = log_add_actions(as_storage(self.table.location), snap, snap.files)
        total = 0
        for body in adds:
            n = file_rows(body)
            if n is None:
                return None
            total += n
        return total

    def partitions_touched(self) -> set[tuple[str, str | None]]:
        """(key, value) of every partition a file was added to or removed from."""
        out: set[tuple[str, str | None]] = set()
        for name, body in self.actions:
            if name in ("add", "remove"):
                pv = body.get("partitionValues")
                if isinstance(pv, dict):
                    out.update((str(k), None if v is None else str(v)) for k, v in pv.items())
        return out


def _commit_files(table: Table) -> dict[int, LogFile]:
    """The commit file of every version the log (and the owner, for managed tables) lists."""
    storage = as_storage(table.location)
    listing = list_log(storage)
    owner = owner_of(table)
    if owner is not None:
        listing = ratified_listing(storage, owner, listing)
    return {c.version: c for c in listing.commits}


def _before_loader(table: Table, version: int) -> Callable[[], Snapshot | None]:
    def load() -> Snapshot | None:
        if version <= 0:
            return None
        try:
            return snapshot_at(table, version - 1)
        except Exception:  # the earlier state may be gone (log cleanup): rules that need it stay quiet
            return None

    return load


def commit_facts(table: Table, versions: list[int]) -> list[CommitFacts]:
    """Facts of the stored commits of `versions` (ascending), each with what came before."""
    if not versions:
        return []
    rows = {c.version: c for c in Commit.objects.filter(table=table, version__in=versions)}
    lo = min(versions)
    earlier = list(Commit.objects.filter(table=table, version__lt=lo).order_by("-version")[:HISTORY_WINDOW])
    anomalies: dict[int, list[Anomaly]] = {}
    for a in Anomaly.objects.filter(table=table, version__in=versions):
        anomalies.setdefault(a.version, []).append(a)
    files = _commit_files(table)
    storage = as_storage(table.location)
    out = []
    for v in sorted(rows):
        row = rows[v]
        lf = files.get(v)
        actions: list[tuple[str, dict[str, Any]]] = []
        if lf is not None:
            actions = parse_actions(bytes(read_commit_bytes(storage, lf.path, lf.size)), lf.path)
        out.append(
            CommitFacts(
                table=table,
                commit=row,
                previous=earlier[0] if earlier else None,
                actions=actions,
                anomalies=anomalies.get(v, []),
                earlier=list(earlier),
                load_before=_before_loader(table, v),
            )
        )
        earlier = [row, *earlier][:HISTORY_WINDOW]
    return out
