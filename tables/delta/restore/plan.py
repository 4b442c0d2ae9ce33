"""RESTORE planning: the plan on two snapshots (pure core). Its pieces live beside it:
restore_actions.py (the add and remove actions, the existence check), restore_rules.py
(protocol, metadata and domains of the result), restore_commit.py (committing a plan).

Contract (SPEC section 4, Delta Lake's RestoreTableCommand):
- The version to restore is given, or resolved from a timestamp with the latest version
  allowed; it must be lower than the latest version.
- Files to add: logical files of the target not active at latest, matched on path plus
  deletion-vector unique id; written as the log's own add action (stats, tags, row tracking
  fields kept) with dataChange=true. Files to remove: active at latest but not in the target,
  written as removes with a deletion timestamp, dataChange=true and extendedFileMetadata.
- Files to add must exist (data file and on-disk deletion vector); missing ones fail the plan
  listing up to 100, unless missing files are ignored, in which case they are left out of the
  commit and its metrics (Delta Lake adds them anyway and leaves readers to skip them).
- Metadata becomes the target's, except properties that describe the log's history rather
  than the table's content: the In-Commit Timestamp properties follow the latest metadata and
  identity columns keep the higher of both high-water marks (as Delta Lake merges them).
- Protocol: the merge of both (max versions, union of features, legacy versions turned into
  features when the result uses table features); never lower than latest unless a downgrade
  is explicitly allowed, in which case it is the target's.
- Domain metadata follows the target (domains only at latest are removed), except the row
  tracking high-water mark domain, which never goes back.
- commitInfo: operation RESTORE, operationParameters {version, timestamp}, readVersion,
  isolationLevel Serializable, isBlindAppend false, the six metrics as strings.

Partial restore (`where`, a predicate on partition columns, tables/delta/restore/predicate.py): inside
the partitions the predicate selects, in either version, the files become the target's; the
latest's files outside them stay untouched. Metadata, protocol and domains stay the latest's
(a partial restore never changes the schema), so both versions must have the same partition
columns, and a predicate that selects no partition in either version is refused. The
predicate is recorded in operationParameters ({version, timestamp, predicate}) and in the
plan, so that the committer can tell a concurrent commit outside the partitions (never a
conflict) from one inside them. Metrics count what the restore changes; "after" counts the
whole table.

Every plan carries its impact in rows (`rowImpact`): rows now, after, added back and removed,
from the files' statistics (numRecords less the deletion vector's cardinality), per changed
partition of a partitioned table, marked as an estimate when a file has no statistics.

Committing: put-if-absent on the next version. When the table moved on since the plan, the
plan is applied on top of the new head if no newer commit touched a path of the plan, the
metadata, the protocol or a domain it writes; otherwise CommitConflictError names the
competing versions. A txnId makes the commit idempotent. The new version is read back and
checked against the plan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import orjson
import pyarrow as pa

from tables.delta.errors import RestoreError, at_version
from tables.delta.history.timestamps import commit_times, format_ms, parse_timestamp, resolve_timestamp
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.restore.actions import (
    MAX_LISTED_MISSING,
    diff_files,
    missing_error,
    missing_files,
    restore_add,
    restore_remove,
    row_impact,
)
from tables.delta.restore.from_pin import PinnedFile, find_in_pin, pin_missing_error, pinned_target
from tables.delta.restore.predicate import PartitionPredicate, parse_predicate, table_partition_columns
from tables.delta.restore.rules import check_writable, restore_domains, restore_metadata, restore_protocol
from tables.delta.snapshot.files import log_add_actions
from tables.delta.snapshot.replay import action_identity
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.write.commit import now_ms
from tables.delta.write.committer import FILESYSTEM, Committer

# Metric names and order as Delta Lake writes them (golden basic-with-inserts-overwrite-restore).
METRIC_NAMES = (
    "numRestoredFiles",
    "removedFilesSize",
    "numRemovedFiles",
    "restoredFilesSize",
    "numOfFilesAfterRestore",
    "tableSizeAfterRestore",
)


# --- the plan ------------------------------------------------------------------------------


@dataclass(slots=True)
class RestorePlan:
    """Everything a RESTORE commit will write, computed on `read_version` (the head).

    `adds` and `removes` are action bodies (the `add` / `remove` values of the log's JSON).
    `fingerprint` hashes what the restore changes (file identities, metadata, protocol,
    domains, target), not the head it was computed on: a re-computed plan with the same
    fingerprint makes the same change.
    """

    location: str
    target_version: int
    read_version: int
    requested_version: int | None
    requested_timestamp: str | None
    resolution: dict[str, Any] | None
    adds: list[dict[str, Any]]
    removes: list[dict[str, Any]]
    metadata: dict[str, Any]
    protocol: dict[str, Any]
    protocol_outcome: str  # unchanged | merged | upgraded | downgraded | replaced
    protocol_note: str
    domains: list[dict[str, Any]]
    metrics: dict[str, str]
    missing_files: list[str]
    ignore_missing_files: bool
    allow_protocol_downgrade: bool
    files_checked: bool
    head_num_files: int
    head_size_bytes: int
    recovered_actions: int  # adds/removes copied whole from the log (with stats) ...
    rebuilt_actions: int  # ... and rebuilt from the snapshot's columns (no stats)
    notes: list[str] = field(default_factory=list)
    fingerprint: str = ""
    predicate: str | None = None  # a partial restore's partition predicate (None: the whole table)
    row_impact: dict[str, Any] | None = None  # rows now / after / added / removed (row_impact())
    # the files the table lacks that the pin keeping the target brings back (restore/from_pin.py):
    # {"count", "bytes", "files": [PinnedFile.to_dict()]}; None when the table has every file
    from_pin: dict[str, Any] | None = None

    def to_dict(self, files: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "location": self.location,
            "targetVersion": self.target_version,
            "readVersion": self.read_version,
            "requested": {"version": self.requested_version, "timestamp": self.requested_timestamp},
            "resolution": self.resolution,
            "metrics": dict(self.metrics),
            "numFilesToAdd": len(self.adds),
            "numFilesToRemove": len(self.removes),
            "protocol": self.protocol,
            "protocolOutcome": self.protocol_outcome,
            "protocolNote": self.protocol_note,
            "metadata": self.metadata,
            "domainMetadata": self.domains,
            "missingFiles": self.missing_files[:MAX_LISTED_MISSING],
            "numMissingFiles": len(self.missing_files),
            "ignoreMissingFiles": self.ignore_missing_files,
            "allowProtocolDowngrade": self.allow_protocol_downgrade,
            "filesChecked": self.files_checked,
            "headNumFiles": self.head_num_files,
            "headSizeBytes": self.head_size_bytes,
            "recoveredActions": self.recovered_actions,
            "rebuiltActions": self.rebuilt_actions,
            "notes": list(self.notes),
            "fingerprint": self.fingerprint,
            "predicate": self.predicate,
            "rowImpact": self.row_impact,
            "fromPin": None,
        }
        if self.from_pin is not None:
            out["fromPin"] = {"count": self.from_pin["count"], "bytes": self.from_pin["bytes"]}
        if files:
            out["adds"] = self.adds
            out["removes"] = self.removes
            if self.from_pin is not None:
                out["fromPin"]["files"] = list(self.from_pin["files"])
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RestorePlan:
        """The plan back from to_dict() (with files), e.g. as stored with a restore request."""
        if "adds" not in d or "removes" not in d:
            raise RestoreError("a restore plan needs its adds and removes (to_dict(files=True))")
        plan = cls(
            location=d["location"],
            target_version=int(d["targetVersion"]),
            read_version=int(d["readVersion"]),
            requested_version=d["requested"]["version"],
            requested_timestamp=d["requested"]["timestamp"],
            resolution=d.get("resolution"),
            adds=list(d["adds"]),
            removes=list(d["removes"]),
            metadata=d["metadata"],
            protocol=d["protocol"],
            protocol_outcome=d["protocolOutcome"],
            protocol_note=d["protocolNote"],
            domains=list(d["domainMetadata"]),
            metrics=dict(d["metrics"]),
            missing_files=list(d["missingFiles"]),
            ignore_missing_files=bool(d["ignoreMissingFiles"]),
            allow_protocol_downgrade=bool(d["allowProtocolDowngrade"]),
            files_checked=bool(d["filesChecked"]),
            head_num_files=int(d["headNumFiles"]),
            head_size_bytes=int(d["headSizeBytes"]),
            recovered_actions=int(d.get("recoveredActions", 0)),
            rebuilt_actions=int(d.get("rebuiltActions", 0)),
            notes=list(d.get("notes", [])),
            fingerprint=d["fingerprint"],
            predicate=d.get("predicate"),
            row_impact=d.get("rowImpact"),
            from_pin=_from_pin_of(d.get("fromPin")),
        )
        if plan_fingerprint(plan) != plan.fingerprint:
            raise RestoreError(f"{plan.location}: the restore plan does not match its fingerprint (edited?)")
        return plan

    @property
    def pinned_files(self) -> list[PinnedFile]:
        """The files a run copies from the pin before it commits (none without a pin)."""
        return [PinnedFile.from_dict(f) for f in (self.from_pin or {}).get("files") or ()]

    def replace(self, **changes: Any) -> RestorePlan:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return RestorePlan(**values)


def _from_pin_of(d: dict[str, Any] | None) -> dict[str, Any] | None:
    if not d:
        return None
    files = [PinnedFile.from_dict(f).to_dict() for f in d.get("files") or ()]
    return {"count": int(d.get("count", len(files))), "bytes": int(d.get("bytes", 0)), "files": files}


def _pin_summary(files: list[PinnedFile]) -> dict[str, Any]:
    return {"count": len(files), "bytes": sum(f.size for f in files), "files": [f.to_dict() for f in files]}


# --- metrics and fingerprint ---------------------------------------------------------------------


def restore_metrics(
    adds: list[dict[str, Any]], removes: list[dict[str, Any]], head_files: int, head_size: int
) -> dict[str, str]:
    """operationMetrics as Delta Lake writes them (strings); 'after' counts the head, less
    the removes, plus the adds (the target's files unless some were skipped or rebased)."""
    add_size = sum(int(a.get("size") or 0) for a in adds)
    rem_size = sum(int(r.get("size") or 0) for r in removes)
    return metrics_from_totals(len(adds), add_size, len(removes), rem_size, head_files, head_size)


def metrics_from_totals(
    num_added: int, added_size: int, num_removed: int, removed_size: int, head_files: int, head_size: int
) -> dict[str, str]:
    """restore_metrics from counts and sizes already summed (e.g. by a Spark aggregation)."""
    values = {
        "numRestoredFiles": num_added,
        "removedFilesSize": removed_size,
        "numRemovedFiles": num_removed,
        "restoredFilesSize": added_size,
        "numOfFilesAfterRestore": head_files - num_removed + num_added,
        "tableSizeAfterRestore": head_size - removed_size + added_size,
    }
    return {k: str(values[k]) for k in METRIC_NAMES}


def plan_fingerprint(plan: RestorePlan) -> str:
    body = {
        "target": plan.target_version,
        "add": sorted(action_identity(a) for a in plan.adds),
        "remove": sorted(action_identity(r) for r in plan.removes),
        "metadata": plan.metadata,
        "protocol": plan.protocol,
        "domains": sorted(plan.domains, key=lambda d: (d.get("domain") or "", bool(d.get("removed")))),
    }
    if plan.predicate is not None:  # only partial plans: a full plan's fingerprint is unchanged
        body["predicate"] = plan.predicate
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


# --- planning ------------------------------------------------------------------------------------


def _timestamp_text(timestamp: str | int) -> str:
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        return format_ms(timestamp) or str(timestamp)
    return str(timestamp).strip()


@dataclass(slots=True)
class RestoreSetup:
    """Everything a plan needs besides the file diff: both snapshots and the checked
    metadata, protocol and domains to write. Shared by plan_restore and the Spark planner,
    which only does the file work (diff, existence check, metrics) elsewhere."""

    storage: Storage
    latest: Snapshot
    target: Snapshot
    target_version: int
    requested_version: int | None
    requested_timestamp: str | None
    resolution: dict[str, Any] | None
    metadata: dict[str, Any]
    protocol: Protocol
    protocol_outcome: str
    protocol_note: str
    domains: list[dict[str, Any]]
    notes: list[str]
    predicate: PartitionPredicate | None = None  # a partial restore's selection
    # the pin's kept table the target was read from (from_pin.py), else None: the table's own log
    pin: Storage | None = None

    @property
    def target_storage(self) -> Storage:
        """Where the target's add actions are read: the pin's kept table, or the table."""
        return self.pin if self.pin is not None else self.storage

    @property
    def where(self) -> str:
        return self.storage.display()

    def scoped_files(self) -> tuple[pa.Table, pa.Table]:
        """(latest files, target files) the restore works on: all of them, or for a partial
        restore those in the partitions the predicate selects (refused when it selects none)."""
        latest, target = self.latest.files, self.target.files
        if self.predicate is None:
            return latest, target
        latest = latest.filter(self.predicate.mask(latest)) if latest.num_rows else latest
        target = target.filter(self.predicate.mask(target)) if target.num_rows else target
        if latest.num_rows == 0 and target.num_rows == 0:
            raise RestoreError(
                f"{self.where}: the predicate selects no partition in version {self.target_version} or in the "
                f"latest version {self.latest.version}: {self.predicate.text}",
                predicate=self.predicate.text,
            )
        return latest, target


def prepare_restore(
    location: str | Storage,
    version: int | None = None,
    timestamp: str | int | None = None,
    allow_protocol_downgrade: bool = False,
    committer: Committer = FILESYSTEM,
    where: str | None = None,
    pinned: str | Storage | None = None,
) -> RestoreSetup:
    """Check the request, load the latest and target snapshots, and work out the metadata,
    protocol and domain metadata the restore writes; with `where` (a partition predicate),
    a partial restore, which keeps the latest's. With `pinned` (the kept table of a pin that
    keeps the version), the target is read there: its files the table lacks come back from it."""
    storage = as_storage(location)
    predicate_text, where = where, storage.display()
    if (version is None) == (timestamp is None):
        raise RestoreError(f"{where}: give exactly one of a version or a timestamp to restore")
    if pinned is not None and version is None:
        raise RestoreError(f"{where}: a restore from a pin names the pinned version, not a timestamp")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise RestoreError(f"{where}: the version to restore must be a non-negative integer, not {version!r}")
    listing = committer.listing(storage)
    latest = load_snapshot(storage, None, listing)
    resolution = None
    ts_text = None
    if timestamp is not None:
        ts_text = _timestamp_text(timestamp)
        t = parse_timestamp(timestamp)
        res = resolve_timestamp(commit_times(storage, listing), t, allow_latest=True, alternatives=False)
        resolution = {
            k: res[k] for k in ("version", "commitTimestamp", "commitTimestampIso", "source", "rule", "searchRange")
        }
        resolution["requestedTimestamp"] = t
        target_version = int(res["version"])
    else:
        target_version = int(version)  # type: ignore[arg-type]
    if target_version >= latest.version:
        how = (
            f"timestamp {ts_text} resolves to version {target_version}, which"
            if ts_text
            else (f"version {target_version}")
        )
        raise RestoreError(
            f"{where}: cannot restore: {how} is not lower than the latest version {latest.version}",
            targetVersion=target_version,
            latestVersion=latest.version,
        )
    pin = as_storage(pinned) if pinned is not None else None
    if pin is not None:
        target = pinned_target(pin, target_version, where)
    else:
        target = load_snapshot(storage, target_version, listing)
    check_writable(latest.protocol, f"{where} at version {latest.version}", committer)
    setup_base = dict(
        storage=storage,
        pin=pin,
        latest=latest,
        target=target,
        target_version=target_version,
        requested_version=version,
        requested_timestamp=ts_text,
        resolution=resolution,
    )
    if predicate_text is not None:
        partial = _partial_setup(setup_base, predicate_text)
        if allow_protocol_downgrade:
            partial.notes.append("protocol: a partial restore keeps the latest protocol; the downgrade is not used")
        return partial

    protocol, outcome, note = restore_protocol(latest.protocol, target.protocol, allow_protocol_downgrade)
    check_writable(protocol, f"{where}: the restored protocol", committer)
    metadata, notes = restore_metadata(latest.metadata, target.metadata, protocol)
    if Metadata.from_dict(metadata) != latest.metadata:
        notes.insert(0, f"metadata: the metadata of version {target_version} is restored")
    domains = restore_domains(latest.domains, target.domains)
    if domains and not protocol.has_writer_feature("domainMetadata"):
        raise RestoreError(
            f"{where}: the restore must write domain metadata ({', '.join(d['domain'] for d in domains)}) "
            f"but the restored protocol lacks the domainMetadata feature; do not allow a protocol downgrade",
        )
    return RestoreSetup(
        **setup_base,
        metadata=metadata,
        protocol=protocol,
        protocol_outcome=outcome,
        protocol_note=note,
        domains=domains,
        notes=notes,
    )


def _partial_setup(base: dict[str, Any], text: str) -> RestoreSetup:
    """A partial restore's setup: the predicate parsed against the partition columns (the
    same in both versions), and the latest's metadata and protocol kept, no domains written."""
    latest, target, where = base["latest"], base["target"], base["storage"].display()
    columns = table_partition_columns(latest.metadata, latest.protocol)
    if not columns:
        raise RestoreError(f"{where}: the table is not partitioned: a partial restore selects partitions")
    target_columns = table_partition_columns(target.metadata, target.protocol)
    if target_columns != columns:
        shown = ", ".join(c.name for c in target_columns) or "(none)"
        raise RestoreError(
            f"{where}: version {base['target_version']} is partitioned by {shown}, the latest version by "
            f"{', '.join(c.name for c in columns)}: a partial restore needs the same partition columns",
        )
    predicate = parse_predicate(text, columns)
    notes = [f"partial restore: only the partitions where {predicate.text} (the latest's other files stay)"]
    if target.metadata.schema_string != latest.metadata.schema_string:
        notes.append(
            f"metadata: version {base['target_version']} had another schema; a partial restore keeps the "
            f"latest's, which the restored files are read with"
        )
    return RestoreSetup(
        **base,
        metadata=latest.metadata.to_dict(),
        protocol=latest.protocol,
        protocol_outcome="unchanged",
        protocol_note="a partial restore keeps the latest protocol",
        domains=[],
        notes=notes,
        predicate=predicate,
    )


def check_removals(setup: RestoreSetup, num_removes: int) -> None:
    """An append-only table refuses a restore that removes files."""
    if num_removes and setup.latest.metadata.configuration.get("delta.appendOnly", "").strip().lower() == "true":
        raise RestoreError(
            f"{setup.where}: the table is append-only (delta.appendOnly=true) and the restore would remove "
            f"{num_removes} file(s)",
        )


# Long on purpose: the plan's steps share the two snapshots' indexes; each step is commented.
def build_plan(
    setup: RestoreSetup,
    add_rows: pa.Table,
    remove_rows: pa.Table,
    ignore_missing_files: bool = False,
    allow_protocol_downgrade: bool = False,
    check_files: bool = True,
    clock: Callable[[], int] = now_ms,
    find_missing: Callable[[list[dict[str, Any]]], tuple[list[str], set[int]]] | None = None,
    metrics: dict[str, str] | Callable[[], dict[str, str]] | None = None,
    with_row_impact: bool = True,
) -> RestorePlan:
    """The plan from the file diff: `add_rows` (rows of the target's files) and `remove_rows`
    (rows of the latest's). `find_missing(adds)` returns what missing_files() would (missing
    files, indexes of their adds); it is called after the actions are read from the log, so
    a check started earlier can run meanwhile. `metrics` (or `metrics()`, called after
    find_missing), when given, must be what restore_metrics() would count on the adds left
    after the missing ones. `with_row_impact` reads the statistics of every latest file from
    the log for the plan's rowImpact."""
    storage, where, latest, target = setup.storage, setup.where, setup.latest, setup.target
    notes = list(setup.notes)
    target_adds, rec_a = log_add_actions(setup.target_storage, target, add_rows)
    latest_adds, rec_r = log_add_actions(storage, latest, remove_rows)
    adds = [restore_add(a) for a in target_adds]
    now = clock()
    removes = [restore_remove(a, now) for a in latest_adds]
    rebuilt = (len(adds) - rec_a) + (len(removes) - rec_r)
    if setup.predicate is not None and not setup.protocol.has_writer_feature("deletionVectors"):
        with_dv = sum(1 for a in adds if a.get("deletionVector"))
        if with_dv:
            raise RestoreError(
                f"{where}: {with_dv} file(s) of version {setup.target_version} have deletion vectors, which the "
                f"latest protocol no longer supports; a partial restore keeps the latest protocol",
            )
    if rebuilt:
        notes.append(
            f"files: {rebuilt} action(s) were rebuilt from the snapshot without stats or tags "
            f"(their commit or checkpoint no longer holds them)"
        )

    missing: list[str] = []
    from_pin: dict[str, Any] | None = None
    if check_files:
        with at_version(f"version {setup.target_version}"):
            missing, bad = find_missing(adds) if find_missing is not None else missing_files(storage, adds)
            if setup.pin is not None and bad:
                back, missing, bad = find_in_pin(storage, setup.pin, adds, bad)
                if missing and not ignore_missing_files:
                    raise pin_missing_error(where, setup.target_version, missing)
                from_pin = _pin_summary(back)
                notes.append(
                    f"files: {len(back)} file(s) of version {setup.target_version} that VACUUM removed from the "
                    f"table come back from the pin ({from_pin['bytes']} bytes), copied when the restore runs"
                )
        if missing and not ignore_missing_files:
            raise missing_error(where, setup.target_version, missing)
        if bad:
            adds = [a for i, a in enumerate(adds) if i not in bad]
            notes.append(f"files: {len(bad)} missing file(s) of version {setup.target_version} are left out")
    else:
        notes.append("files: the existence of the files to restore was not checked")

    impact = row_impact(storage, latest, adds, removes, setup.pin) if with_row_impact else None
    if metrics is None:
        plan_metrics = restore_metrics(adds, removes, latest.num_files, latest.size_bytes)
    else:
        plan_metrics = metrics() if callable(metrics) else metrics
    plan = RestorePlan(
        location=storage.location,
        target_version=setup.target_version,
        read_version=latest.version,
        requested_version=setup.requested_version,
        requested_timestamp=setup.requested_timestamp,
        resolution=setup.resolution,
        adds=adds,
        removes=removes,
        metadata=setup.metadata,
        protocol=setup.protocol.to_dict(),
        protocol_outcome=setup.protocol_outcome,
        protocol_note=setup.protocol_note,
        domains=setup.domains,
        metrics=plan_metrics,
        missing_files=missing,
        ignore_missing_files=ignore_missing_files,
        allow_protocol_downgrade=allow_protocol_downgrade,
        files_checked=check_files,
        head_num_files=latest.num_files,
        head_size_bytes=latest.size_bytes,
        recovered_actions=rec_a + rec_r,
        rebuilt_actions=rebuilt,
        notes=notes,
        predicate=setup.predicate.text if setup.predicate is not None else None,
        row_impact=impact,
        from_pin=from_pin,
    )
    plan.fingerprint = plan_fingerprint(plan)
    return plan


def plan_restore(
    location: str | Storage,
    version: int | None = None,
    timestamp: str | int | None = None,
    ignore_missing_files: bool = False,
    allow_protocol_downgrade: bool = False,
    check_files: bool = True,
    clock: Callable[[], int] = now_ms,
    committer: Committer = FILESYSTEM,
    where: str | None = None,
    with_row_impact: bool = True,
    pinned: str | Storage | None = None,
) -> RestorePlan:
    """Plan RESTORE TO VERSION `version` or TIMESTAMP `timestamp` on the table's latest version
    (a managed table's as its commit-owner knows it: `committer`, write/committer.py); with `where`, a partition
    predicate, only the partitions it selects (a partial restore, see the module's contract).
    `pinned`: the kept table of the pin that keeps `version` (restore/from_pin.py)."""
    setup = prepare_restore(
        location, version, timestamp, allow_protocol_downgrade, committer, where=where, pinned=pinned
    )
    add_rows, remove_rows = diff_files(*setup.scoped_files())
    check_removals(setup, remove_rows.num_rows)
    return build_plan(
        setup,
        add_rows,
        remove_rows,
        ignore_missing_files=ignore_missing_files,
        allow_protocol_downgrade=allow_protocol_downgrade,
        check_files=check_files,
        clock=clock,
        with_row_impact=with_row_impact,
    )
