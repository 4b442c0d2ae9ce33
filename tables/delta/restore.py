"""RESTORE: plan on two snapshots, then commit the plan as one new version (pure core).

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

Committing: put-if-absent on the next version. When the table moved on since the plan, the
plan is applied on top of the new head if no newer commit touched a path of the plan, the
metadata, the protocol or a domain it writes; otherwise CommitConflictError names the
competing versions. A txnId makes the commit idempotent. The new version is read back and
checked against the plan.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .actions import Metadata, Protocol, dv_unique_id, parse_actions
from .changes import commit_actions
from .checkpoint import _open_parquet, _plain, _sidecar_rel, read_checkpoint_others
from .commit import ENGINE_INFO, commit, now_ms
from .commitinfo import read_commit_info
from .dv import deletion_vector_file
from .errors import (
    CommitConflictError,
    CorruptLogError,
    DeltaError,
    MissingFilesError,
    RestoreError,
    UnsupportedFeatureError,
    at_version,
)
from .log import LogListing, commit_name, list_log
from .replay import identity_keys
from .snapshot import Snapshot, load_snapshot, ratified_listing
from .storage import Storage, as_storage
from .timestamps import (
    ENABLE_KEYS,
    ICT_FEATURES,
    TIMESTAMP_KEYS,
    VERSION_KEYS,
    commit_times,
    format_ms,
    parse_timestamp,
    resolve_timestamp,
)

MAX_LISTED_MISSING = 100
MAX_COMMIT_ATTEMPTS = 5

# Metric names and order as Delta Lake writes them (golden basic-with-inserts-overwrite-restore).
METRIC_NAMES = (
    "numRestoredFiles",
    "removedFilesSize",
    "numRemovedFiles",
    "restoredFilesSize",
    "numOfFilesAfterRestore",
    "tableSizeAfterRestore",
)

# Legacy features and the (reader, writer) versions that imply them (Delta's TableFeature).
LEGACY_FEATURES: dict[str, tuple[int, int]] = {
    "appendOnly": (1, 2),
    "invariants": (1, 2),
    "checkConstraints": (1, 3),
    "changeDataFeed": (1, 4),
    "generatedColumns": (1, 4),
    "columnMapping": (2, 5),
    "identityColumns": (1, 6),
}
READER_WRITER_LEGACY = frozenset({"columnMapping"})

# Writer features a RESTORE commit honours: it only re-adds files the log already described,
# rewrites metadata and protocol, and writes domain metadata. Commit-owner (managed/catalog)
# tables need their owner to ratify commits, so they are refused, as is anything unknown.
RESTORE_WRITER_FEATURES = frozenset(
    {
        *LEGACY_FEATURES,
        "deletionVectors",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "inCommitTimestamp",
        "inCommitTimestamp-preview",
        "rowTracking",
        "typeWidening",
        "typeWidening-preview",
        "vacuumProtocolCheck",
        "icebergCompatV1",
        "icebergCompatV2",
        "clustering",
        "liquid",
        "allowColumnDefaults",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
        "collations-preview",
        "checkpointProtection",
    }
)

# System domains whose state is about the log's history, not the table's content.
RETAINED_DOMAINS = frozenset({"delta.rowTracking"})

_ICT_KEYS = (*ENABLE_KEYS, *VERSION_KEYS, *TIMESTAMP_KEYS)
_FILE_URI = re.compile(r"^file:(?://(?:localhost)?)?/")


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
        }
        if files:
            out["adds"] = self.adds
            out["removes"] = self.removes
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
        )
        if plan_fingerprint(plan) != plan.fingerprint:
            raise RestoreError(f"{plan.location}: the restore plan does not match its fingerprint (edited?)")
        return plan

    def replace(self, **changes: Any) -> RestorePlan:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return RestorePlan(**values)


# --- identities ----------------------------------------------------------------------------


def action_identity(body: dict[str, Any]) -> str:
    """The key replay.identity_keys gives the same file: canonical path [NUL dv unique id]."""
    path = _canonical_path(body["path"])
    dv = dv_unique_id(body.get("deletionVector"))
    return path if dv is None else f"{path}\x00{dv}"


def _canonical_path(path: str) -> str:
    return _FILE_URI.sub("/", path) if path.startswith("file:") else path


def diff_files(latest: pa.Table, target: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(rows of `target` to add, rows of `latest` to remove): anti-joins on file identity."""
    lk, tk = identity_keys(latest), identity_keys(target)
    to_add = target.filter(pc.invert(pc.is_in(tk, value_set=lk))) if target.num_rows else target
    to_remove = latest.filter(pc.invert(pc.is_in(lk, value_set=tk))) if latest.num_rows else latest
    return to_add, to_remove


