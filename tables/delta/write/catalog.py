"""catalogManaged tables as the accepted protocol writes them (the client side of a catalog).

The protocol's "Catalog-managed tables" section, what a Delta client does itself:
- `initial_commit` writes version 0 of a new table (creation-only enablement: reader 3,
  writer 7, `catalogManaged` in both feature lists, In-Commit Timestamps on), put-if-absent,
  at the location a catalog allocated; the catalog then registers it (createTable).
- `stage_commit` writes a proposed commit to `_delta_log/_staged_commits/<v>.<uuid>.json`
  (commitInfo first, a fresh `txnId`, an ICT after the previous one); the catalog ratifies
  it or not. A staged file alone is not a version.
- `publish` copies ratified commits to `_delta_log/<v>.json` in order, put-if-absent (an
  identical file already there is success: publishing is idempotent and anyone may do it).
- `check_maintenance` is the maintenance rule: checkpoints and log compaction only for
  published versions, a version checksum for any ratified one, everything else (VACUUM,
  OPTIMIZE, REORG, metadata cleanup) refused unless the catalog allows it.
Filesystem writers are refused by commit.refuse_managed (the table is managed).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tables.delta.errors import CommitConflictError, ManagedTableError
from tables.delta.log.listing import LOG_DIR, STAGED_COMMITS_DIR, commit_name, ratified_commit_path, staged_commit_name
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.write.commit import ENGINE_INFO, commit_bytes, new_table_metadata, now_ms

FEATURE = "catalogManaged"
ICT_FEATURE = "inCommitTimestamp"
TABLE_ID_KEY = "io.unitycatalog.tableId"  # the catalog's table id, a real metaData.configuration entry
_ICT_ON = "delta.enableInCommitTimestamps"

# maintenance a client may run without the catalog's permission (the protocol's only exceptions)
ALWAYS_ALLOWED = frozenset({"CHECKPOINT", "LOG COMPACTION", "CHECKSUM"})
PUBLISHED_ONLY = frozenset({"CHECKPOINT", "LOG COMPACTION"})


@dataclass(frozen=True, slots=True)
class StagedCommit:
    """A proposed commit written under `_delta_log/_staged_commits/`: what a catalog is told."""

    version: int
    file_name: str  # the basename, as the catalog stores and returns it
    size: int
    modification_time: int
    in_commit_timestamp: int
    txn_id: str

    @property
    def path(self) -> str:
        return f"{STAGED_COMMITS_DIR}/{self.file_name}"


def catalog_protocol(reader_features: tuple[str, ...] = (), writer_features: tuple[str, ...] = ()) -> dict[str, Any]:
    """The protocol action of a catalogManaged table (reader 3, writer 7, ICT supported)."""
    readers = sorted({FEATURE, *reader_features})
    writers = sorted({FEATURE, ICT_FEATURE, *reader_features, *writer_features})
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": readers, "writerFeatures": writers}


def initial_commit(
    location: str | Storage,
    table_id: str,
    schema: dict[str, Any] | str,
    *,
    partition_columns: tuple[str, ...] | list[str] = (),
    properties: dict[str, str] | None = None,
    protocol: dict[str, Any] | None = None,
    name: str | None = None,
    description: str | None = None,
    clock: Callable[[], int] = now_ms,
) -> dict[str, Any]:
    """Write version 0 of a new catalogManaged table; CommitConflictError when one exists.

    Enablement happens only here, at creation (the protocol defines no way to turn the feature
    on for an existing table through a catalog). `protocol` may add features; it must keep
    catalogManaged on both lists and In-Commit Timestamps.
    """
    storage = as_storage(location)
    proto = protocol or catalog_protocol()
    if FEATURE not in (proto.get("readerFeatures") or ()) or FEATURE not in (proto.get("writerFeatures") or ()):
        raise ManagedTableError(f"{storage.display()}: the protocol must name {FEATURE} as reader and writer feature")
    if ICT_FEATURE not in (proto.get("writerFeatures") or ()):
        raise ManagedTableError(f"{storage.display()}: {FEATURE} requires the {ICT_FEATURE} writer feature")
    now = clock()
    config = {**(properties or {}), _ICT_ON: "true", TABLE_ID_KEY: table_id}
    metadata = new_table_metadata(table_id, name, description, schema, partition_columns, config, now)
    info = {
        "timestamp": now,
        "operation": "CREATE TABLE",
        "operationParameters": {"partitionBy": orjson.dumps(list(partition_columns)).decode()},
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    data = commit_bytes([{"protocol": proto}, {"metaData": metadata}], info, now)
    if not storage.put(commit_name(0), data):
        raise CommitConflictError(f"{storage.display()}: a Delta table exists here already", version=0)
    return {"version": 0, "inCommitTimestamp": now, "protocol": proto, "metadata": metadata, "size": len(data)}


def stage_commit(
    location: str | Storage,
    version: int,
    actions: list[dict[str, Any]],
    operation: str,
    *,
    previous_ict: int | None,
    read_version: int | None = None,
    operation_parameters: dict[str, Any] | None = None,
    txn_id: str | None = None,
    user_name: str | None = None,
    clock: Callable[[], int] = now_ms,
) -> StagedCommit:
    """Write a proposed commit of `version` to `_delta_log/_staged_commits/<v>.<uuid>.json`.

    commitInfo comes first with inCommitTimestamp = max(now, previous ICT + 1) and a txnId (a
    fresh UUID unless given): the writer requirements of the feature. The file name's UUID is
    new for every attempt, so two writers never collide on a staged file.
    """
    storage = as_storage(location)
    now = clock()
    ict = now if previous_ict is None else max(now, previous_ict + 1)
    txn = txn_id or str(uuid.uuid4())
    info: dict[str, Any] = {
        "timestamp": now,
        "operation": operation,
        "operationParameters": operation_parameters or {},
        "readVersion": version - 1 if read_version is None else read_version,
        "isolationLevel": "Serializable",
        "isBlindAppend": all(("add" in a or "commitInfo" in a) for a in actions),
        "engineInfo": ENGINE_INFO,
        "txnId": txn,
    }
    if user_name:
        info["userName"] = user_name
    data = commit_bytes(actions, info, ict)
    rel = staged_commit_name(version, str(uuid.uuid4()), STAGED_COMMITS_DIR)
    if not storage.put(rel, data):  # a UUID collision: never overwrite someone's proposal
        raise CommitConflictError(f"{storage.display(rel)} exists already", version=version)
    head = storage.head(rel)
    return StagedCommit(version, rel.rpartition("/")[2], head.size, head.modification_time, ict, txn)


def publish(location: str | Storage, commits: list[tuple[int, str]]) -> int | None:
    """Copy ratified staged commits [(version, file name)] to `_delta_log/<v>.json`, in version
    order; the newest version published (None for none). An identical file there already is
    success; a different one is an error naming it (the log was written around the catalog)."""
    storage = as_storage(location)
    done = None
    for version, file_name in sorted(commits):
        data = storage.read(f"{STAGED_COMMITS_DIR}/{file_name}")
        target = commit_name(version)
        if not storage.put(target, data) and storage.read(target) != data:
            raise ManagedTableError(
                f"{storage.display(target)} exists with other content than the ratified commit {file_name}"
            )
        done = version
    return done


def check_maintenance(operation: str, version: int, published_version: int, *, allowed: frozenset[str] = frozenset()):
    """Raise ManagedTableError unless a catalogManaged table allows `operation` at `version`.

    Checkpoints and log compaction need `_delta_log/<version>.json` (published); a checksum
    may be written for any ratified version; anything else needs the catalog's permission
    (`allowed`), which Unity Catalog never grants in this protocol version.
    """
    op = operation.upper()
    if op in PUBLISHED_ONLY and version > published_version:
        raise ManagedTableError(
            f"{op.lower()} of version {version} is not allowed: only published versions (up to "
            f"{published_version}) may be checkpointed or compacted on a {FEATURE} table"
        )
    if op not in ALWAYS_ALLOWED and op not in allowed:
        raise ManagedTableError(f"{op} is not allowed on a {FEATURE} table unless its catalog permits it")


def staged_name_ok(file_name: str, version: int) -> bool:
    """Whether a catalog may accept `file_name` as the staged file of `version`: a plain
    `<v>.<uuid>.json` basename (no directory, no `..`), its version the one proposed."""
    return "/" not in file_name and ratified_commit_path(f"{STAGED_COMMITS_DIR}/{file_name}", version)


__all__ = [
    "FEATURE",
    "LOG_DIR",
    "TABLE_ID_KEY",
    "StagedCommit",
    "catalog_protocol",
    "check_maintenance",
    "initial_commit",
    "publish",
    "stage_commit",
    "staged_name_ok",
]
