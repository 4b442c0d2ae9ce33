"""Writing a commit: commitInfo first, In-Commit Timestamps, put-if-absent, conflicts.

A commit is one file `_delta_log/<version>.json` that appears whole or not at all (a
temporary file hard-linked into place, which fails if the version exists). A lost race is
returned as CommitConflictError naming the version, never an overwrite.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tables.delta.errors import CommitConflictError, DeltaError, ManagedTableError
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.log.commitinfo import read_commit_info
from tables.delta.log.ict import ICT_FEATURES, ict_config
from tables.delta.log.listing import LOG_DIR, commit_name, list_log
from tables.delta.managed.owner import CATALOG_MANAGED
from tables.delta.snapshot.state import TableConfig, load_table_config
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage

ENGINE_INFO = "deltaweb/0.1.0"

# Features a legacy writer version implies; upgrading to writer 7 must list them explicitly.
_LEGACY_WRITER_FEATURES = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}
_LEGACY_READER_FEATURES = {2: ("columnMapping",)}


@dataclass(frozen=True, slots=True)
class CommitResult:
    version: int
    in_commit_timestamp: int | None
    path: str


def new_table_metadata(
    table_id: str,
    name: str | None,
    description: str | None,
    schema: str | dict[str, Any],
    partition_columns: list[str] | tuple[str, ...],
    configuration: dict[str, str],
    created_time: int,
) -> dict[str, Any]:
    """The metaData action of a table's version 0 (Parquet data, the schema as JSON text)."""
    return {
        "id": table_id,
        "name": name,
        "description": description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema if isinstance(schema, str) else orjson.dumps(schema).decode(),
        "partitionColumns": list(partition_columns),
        "configuration": configuration,
        "createdTime": created_time,
    }


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def next_in_commit_timestamp(storage: Storage, cfg: TableConfig, now: int, enabling: bool) -> int:
    """max(now, previous ICT + 1); for the enabling commit, after the previous file time."""
    listing = list_log(storage)
    prev = next((c for c in reversed(listing.commits) if c.version == cfg.version), None)
    if prev is None:
        return now
    if enabling:
        return max(now, prev.modification_time + 1)
    prev_ict = read_commit_info(storage, prev).in_commit_timestamp
    return max(now, (prev_ict if prev_ict is not None else prev.modification_time) + 1)


def commit_bytes(actions: list[dict[str, Any]], commit_info: dict[str, Any], in_commit_timestamp: int | None) -> bytes:
    """A commit file's content: commitInfo first (with the ICT first in it), then the actions."""
    info = dict(commit_info)
    if in_commit_timestamp is not None:
        info = {"inCommitTimestamp": in_commit_timestamp, **info}
    lines = [orjson.dumps({"commitInfo": info})]
    lines += [orjson.dumps(a) for a in actions if "commitInfo" not in a]
    return b"\n".join(lines) + b"\n"


def refuse_managed(cfg: TableConfig, where: str) -> None:
    """A managed table's writers must commit through its owner, never to `_delta_log/`."""
    if cfg.managed is not None:
        raise ManagedTableError(
            f"{where}: {cfg.managed.describe()}; commits go through the owner (managed.commit_via_owner), "
            f"not to {LOG_DIR}/",
            owner=cfg.managed.owner_name,
        )


def refuse_catalog_enablement(protocol: Protocol, where: str) -> None:
    """catalogManaged is enabled only when a table is created through its catalog (version 0
    written at the location the catalog allocated); a commit may not turn it on later."""
    for feature in CATALOG_MANAGED.features:
        if protocol.has_writer_feature(feature) or feature in (protocol.reader_features or ()):
            raise ManagedTableError(
                f"{where}: {feature} can only be enabled when the table is created through its catalog, "
                f"not by a commit to an existing table"
            )


def write_commit(
    storage: Storage,
    version: int,
    actions: list[dict[str, Any]],
    commit_info: dict[str, Any],
    in_commit_timestamp: int | None,
) -> CommitResult:
    """Write `version` with commitInfo first; CommitConflictError if it exists already."""
    rel = commit_name(version)
    try:
        storage.put_if_absent(rel, commit_bytes(actions, commit_info, in_commit_timestamp))
    except CommitConflictError as exc:
        raise CommitConflictError(
            f"{storage.display()}: version {version} was committed by another writer first", version=version
        ) from exc
    return CommitResult(version, in_commit_timestamp, rel)


def after_actions(cfg: TableConfig, actions: list[dict[str, Any]]) -> tuple[Protocol, Metadata]:
    """The protocol and metadata the table has once `actions` are committed on top of `cfg`."""
    protocol, metadata = cfg.protocol, cfg.metadata
    for a in actions:
        if "protocol" in a:
            protocol = Protocol.from_dict(a["protocol"])
        if "metaData" in a:
            metadata = Metadata.from_dict(a["metaData"])
    return protocol, metadata