# --- the log's own add actions ---------------------------------------------------------------


def _clean_add(body: dict[str, Any]) -> dict[str, Any]:
    """An add body as JSON carries it: no absent optional fields, no parsed-stats columns."""
    out = {k: v for k, v in body.items() if v is not None and not k.endswith("_parsed")}
    dv = out.get("deletionVector")
    if isinstance(dv, dict):
        out["deletionVector"] = {k: v for k, v in dv.items() if v is not None}
    return out


def _commit_adds(storage: Storage, version: int, wanted: set[str]) -> dict[str, dict[str, Any]]:
    try:
        data = storage.read(commit_name(version))
    except FileNotFoundError:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for line in data.split(b"\n"):
        if b'"add"' not in line:
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        body = obj.get("add") if isinstance(obj, dict) else None
        if isinstance(body, dict) and isinstance(body.get("path"), str):
            key = action_identity(body)
            if key in wanted:
                found[key] = body
    return found


def _parquet_adds(storage: Storage, rel: str, paths: pa.Array) -> list[dict[str, Any]]:
    pf = _open_parquet(storage, rel)
    if "add" not in pf.schema_arrow.names:
        return []
    col = pf.read(columns=["add"]).column("add").combine_chunks()
    hit = pc.fill_null(pc.is_in(col.field("path"), value_set=paths), False)
    return [_plain(v) for v in col.filter(hit).to_pylist() if v is not None]


def _json_adds(storage: Storage, rel: str) -> list[dict[str, Any]]:
    out = []
    for line in storage.read(rel).split(b"\n"):
        if b'"add"' in line:
            obj = orjson.loads(line)
            if isinstance(obj, dict) and isinstance(obj.get("add"), dict):
                out.append(obj["add"])
    return out


def _checkpoint_adds(storage: Storage, snap: Snapshot, wanted: set[str], paths: list[str]) -> dict[str, dict]:
    files = snap.segment.checkpoint or []
    value_set = pa.array(sorted(set(paths)), pa.string())
    bodies: list[dict[str, Any]] = []
    for f in files:
        bodies += _json_adds(storage, f.path) if f.fmt == "json" else _parquet_adds(storage, f.path, value_set)
    for name, body in read_checkpoint_others(storage, files):
        if name == "sidecar":
            rel = _sidecar_rel(body["path"])
            bodies += _json_adds(storage, rel) if rel.endswith(".json") else _parquet_adds(storage, rel, value_set)
    found = {}
    for b in bodies:
        if isinstance(b.get("path"), str):
            key = action_identity(b)
            if key in wanted:
                found[key] = b
    return found


def _rebuilt_add(row: dict[str, Any], partition_keys: list[str]) -> dict[str, Any]:
    pv = row.get("partitionValues") or {}
    body = {
        "path": row["path"],
        "partitionValues": {k: pv.get(k) for k in partition_keys},
        "size": row["size"],
        "modificationTime": row["modificationTime"],
        "dataChange": True,
    }
    if row.get("deletionVector"):
        body["deletionVector"] = row["deletionVector"]
    return _clean_add(body)


def log_add_actions(storage: Storage, snap: Snapshot, rows: pa.Table) -> tuple[list[dict[str, Any]], int]:
    """The add actions the log holds for `rows` (a slice of snap.files), in row order, and
    how many were found there. The snapshot keeps only replay's columns; the commit (or
    checkpoint) that added a file also has its stats, tags and row-tracking fields, which a
    restore must carry (deletion vectors need numRecords; row IDs come back with the file).
    Files not found there (a checkpoint written without them) are rebuilt from the columns.
    """
    if rows.num_rows == 0:
        return [], 0
    keys = identity_keys(rows).to_pylist()
    versions = rows.column("version").to_pylist()
    seqs = rows.column("seq").to_pylist()
    by_version: dict[int, set[str]] = {}
    from_checkpoint: set[str] = set()
    cp_paths: list[str] = []
    raw_paths = rows.column("path").to_pylist()
    for k, v, s, p in zip(keys, versions, seqs, raw_paths, strict=True):
        if s < 0:
            from_checkpoint.add(k)
            cp_paths.append(p)
        else:
            by_version.setdefault(v, set()).add(k)
    found: dict[str, dict[str, Any]] = {}
    for v, wanted in sorted(by_version.items()):
        found.update(_commit_adds(storage, v, wanted))
    if from_checkpoint:
        found.update(_checkpoint_adds(storage, snap, from_checkpoint, cp_paths))
    partition_keys = snap.metadata.partition_keys()
    out, recovered = [], 0
    rebuilt_rows = None
    for i, k in enumerate(keys):
        body = found.get(k)
        if body is not None:
            recovered += 1
            out.append(_clean_add(body))
        else:
            if rebuilt_rows is None:
                rebuilt_rows = rows.select(
                    ["path", "size", "partitionValues", "modificationTime", "deletionVector"]
                ).to_pylist()
            out.append(_rebuilt_add(rebuilt_rows[i], partition_keys))
    return out, recovered


