"""Writing managed tables: commits through the owner, take-over, hand-back, creation.

- `commit_via_owner` is commit.commit for a managed table: the same commitInfo (first, with
  an inCommitTimestamp after the previous one, which the seed requires), but the version is
  ratified by the owner instead of a put-if-absent in `_delta_log/`. A conflict raises
  CommitConflictError naming the owner's latest version; a refusal CommitRefusedError with
  the owner's reason.
- `take_over` is the seed's two-phase ownership change: the owner records its commitment
  (`register_table`), then one commit that installs the owner and turns In-Commit
  Timestamps on is written directly to `_delta_log/` with put-if-absent — that write is the
  commit point; telling the owner afterwards is cleanup (it also notices by itself).
- `hand_back` asks the owner to ratify the commit that removes it; the owner backfills
  everything, stops accepting commits and writes that commit to `_delta_log/` itself.
- `create_managed_table` is a take-over of a table without commits: version 0 is written
  with put-if-absent, so two creators cannot both win.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import orjson

from tables.delta.errors import CommitConflictError, CommitRefusedError, DeltaError, LogGapError, ManagedTableError
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.log.commitinfo import read_commit_info
from tables.delta.log.ict import ICT_FEATURES, ict_config
from tables.delta.log.listing import LOG_DIR, LogListing, build_segment, list_log, tail_listing
from tables.delta.managed.owner import (
    MANAGED_COMMIT,
    CommitConflict,
    CommitOutcome,
    CommitOwner,
    CommitRefused,
    CommitResponse,
    TableConf,
    managed_config,
    parse_commit,
)
from tables.delta.snapshot.state import TableConfig, check_reader_protocol, load_table_config, ratified_listing
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.write.commit import (
    ENGINE_INFO,
    CommitResult,
    after_actions,
    commit_bytes,
    new_table_metadata,
    next_in_commit_timestamp,
    now_ms,
    upgraded_protocol,
    write_commit,
)

_ICT_ON = "delta.enableInCommitTimestamps"
_ICT_VERSION = "delta.inCommitTimestampEnablementVersion"
_ICT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"


def _storage(location: str | Storage) -> Storage:
    return as_storage(location)


def _owner_name(owner: CommitOwner) -> str:
    return getattr(owner, "name", None) or "commit-owner"


def writer_state(storage: Storage, owner: CommitOwner) -> tuple[LogListing, TableConfig, int | None]:
    """What a writer of a managed table needs, reading the log once: the listing with the
    owner's ratified commits merged in, the table's config at the latest ratified version, and
    that version's ICT when a commit read here says it (None: read it from the commit).

    The published log's config (latest checkpoint and the commits after it) is read before the
    owner is asked and handed to the merge; then only the ratified commits after it are read.
    A catalog's copy of a published version is the same bytes (publishing checks that; a
    different size means otherwise and the merged log is read whole). A catalog whose latest
    version is below the published files, or a gap, is rare: the merged log is read then too.
    """
    listing = tail_listing(storage)
    try:
        base = load_table_config(storage, listing)
    except LogGapError:
        merged = ratified_listing(storage, owner, listing)
        return merged, load_table_config(storage, merged), None
    merged = ratified_listing(storage, owner, listing, config=base)
    if merged is listing:  # a filesystem table: the owner was not asked
        return listing, base, None
    published = {c.version: c for c in base.segment.commits}
    if merged.latest_commit is None or merged.latest_commit < base.version:
        return merged, load_table_config(storage, merged), None
    for c in merged.commits:
        before = published.get(c.version)
        if before is not None and c.path != before.path and c.size != before.size:
            return merged, load_table_config(storage, merged), None
    protocol, metadata = base.protocol, base.metadata
    ict = None
    for c in merged.commits:
        if c.version <= base.version:
            continue
        parsed = parse_commit(storage.read(c.path))
        if parsed.protocol is not None:
            protocol = Protocol.from_dict(parsed.protocol)
        if parsed.metadata is not None:
            metadata = Metadata.from_dict(parsed.metadata)
        ict = parsed.in_commit_timestamp
    if merged.latest_commit == base.version:
        return merged, base, None
    where = f"{storage.display()} at version {merged.latest_commit}"
    check_reader_protocol(protocol, where)
    segment = build_segment(storage, merged)
    return (
        merged,
        TableConfig(segment.version, protocol, metadata, segment, managed_config(protocol, metadata, where)),
        ict,
    )


def next_managed_ict(storage: Storage, listing: LogListing, cfg: TableConfig, now: int) -> int:
    """max(now, previous commit's ICT + 1), the previous commit being the latest ratified one
    (possibly not backfilled); its file time stands in when it has no ICT."""
    prev = next((c for c in reversed(listing.commits) if c.version == cfg.version), None)
    if prev is None:
        return now
    prev_ict = read_commit_info(storage, prev).in_commit_timestamp
    return max(now, (prev_ict if prev_ict is not None else prev.modification_time) + 1)


def outcome_result(outcome: CommitOutcome, where: str, ict: int | None) -> CommitResult:
    """The owner's answer as commit.commit reports it: a result, or the error it raises."""
    if isinstance(outcome, CommitResponse):
        return CommitResult(outcome.commit.version, ict, outcome.commit.path)
    if isinstance(outcome, CommitConflict):
        raise CommitConflictError(
            f"{where}: version {outcome.version} was ratified for another writer first; the owner's latest "
            f"version is {outcome.winning_version}" + (f" ({outcome.message})" if outcome.message else ""),
            version=outcome.version,
            winning_version=outcome.winning_version,
        )
    if isinstance(outcome, CommitRefused):
        raise CommitRefusedError(
            f"{where}: the commit-owner refused version {outcome.version}: {outcome.reason}",
            version=outcome.version,
            reason=outcome.reason,
            refusal=outcome.code,
        )
    raise DeltaError(f"{where}: the commit-owner answered {type(outcome).__name__}, not a commit outcome")


def commit_via_owner(
    location: str | Storage,
    owner: CommitOwner,
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
    """Commit `actions` to a managed table as version latest+1, ratified by `owner`.

    The latest version is the owner's (un-backfilled commits included). The commit must keep
    the table managed by the same owner, with In-Commit Timestamps on (hand_back removes the
    owner). Every commit carries a txnId (`txn_id` or a fresh UUID): a writer that lost the
    owner's answer can look for it.
    """
    storage = _storage(location)
    where = storage.display()
    listing, cfg, previous_ict = writer_state(storage, owner)
    managed = cfg.managed
    if managed is None:
        raise ManagedTableError(f"{where}: a filesystem table (no commit-owner); commit with commit.commit")
    if read_version is not None and read_version != cfg.version:
        raise CommitConflictError(
            f"{where}: the table is at version {cfg.version}, not {read_version} as planned",
            version=cfg.version,
        )
    protocol, metadata = after_actions(cfg, actions)
    after = managed_config(protocol, metadata, f"{where} at version {cfg.version + 1}")
    if after is None or after.owner_name != managed.owner_name or after.feature != managed.feature:
        raise ManagedTableError(
            f"{where}: the commit would change the table's owner ({managed.owner_name}); hand the table back "
            f"with managed.hand_back instead"
        )
    if not after.ict_enabled:
        raise ManagedTableError(
            f"{where}: {managed.feature} requires In-Commit Timestamps; the commit would leave them off"
        )
    now = clock()
    ict = max(now, previous_ict + 1) if previous_ict is not None else next_managed_ict(storage, listing, cfg, now)
    info: dict[str, Any] = {
        "timestamp": now,
        "operation": operation,
        "operationParameters": operation_parameters or {},
        "readVersion": cfg.version,
        "isolationLevel": "Serializable",
        "isBlindAppend": is_blind_append,
        "engineInfo": ENGINE_INFO,
        "txnId": txn_id or str(uuid.uuid4()),
    }
    if user_name:  # who made the change (commitInfo.userName, as DESCRIBE HISTORY shows it)
        info["userName"] = user_name
    if operation_metrics is not None:
        info["operationMetrics"] = operation_metrics
    data = commit_bytes(actions, info, ict)
    outcome = owner.commit(managed.table_conf(storage.location), cfg.version + 1, data)
    return outcome_result(outcome, where, ict)


def _notify(owner: CommitOwner, table_conf: TableConf, version: int) -> bool:
    """Post-commit cleanup of an ownership change: let the owner see `<version>.json`. Losing
    this call loses nothing (the owner resolves it on its next call)."""
    try:
        owner.backfill_to_version(table_conf, version)
    except DeltaError:
        return False
    return True


def _owner_properties(owner: CommitOwner, conf: dict[str, str]) -> dict[str, str]:
    assert MANAGED_COMMIT.owner_key is not None and MANAGED_COMMIT.conf_key is not None
    return {MANAGED_COMMIT.owner_key: _owner_name(owner), MANAGED_COMMIT.conf_key: orjson.dumps(conf).decode()}


def take_over(
    location: str | Storage,
    owner: CommitOwner,
    *,
    owner_conf: dict[str, str] | None = None,
    clock: Callable[[], int] = now_ms,
) -> dict[str, Any]:
    """Make `owner` the commit-owner of a filesystem table (seed: two-phase ownership change).

    Phase one: the owner records its commitment and returns its conf. Phase two: one commit
    adds the managedCommit feature and the owner properties and turns In-Commit Timestamps on
    (with the enablement version and timestamp), written with put-if-absent straight to
    `_delta_log/`: if another writer took that version, the take-over did not happen
    (CommitConflictError) and the owner forgets it. A no-op when `owner` owns the table.
    """
    storage = _storage(location)
    where = storage.display()
    cfg = load_table_config(storage, list_log(storage))
    if cfg.managed is not None:
        if cfg.managed.owner_name == _owner_name(owner):
            return {
                "changed": False,
                "version": cfg.version,
                "owner": cfg.managed.owner_name,
                "ownerConf": cfg.managed.owner_conf,
            }
        raise ManagedTableError(
            f"{where}: the table is a {cfg.managed.describe()} already", owner=cfg.managed.owner_name
        )
    if cfg.protocol.min_writer_version > 7:
        raise ManagedTableError(f"{where}: writer version {cfg.protocol.min_writer_version} is not supported")
    version = cfg.version + 1
    feature = MANAGED_COMMIT.features[0]
    conf = owner.register_table(
        TableConf(storage.location, _owner_name(owner), dict(owner_conf or {}), feature), cfg.version
    )
    table_conf = TableConf(storage.location, _owner_name(owner), conf, feature)
    before = ict_config(cfg)
    protocol = upgraded_protocol(cfg.protocol, (feature,) if before.enabled else (ICT_FEATURES[0], feature))
    now = clock()
    ict = next_in_commit_timestamp(storage, cfg, now, enabling=not before.enabled)
    props: dict[str, str] = {}
    if not before.enabled:
        props.update({_ICT_ON: "true", _ICT_VERSION: str(version), _ICT_TIMESTAMP: str(ict)})
    props.update(_owner_properties(owner, conf))
    metadata = {**cfg.metadata.to_dict(), "configuration": {**cfg.metadata.configuration, **props}}
    info = {
        "timestamp": now,
        "operation": "SET TBLPROPERTIES",
        "operationParameters": {"properties": orjson.dumps(props).decode()},
        "readVersion": cfg.version,
        "isolationLevel": "Serializable",
        "isBlindAppend": False,
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    try:
        write_commit(storage, version, [{"protocol": protocol.to_dict()}, {"metaData": metadata}], info, ict)
    except CommitConflictError as exc:
        _notify(owner, table_conf, version)  # the owner sees the version is not its own and forgets it
        raise CommitConflictError(
            f"{where}: version {version} was committed by another writer first; the take-over did not happen",
            version=version,
        ) from exc
    return {
        "changed": True,
        "version": version,
        "owner": _owner_name(owner),
        "ownerConf": conf,
        "inCommitTimestamp": ict,
        "ictEnabled": not before.enabled,
        "ownerNotified": _notify(owner, table_conf, version),
        "protocol": protocol.to_dict(),
    }


def hand_back(location: str | Storage, owner: CommitOwner, *, clock: Callable[[], int] = now_ms) -> dict[str, Any]:
    """Make a managed table a filesystem table again (seed: converting to a filesystem table).

    The commit that removes the feature and the owner properties goes to the owner, which
    backfills every ratified commit, stops accepting new ones, and writes that commit to
    `_delta_log/` itself. In-Commit Timestamps stay on. Afterwards the whole history is in
    `_delta_log/` and any filesystem reader sees the latest version. A no-op on a filesystem
    table.
    """
    storage = _storage(location)
    where = storage.display()
    listing, cfg, previous_ict = writer_state(storage, owner)
    managed = cfg.managed
    if managed is None:
        return {"changed": False, "version": cfg.version}
    if managed.flavor.catalog:
        raise ManagedTableError(f"{where}: a {managed.feature} table cannot be handed back to the filesystem here")
    features = set(managed.flavor.features)
    protocol = Protocol(
        cfg.protocol.min_reader_version,
        cfg.protocol.min_writer_version,
        cfg.protocol.reader_features,
        tuple(f for f in (cfg.protocol.writer_features or ()) if f not in features),
    )
    config = {k: v for k, v in cfg.metadata.configuration.items() if k not in managed.flavor.keys}
    metadata = {**cfg.metadata.to_dict(), "configuration": config}
    now = clock()
    ict = max(now, previous_ict + 1) if previous_ict is not None else next_managed_ict(storage, listing, cfg, now)
    info = {
        "timestamp": now,
        "operation": "DROP FEATURE",
        "operationParameters": {"featureName": managed.feature, "truncateHistory": "false"},
        "readVersion": cfg.version,
        "isolationLevel": "Serializable",
        "isBlindAppend": False,
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    data = commit_bytes([{"protocol": protocol.to_dict()}, {"metaData": metadata}], info, ict)
    table_conf = managed.table_conf(storage.location)
    result = outcome_result(owner.commit(table_conf, cfg.version + 1, data), where, ict)
    after = load_table_config(storage, list_log(storage))
    if after.version < result.version:
        # the owner ratified the hand-back without writing it to _delta_log/ itself
        owner.backfill_to_version(table_conf, result.version)
        after = load_table_config(storage, list_log(storage))
    if after.version < result.version or after.managed is not None:
        raise ManagedTableError(
            f"{where}: the owner accepted the hand-back as version {result.version} but {LOG_DIR}/ ends at "
            f"version {after.version}; backfill it before writing to the table"
        )
    return {
        "changed": True,
        "version": result.version,
        "owner": managed.owner_name,
        "inCommitTimestamp": ict,
        "protocol": protocol.to_dict(),
        "previousVersion": cfg.version,
    }


def create_managed_table(
    location: str | Storage,
    owner: CommitOwner,
    schema: dict[str, Any] | str,
    *,
    partition_columns: tuple[str, ...] | list[str] = (),
    configuration: dict[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
    owner_conf: dict[str, str] | None = None,
    clock: Callable[[], int] = now_ms,
) -> dict[str, Any]:
    """Create an empty table managed by `owner` from version 0 (In-Commit Timestamps on).

    Version 0 is written with put-if-absent straight to `_delta_log/`, so a racing creator
    (managed or not) makes this fail with CommitConflictError, and the owner forgets it.
    """
    storage = _storage(location)
    where = storage.display()
    if storage.is_dir(LOG_DIR) and any(
        f.path.endswith(".json") or ".checkpoint." in f.path for f in storage.list_dir(LOG_DIR)
    ):
        raise CommitConflictError(f"{where}: a Delta table exists here already", version=0)
    feature = MANAGED_COMMIT.features[0]
    conf = owner.register_table(TableConf(storage.location, _owner_name(owner), dict(owner_conf or {}), feature), -1)
    table_conf = TableConf(storage.location, _owner_name(owner), conf, feature)
    now = clock()
    config = {**(configuration or {}), _ICT_ON: "true", **_owner_properties(owner, conf)}
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": [ICT_FEATURES[0], feature]}
    metadata = new_table_metadata(str(uuid.uuid4()), name, description, schema, partition_columns, config, now)
    info = {
        "timestamp": now,
        "operation": "CREATE TABLE",
        "operationParameters": {
            "partitionBy": orjson.dumps(list(partition_columns)).decode(),
            "description": description,
            "isManaged": "false",
            "properties": orjson.dumps(config).decode(),
        },
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    try:
        write_commit(storage, 0, [{"protocol": protocol}, {"metaData": metadata}], info, now)
    except CommitConflictError as exc:
        _notify(owner, table_conf, 0)
        raise CommitConflictError(f"{where}: another writer created the table first", version=0) from exc
    return {
        "changed": True,
        "version": 0,
        "owner": _owner_name(owner),
        "ownerConf": conf,
        "inCommitTimestamp": now,
        "ownerNotified": _notify(owner, table_conf, 0),
        "protocol": protocol,
        "tableId": metadata["id"],
    }