def commit(
    location: str | Storage,
    actions: list[dict[str, Any]],
    operation: str,
    operation_parameters: dict[str, Any] | None = None,
    *,
    read_version: int | None = None,
    is_blind_append: bool = False,
    operation_metrics: dict[str, str] | None = None,
    txn_id: str | None = None,
    clock: Callable[[], int] = now_ms,
    user_name: str | None = None,
) -> CommitResult:
    """Commit `actions` as version latest+1 of the table (ICT when the result has it on)."""
    storage = as_storage(location)
    cfg = load_table_config(storage, list_log(storage))
    refuse_managed(cfg, storage.display())
    if read_version is not None and read_version != cfg.version:
        raise CommitConflictError(
            f"{storage.display()}: the table is at version {cfg.version}, not {read_version} as planned",
            version=cfg.version,
        )
    protocol, metadata = after_actions(cfg, actions)
    refuse_catalog_enablement(protocol, storage.display())
    before = ict_config(cfg)
    after = ict_config(TableConfig(cfg.version + 1, protocol, metadata, cfg.segment))
    now = clock()
    ict = next_in_commit_timestamp(storage, cfg, now, enabling=not before.enabled) if after.enabled else None
    info: dict[str, Any] = {
        "timestamp": now,
        "operation": operation,
        "operationParameters": operation_parameters or {},
        "readVersion": cfg.version,
        "isolationLevel": "Serializable",
        "isBlindAppend": is_blind_append,
        "engineInfo": ENGINE_INFO,
    }
    if operation_metrics is not None:
        info["operationMetrics"] = operation_metrics
    if user_name:  # who made the change (commitInfo.userName, as DESCRIBE HISTORY shows it)
        info["userName"] = user_name
    if txn_id is not None:
        info["txnId"] = txn_id
    return write_commit(storage, cfg.version + 1, actions, info, ict)


def upgraded_protocol(protocol: Protocol, add_writer: tuple[str, ...]) -> Protocol:
    """The protocol on writer version 7 with the legacy-implied features listed explicitly."""
    writer = set(protocol.writer_features or ())
    if protocol.min_writer_version < 7:
        for v, feats in _LEGACY_WRITER_FEATURES.items():
            if protocol.min_writer_version >= v:
                writer.update(feats)
    writer.update(add_writer)
    reader_features = protocol.reader_features
    if protocol.min_reader_version == 3:
        reader_features = tuple(sorted(set(reader_features or ())))
    return Protocol(protocol.min_reader_version, 7, reader_features, tuple(sorted(writer)))


def enable_ict(location: str | Storage, clock: Callable[[], int] = now_ms) -> dict[str, Any]:
    """Turn In-Commit Timestamps on (one commit), recording the enablement properties when
    the table has history; a no-op when they are on already."""
    storage = as_storage(location)
    cfg = load_table_config(storage, list_log(storage))
    state = ict_config(cfg)
    if state.enabled:
        return {"changed": False, "version": cfg.version, "ict": state.to_dict()}
    refuse_managed(cfg, storage.display())
    if cfg.protocol.min_writer_version > 7:
        raise DeltaError(f"{storage.display()}: writer version {cfg.protocol.min_writer_version} is not supported")
    protocol = upgraded_protocol(cfg.protocol, (ICT_FEATURES[0],))
    version = cfg.version + 1
    now = clock()
    ict = next_in_commit_timestamp(storage, cfg, now, enabling=True)
    conf = dict(cfg.metadata.configuration)
    conf["delta.enableInCommitTimestamps"] = "true"
    # version 0 starts with ICT; a table with history records where ICT starts
    conf["delta.inCommitTimestampEnablementVersion"] = str(version)
    conf["delta.inCommitTimestampEnablementTimestamp"] = str(ict)
    metadata = {**cfg.metadata.to_dict(), "configuration": conf}
    props = {
        k: conf[k] for k in ("delta.enableInCommitTimestamps", *(k for k in conf if "inCommitTimestampEnablement" in k))
    }
    info = {
        "timestamp": now,
        "operation": "SET TBLPROPERTIES",
        "operationParameters": {"properties": orjson.dumps(props).decode()},
        "readVersion": cfg.version,
        "isolationLevel": "Serializable",
        "isBlindAppend": False,
        "engineInfo": ENGINE_INFO,
    }
    result = write_commit(storage, version, [{"protocol": protocol.to_dict()}, {"metaData": metadata}], info, ict)
    return {
        "changed": True,
        "version": result.version,
        "inCommitTimestamp": ict,
        "ict": {"enabled": True, "enablementVersion": version, "enablementTimestamp": ict},
        "protocol": protocol.to_dict(),
    }