def restore_add(add: dict[str, Any]) -> dict[str, Any]:
    """A target file re-added by the restore: the log's add with dataChange=true."""
    return {**add, "dataChange": True}


def restore_remove(add: dict[str, Any], deletion_timestamp: int) -> dict[str, Any]:
    """A latest file removed by the restore (Delta Lake's AddFile.removeWithTimestamp)."""
    out: dict[str, Any] = {
        "path": add["path"],
        "deletionTimestamp": deletion_timestamp,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add.get("partitionValues") or {},
        "size": add.get("size"),
    }
    for k in ("tags", "deletionVector", "baseRowId", "defaultRowCommitVersion", "stats"):
        if add.get(k) is not None:
            out[k] = add[k]
    return out


# --- existence of the files to add -------------------------------------------------------------


def _exists(storage: Storage, path: str) -> bool:
    """Whether a log path exists; one outside the allowed roots is refused, never probed."""
    return storage.exists(storage.resolve(path))


def missing_files(storage: Storage, adds: list[dict[str, Any]]) -> tuple[list[str], set[int]]:
    """(missing data and deletion-vector files, indexes of the adds they belong to)."""
    missing: list[str] = []
    bad: set[int] = set()
    for i, a in enumerate(adds):
        if not _exists(storage, a["path"]):
            missing.append(unquote(a["path"]))
            bad.add(i)
        dv_file = deletion_vector_file(a.get("deletionVector"))
        if dv_file is not None and not _exists(storage, dv_file):
            missing.append(unquote(dv_file))
            bad.add(i)
    return missing, bad


def _missing_error(location: str, version: int, missing: list[str]) -> MissingFilesError:
    shown = missing[:MAX_LISTED_MISSING]
    more = f" (showing {len(shown)} of {len(missing)})" if len(missing) > len(shown) else ""
    return MissingFilesError(
        f"{location}: not all files of version {version} are available: {len(missing)} missing{more}: "
        f"{', '.join(shown)}. Restore a more recent version, or ignore missing files to restore "
        f"the table without them.",
        files=shown,
        version=version,
        count=len(missing),
    )


# --- protocol ------------------------------------------------------------------------------


def implicit_features(p: Protocol) -> set[str]:
    """Features a legacy protocol supports without naming them (none once it uses features)."""
    if p.min_reader_version >= 3 or p.min_writer_version >= 7:
        return set()
    return {f for f, (r, w) in LEGACY_FEATURES.items() if r <= p.min_reader_version and w <= p.min_writer_version}


def feature_names(p: Protocol) -> set[str]:
    return set(p.reader_features or ()) | set(p.writer_features or ()) | implicit_features(p)


def can_upgrade(frm: Protocol, to: Protocol) -> bool:
    """Delta Lake's Protocol.canUpgradeTo: `to` has versions and features at least frm's."""
    return (
        to.min_reader_version >= frm.min_reader_version
        and to.min_writer_version >= frm.min_writer_version
        and feature_names(frm) <= feature_names(to)
    )


def merge_protocols(*protocols: Protocol) -> Protocol:
    """Delta Lake's Protocol.merge: max versions, union of explicit features, and the legacy
    features the inputs imply listed explicitly once the result uses table features."""
    reader = max(p.min_reader_version for p in protocols)
    writer = max(p.min_writer_version for p in protocols)
    if reader < 3 and writer < 7:
        return Protocol(reader, writer)
    rf = {f for p in protocols for f in (p.reader_features or ())}
    wf = {f for p in protocols for f in (p.writer_features or ())}
    for f in set().union(*(implicit_features(p) for p in protocols)):
        wf.add(f)
        if f in READER_WRITER_LEGACY and reader >= 3:
            rf.add(f)
    return Protocol(
        reader,
        writer,
        tuple(sorted(rf)) if reader >= 3 else None,
        tuple(sorted(wf)) if writer >= 7 else None,
    )


def _same_protocol(a: Protocol, b: Protocol) -> bool:
    return can_upgrade(a, b) and can_upgrade(b, a)


def restore_protocol(latest: Protocol, target: Protocol, allow_downgrade: bool) -> tuple[Protocol, str, str]:
    """(protocol to write, outcome, explanation)."""
    if allow_downgrade:
        if _same_protocol(target, latest):
            return latest, "unchanged", "the target's protocol equals the latest"
        if can_upgrade(target, latest):
            return (
                target,
                "downgraded",
                (
                    "protocol downgrade allowed: the target's lower protocol is written "
                    "(time travel to versions that need the dropped features may break)"
                ),
            )
        if can_upgrade(latest, target):
            return target, "upgraded", "the target's protocol is higher than the latest and is written"
        return target, "replaced", "protocol downgrade allowed: the target's protocol replaces the latest"
    if can_upgrade(target, latest):
        if _same_protocol(target, latest):
            return latest, "unchanged", "the target's protocol equals the latest"
        return (
            latest,
            "merged",
            ("the target's protocol is lower than the latest; the latest is kept (never downgraded unless allowed)"),
        )
    merged = merge_protocols(target, latest)
    return (
        merged,
        "upgraded",
        ("the target needs features or versions the latest protocol lacks; the protocol is the merge of both"),
    )


# --- managed tables: a RESTORE through the table's commit-owner (issue 7) ----------------------
# With `owner` (the table's commit-owner client) the restore reads the log with the owner's
# ratified, un-backfilled commits merged in and commits through managed.commit_via_owner, so
# the owner's policy sees the commit (and its txnId) before it lands. Without one, a managed
# table is refused: a RESTORE written around its owner would break the table.


def _listing(storage: Storage, owner: Any = None) -> LogListing:
    return ratified_listing(storage, owner) if owner is not None else list_log(storage)


def _owner_keys() -> frozenset[str]:
    from .owner import FLAVORS

    return frozenset(k for fl in FLAVORS for k in fl.keys)


# --- end of managed tables ----------------------------------------------------------------------


def check_writable(protocol: Protocol, where: str, owner: Any = None) -> None:
    """Refuse a protocol whose writer requirements a RESTORE commit cannot honour (a managed
    table's only with its commit-owner: `owner`)."""
    from .owner import MANAGED_FEATURES

    if protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(
            f"{where}: writer version {protocol.min_writer_version} is not supported by RESTORE",
            feature=f"writerVersion{protocol.min_writer_version}",
        )
    managed = sorted(feature_names(protocol) & MANAGED_FEATURES)
    if managed and owner is None:
        raise UnsupportedFeatureError(
            f"{where}: the table is managed by a commit-owner ({', '.join(managed)}); a RESTORE must be "
            f"committed through its owner",
            feature=managed[0],
        )
    unknown = sorted(feature_names(protocol) - RESTORE_WRITER_FEATURES - MANAGED_FEATURES)
    if unknown:
        raise UnsupportedFeatureError(
            f"{where}: RESTORE cannot write a table with writer feature{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}",
            feature=unknown[0],
        )


# --- metadata and domains ----------------------------------------------------------------------


def _identity_fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f["name"]: f.get("metadata") or {}
        for f in schema.get("fields", [])
        if isinstance(f, dict) and "delta.identity.highWaterMark" in (f.get("metadata") or {})
    }


def restore_metadata(latest: Metadata, target: Metadata, protocol: Protocol) -> tuple[dict[str, Any], list[str]]:
    """The target's metadata with the history properties of the latest, and what was kept."""
    md = target.to_dict()
    notes: list[str] = []
    conf = {k: v for k, v in md["configuration"].items() if k not in _ICT_KEYS}
    if any(protocol.has_writer_feature(f) for f in ICT_FEATURES):
        kept = {k: v for k, v in latest.configuration.items() if k in _ICT_KEYS}
        conf.update(kept)
    else:
        kept = {}
    if {k: v for k, v in target.configuration.items() if k in _ICT_KEYS} != kept:
        notes.append("metadata: In-Commit Timestamp properties kept from the latest version")
    owner_keys = _owner_keys()  # who owns the table's commits is not history: the latest's stand
    conf = {k: v for k, v in conf.items() if k not in owner_keys}
    conf.update({k: v for k, v in latest.configuration.items() if k in owner_keys})
    md["configuration"] = conf
    # identity columns: keep the higher high-water mark so generated values never repeat
    try:
        tschema, lschema = target.schema, latest.schema
    except orjson.JSONDecodeError:
        return md, notes
    latest_ids = _identity_fields(lschema)
    changed = False
    for f in tschema.get("fields", []):
        meta = (f.get("metadata") or {}) if isinstance(f, dict) else {}
        if "delta.identity.start" not in meta and "delta.identity.highWaterMark" not in meta:
            continue
        other = latest_ids.get(f.get("name"), {}).get("delta.identity.highWaterMark")
        if other is None:
            continue
        mine = meta.get("delta.identity.highWaterMark")
        step = int(meta.get("delta.identity.step", 1) or 1)
        best = other if mine is None else (max(mine, other) if step > 0 else min(mine, other))
        if best != mine:
            meta["delta.identity.highWaterMark"] = best
            f["metadata"] = meta
            changed = True
    if changed:
        md["schemaString"] = orjson.dumps(tschema).decode()
        notes.append("metadata: identity column high-water marks kept from the latest version")
    return md, notes


def restore_domains(latest: dict[str, dict[str, Any]], target: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """domainMetadata actions that make the latest's domains the target's."""
    out = []
    for name in sorted(target):
        if name in RETAINED_DOMAINS:
            continue
        body = {**target[name], "removed": False}
        if name not in latest or latest[name].get("configuration") != body.get("configuration"):
            out.append(body)
    for name in sorted(latest):
        if name not in target and name not in RETAINED_DOMAINS:
            out.append({**latest[name], "removed": True})
    return out


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

    @property
    def where(self) -> str:
        return self.storage.display()


def prepare_restore(
    location: str | Storage,
    version: int | None = None,
    timestamp: str | int | None = None,
    allow_protocol_downgrade: bool = False,
    owner: Any = None,
) -> RestoreSetup:
    """Check the request, load the latest and target snapshots, and work out the metadata,
    protocol and domain metadata the restore writes."""
    storage = as_storage(location)
    where = storage.display()
    if (version is None) == (timestamp is None):
        raise RestoreError(f"{where}: give exactly one of a version or a timestamp to restore")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise RestoreError(f"{where}: the version to restore must be a non-negative integer, not {version!r}")
    listing = _listing(storage, owner)
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
    target = load_snapshot(storage, target_version, listing)
    check_writable(latest.protocol, f"{where} at version {latest.version}", owner)

    protocol, outcome, note = restore_protocol(latest.protocol, target.protocol, allow_protocol_downgrade)
    check_writable(protocol, f"{where}: the restored protocol", owner)
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
        storage=storage,
        latest=latest,
        target=target,
        target_version=target_version,
        requested_version=version,
        requested_timestamp=ts_text,
        resolution=resolution,
        metadata=metadata,
        protocol=protocol,
        protocol_outcome=outcome,
        protocol_note=note,
        domains=domains,
        notes=notes,
    )


def check_removals(setup: RestoreSetup, num_removes: int) -> None:
    """An append-only table refuses a restore that removes files."""
    if num_removes and setup.latest.metadata.configuration.get("delta.appendOnly", "").strip().lower() == "true":
        raise RestoreError(
            f"{setup.where}: the table is append-only (delta.appendOnly=true) and the restore would remove "
            f"{num_removes} file(s)",
        )


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
) -> RestorePlan:
    """The plan from the file diff: `add_rows` (rows of the target's files) and `remove_rows`
    (rows of the latest's). `find_missing(adds)` returns what missing_files() would (missing
    files, indexes of their adds); it is called after the actions are read from the log, so
    a check started earlier can run meanwhile. `metrics` (or `metrics()`, called after
    find_missing), when given, must be what restore_metrics() would count on the adds left
    after the missing ones."""
    storage, where, latest, target = setup.storage, setup.where, setup.latest, setup.target
    notes = list(setup.notes)
    target_adds, rec_a = log_add_actions(storage, target, add_rows)
    latest_adds, rec_r = log_add_actions(storage, latest, remove_rows)
    adds = [restore_add(a) for a in target_adds]
    now = clock()
    removes = [restore_remove(a, now) for a in latest_adds]
    rebuilt = (len(adds) - rec_a) + (len(removes) - rec_r)
    if rebuilt:
        notes.append(
            f"files: {rebuilt} action(s) were rebuilt from the snapshot without stats or tags "
            f"(their commit or checkpoint no longer holds them)"
        )

    missing: list[str] = []
    if check_files:
        with at_version(f"version {setup.target_version}"):
            missing, bad = find_missing(adds) if find_missing is not None else missing_files(storage, adds)
        if missing and not ignore_missing_files:
            raise _missing_error(where, setup.target_version, missing)
        if bad:
            adds = [a for i, a in enumerate(adds) if i not in bad]
            notes.append(f"files: {len(bad)} missing file(s) of version {setup.target_version} are left out")
    else:
        notes.append("files: the existence of the files to restore was not checked")

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
    owner: Any = None,
) -> RestorePlan:
    """Plan RESTORE TO VERSION `version` or TIMESTAMP `timestamp` on the table's latest version
    (a managed table's as its commit-owner `owner` knows it)."""
    setup = prepare_restore(location, version, timestamp, allow_protocol_downgrade, owner)
    add_rows, remove_rows = diff_files(setup.latest.files, setup.target.files)
    check_removals(setup, remove_rows.num_rows)
    return build_plan(
        setup,
        add_rows,
        remove_rows,
        ignore_missing_files=ignore_missing_files,
        allow_protocol_downgrade=allow_protocol_downgrade,
        check_files=check_files,
        clock=clock,
    )


# --- committing ----------------------------------------------------------------------------------


def _commit_actions(
    storage: Storage, version: int, listing: LogListing | None = None
) -> list[tuple[str, dict[str, Any]]]:
    rel = next((c.path for c in listing.commits if c.version == version), None) if listing else None
    try:
        data = storage.read(rel or commit_name(version))
    except FileNotFoundError as exc:
        raise CorruptLogError(
            f"{storage.display()}: commit {version} disappeared while checking for conflicts"
        ) from exc
    return parse_actions(data, storage.display(rel or commit_name(version)))


def find_conflicts(
    storage: Storage, plan: RestorePlan, versions: range, listing: LogListing | None = None
) -> dict[int, list[str]]:
    """Commits in `versions` that overlap the plan, with why: a file action on a path the plan
    adds or removes, a metaData or protocol action, or a domain the plan writes."""
    paths = {_canonical_path(a["path"]) for a in plan.adds} | {_canonical_path(r["path"]) for r in plan.removes}
    domains = {d["domain"] for d in plan.domains}
    out: dict[int, list[str]] = {}
    for v in versions:
        why: list[str] = []
        for name, body in _commit_actions(storage, v, listing):
            if name in ("metaData", "protocol"):
                why.append(f"changes the {name}")
            elif name in ("add", "remove") and _canonical_path(str(body.get("path"))) in paths:
                why.append(f"{name}s {unquote(str(body.get('path')))}")
            elif name == "domainMetadata" and body.get("domain") in domains:
                why.append(f"writes domain {body.get('domain')}")
        if why:
            out[v] = sorted(set(why))[:5]
    return out


def _find_txn(storage: Storage, listing: Any, after: int, txn_id: str) -> int | None:
    for lf in listing.commits:
        if lf.version > after:
            info = read_commit_info(storage, lf).info or {}
            if info.get("txnId") == txn_id and info.get("operation") == "RESTORE":
                return lf.version
    return None


def find_restore_commit(location: str | Storage, after: int, txn_id: str, owner: Any = None) -> int | None:
    """The version of the RESTORE commit with `txn_id` after version `after`, if any (a
    retried job finds its own earlier commit instead of planning on top of it)."""
    storage = as_storage(location)
    return _find_txn(storage, _listing(storage, owner), after, txn_id)


def approved_change(current: RestorePlan, approved: RestorePlan) -> RestorePlan | None:
    """approved_change_on for an approved plan that still has its file actions: the files
    the head gained since are those the current plan removes and the approved one does not
    (a file active now that the approved plan does not remove was not active at its head,
    or the approved plan would remove it too)."""
    keep = {action_identity(r) for r in approved.removes}
    gained = {action_identity(r) for r in current.removes} - keep
    return approved_change_on(current, approved.fingerprint, approved.read_version, lambda: gained)


def approved_change_on(
    current: RestorePlan, fingerprint: str | None, read_version: int | None, added_since: Callable[[], set[str]]
) -> RestorePlan | None:
    """The plan to commit for an approved restore (the one rule, for every engine), given
    the plan made again on the current head, the approved plan's fingerprint and head, and
    the identities of the files added since that head (asked only when needed): the current
    plan when it makes the same change (same fingerprint); when the head only gained files
    since, the approved change on top of them (the current plan without removing them),
    if that is exactly the approved change; else None (stale)."""
    if current.fingerprint == fingerprint:
        return current
    if read_version is None or current.read_version <= read_version:
        return None
    try:
        added = added_since()
    except (FileNotFoundError, DeltaError, ValueError):
        return None  # a commit we cannot read: let the approver look at the new plan
    removes = [r for r in current.removes if action_identity(r) not in added]
    if not added or len(removes) == len(current.removes):
        return None
    plan = current.replace(removes=removes, read_version=int(read_version))
    plan.fingerprint = plan_fingerprint(plan)
    return plan if plan.fingerprint == fingerprint else None


def files_added_since(location: Storage | str, after: int, upto: int) -> set[str]:
    """Identities of the files added by the commits after..upto (read from the commit files),
    for approved_change_on when the approved plan keeps no file actions."""
    storage = as_storage(location)
    return {
        action_identity(body)
        for v in range(after + 1, upto + 1)
        for name, body in commit_actions(storage, v)
        if name == "add" and isinstance(body.get("path"), str)
    }


def _rebase(plan: RestorePlan, head: Snapshot) -> RestorePlan:
    """The plan's change on `head` (its own head or a newer one): check that every file to
    remove is active and no file to add is, and count the metrics on that head."""
    keys = set(identity_keys(head.files).to_pylist()) if head.num_files else set()
    gone = [r["path"] for r in plan.removes if action_identity(r) not in keys]
    back = [a["path"] for a in plan.adds if action_identity(a) in keys]
    if gone or back:
        raise CommitConflictError(
            f"{plan.location}: the table changed under the restore plan at version {head.version} "
            f"({len(gone)} file(s) to remove are gone, {len(back)} file(s) to add are active already)",
            version=head.version,
        )
    return plan.replace(
        read_version=head.version,
        head_num_files=head.num_files,
        head_size_bytes=head.size_bytes,
        metrics=restore_metrics(plan.adds, plan.removes, head.num_files, head.size_bytes),
    )


def verify_restore(
    storage: Storage, plan: RestorePlan, version: int, head: Snapshot | None = None, owner: Any = None
) -> dict:
    """Read `version` back: its files must be the head's less the removes plus the adds, its
    metadata and protocol the plan's."""
    listing = _listing(storage, owner)
    new = load_snapshot(storage, version, listing)
    head = head if head is not None else load_snapshot(storage, version - 1, listing)
    expected = set(identity_keys(head.files).to_pylist()) if head.num_files else set()
    expected -= {action_identity(r) for r in plan.removes}
    expected |= {action_identity(a) for a in plan.adds}
    actual = set(identity_keys(new.files).to_pylist()) if new.num_files else set()
    metadata_ok = new.metadata == Metadata.from_dict(plan.metadata)
    protocol_ok = _same_protocol(new.protocol, Protocol.from_dict(plan.protocol))
    return {
        "verified": actual == expected and metadata_ok and protocol_ok,
        "numFiles": len(actual),
        "expectedNumFiles": len(expected),
        "missing": sorted(p.split("\x00")[0] for p in expected - actual)[:10],
        "unexpected": sorted(p.split("\x00")[0] for p in actual - expected)[:10],
        "metadataMatches": metadata_ok,
        "protocolMatches": protocol_ok,
    }


def commit_restore(
    location: str | Storage,
    plan: RestorePlan,
    txn_id: str | None = None,
    clock: Callable[[], int] = now_ms,
    recheck_files: bool = True,
    owner: Any = None,
) -> dict[str, Any]:
    """Commit `plan` as the next version; see the module's contract for conflicts and txnId.
    The files to add are checked again (they may have gone while the plan waited), unless
    `recheck_files` is False: for a plan that was made, and checked, just now."""
    storage = as_storage(location)
    where = storage.display()
    txn = txn_id or str(uuid.uuid4())
    last_error: CommitConflictError | None = None
    for _attempt in range(MAX_COMMIT_ATTEMPTS):
        listing = _listing(storage, owner)
        head_version = listing.latest_commit
        if head_version is None or head_version < plan.read_version:
            raise RestoreError(
                f"{where}: the table is at version {head_version}, before the plan's {plan.read_version}"
            )
        done = _find_txn(storage, listing, plan.read_version, txn) if txn_id else None
        if done is not None:
            info = read_commit_info(storage, next(c for c in listing.commits if c.version == done)).info or {}
            check = verify_restore(storage, plan, done, owner=owner)
            return {
                "version": done,
                "alreadyCommitted": True,
                "txnId": txn,
                "readVersion": info.get("readVersion"),
                "targetVersion": plan.target_version,
                "rebasedOver": [],
                "metrics": info.get("operationMetrics") or {},
                "inCommitTimestamp": info.get("inCommitTimestamp"),
                "verified": check["verified"],
                "verification": check,
                "protocolOutcome": plan.protocol_outcome,
                "fingerprint": plan.fingerprint,
            }
        newer = range(plan.read_version + 1, head_version + 1)
        if len(newer):
            conflicts = find_conflicts(storage, plan, newer, listing)
            if conflicts:
                first = min(conflicts)
                detail = "; ".join(f"version {v} {', '.join(w)}" for v, w in sorted(conflicts.items())[:5])
                raise CommitConflictError(
                    f"{where}: the restore planned on version {plan.read_version} conflicts with "
                    f"{'version' if len(conflicts) == 1 else 'versions'} {', '.join(map(str, sorted(conflicts)))}: {detail}",
                    version=first,
                    versions=sorted(conflicts),
                )
        head = load_snapshot(storage, head_version, listing)
        current = _rebase(plan, head)
        if current.files_checked and recheck_files:
            # files may have gone since the plan (a vacuum while it waited for approval)
            with at_version(f"version {current.target_version}"):
                missing, bad = missing_files(storage, current.adds)
            if missing and not current.ignore_missing_files:
                raise _missing_error(where, current.target_version, missing)
            if bad:
                adds = [a for i, a in enumerate(current.adds) if i not in bad]
                current = current.replace(
                    adds=adds,
                    missing_files=sorted(set(current.missing_files) | set(missing)),
                    metrics=restore_metrics(adds, current.removes, head.num_files, head.size_bytes),
                )
        now = clock()
        actions: list[dict[str, Any]] = [{"metaData": current.metadata}, {"protocol": current.protocol}]
        actions += [{"domainMetadata": d} for d in current.domains]
        actions += [{"add": a} for a in current.adds]
        actions += [{"remove": {**r, "deletionTimestamp": now}} for r in current.removes]
        try:
            result = (commit if owner is None else _owner_commit(owner))(
                storage,
                actions,
                "RESTORE",
                {"version": current.requested_version, "timestamp": current.requested_timestamp},
                read_version=head_version,
                is_blind_append=False,
                operation_metrics=current.metrics,
                txn_id=txn,
                clock=lambda now=now: now,
            )
        except CommitConflictError as exc:
            last_error = exc  # another writer won the version: check again on the new head
            continue
        check = verify_restore(storage, current, result.version, head, owner)
        return {
            "version": result.version,
            "alreadyCommitted": False,
            "txnId": txn,
            "readVersion": head_version,
            "targetVersion": current.target_version,
            "rebasedOver": list(newer),
            "metrics": current.metrics,
            "inCommitTimestamp": result.in_commit_timestamp,
            "verified": check["verified"],
            "verification": check,
            "protocol": current.protocol,
            "protocolOutcome": current.protocol_outcome,
            "engineInfo": ENGINE_INFO,
            "fingerprint": current.fingerprint,
            "skippedMissingFiles": current.missing_files[:MAX_LISTED_MISSING],
        }
    raise CommitConflictError(
        f"{where}: gave up committing the restore after {MAX_COMMIT_ATTEMPTS} attempts: other writers keep "
        f"committing first",
        version=last_error.version if last_error else plan.read_version,
    )


def _owner_commit(owner: Any) -> Callable[..., Any]:
    """commit.commit's signature, committing through the managed table's commit-owner."""
    from .managed import commit_via_owner

    def commit_managed(storage: Storage, actions: list[dict[str, Any]], operation: str, params, **kw: Any):
        return commit_via_owner(storage, owner, actions, operation, params, **kw)

    return commit_managed
