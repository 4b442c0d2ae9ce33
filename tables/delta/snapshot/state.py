"""Snapshot of a table at a version: protocol, metadata, active files, txns, domains.

Loading checks the reader side of the protocol first and refuses, naming the feature, any
table this reader does not implement: it never returns state it may have got wrong.

Managed tables (owner.py): with an owner client the segment is built on `ratified_listing`
(the backfilled log merged with what the owner ratified); without one the snapshot holds the
backfilled commits only and says so in `staleness_warning`. Filesystem tables pay nothing for
this: the owner is asked only when one is given and the table names one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.errors import (
    CorruptLogError,
    DeltaError,
    LogGapError,
    ManagedTableError,
    StateReconstructionError,
    VersionNotFoundError,
)
from tables.delta.log.actions import Metadata, Protocol, dv_unique_id, read_json_actions
from tables.delta.log.checkpoint import CheckpointReader, read_checkpoint_others
from tables.delta.log.jsonline import loads_line
from tables.delta.log.listing import (
    LogFile,
    LogListing,
    LogSegment,
    backfilled_path,
    build_segment,
    list_log,
    list_staged,
    merge_ratified,
    ratified_log_file,
    tail_listing,
)
from tables.delta.log.model import (  # noqa: F401 (re-exported: their home before log.model)
    MAX_READER_VERSION,
    SUPPORTED_READER_FEATURES,
    check_reader_protocol,
)
from tables.delta.managed.owner import CommitOwner, ManagedConfig, OwnerView, managed_config
from tables.delta.snapshot.checkpoint_check import check_hint
from tables.delta.snapshot.replay import NonFileState, reconcile_files
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.text_bounds import echoed_path, echoed_values


@dataclass(slots=True)
class Snapshot:
    location: str
    version: int
    protocol: Protocol
    metadata: Metadata
    files: pa.Table  # active adds, file batch schema
    tombstones: pa.Table
    txns: dict[str, dict[str, Any]]
    domains: dict[str, dict[str, Any]]
    segment: LogSegment
    listing: LogListing = field(repr=False)
    managed: ManagedConfig | None = None  # the commit-owner the table names at this version
    staleness_warning: str | None = None  # set when un-backfilled commits may be missing

    @property
    def owner_view(self) -> OwnerView | None:
        """What the owner added (None when it was not asked)."""
        return self.listing.owner_view

    @property
    def num_files(self) -> int:
        return self.files.num_rows

    @property
    def size_bytes(self) -> int:
        return int(pc.sum(self.files.column("size")).as_py() or 0) if self.files.num_rows else 0

    def file_paths(self) -> list[str]:
        """Active file paths, URL-decoded (decoding only the ones that need it)."""
        # chunk by chunk: combining them first would copy every path once more
        out: list[str] = []
        for chunk in self.files.column("path").chunks:
            paths = chunk.to_pylist()
            if _has_byte(chunk, b"%"):
                paths = [unquote(p) if "%" in p else p for p in paths]
            if out:
                out += paths
            else:
                out = paths
        return out

    def summary(self, files: bool = True) -> dict[str, Any]:
        """The state as JSON (`delta snapshot --json`, the web's version pages): version,
        protocol, metadata, size, set transactions and domain metadata; `files` adds every
        live file; on a managed table, its managed-commit state too."""
        md = self.metadata
        out: dict[str, Any] = {
            "version": self.version,
            "protocol": self.protocol.to_dict(),
            "metadata": md.summary(),
            "numFiles": self.num_files,
            "sizeBytes": self.size_bytes,
        }
        if files:
            out["files"] = self.file_dicts()
        out["setTransactions"] = list(self.txns.values())
        out["domainMetadata"] = list(self.domains.values())
        if self.managed is not None:  # only on managed tables: the contract of others is unchanged
            out["managed"] = self.managed.to_dict()
            out["stalenessWarning"] = self.staleness_warning
            out["owner"] = self.owner_view.to_dict() if self.owner_view is not None else None
        return out

    def file_dicts(self, offset: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Active files as JSON-ready dicts (path decoded, deletion vector with its id; the log's
        strings bounded as text_bounds shows them)."""
        t = self.files.slice(offset, limit) if (offset or limit is not None) else self.files
        out = []
        for row in t.select(["path", "size", "partitionValues", "modificationTime", "deletionVector"]).to_pylist():
            row["path"] = echoed_path(unquote(row["path"]) if "%" in row["path"] else row["path"])
            row["partitionValues"] = echoed_values(row["partitionValues"])
            if row["deletionVector"] is not None:
                dv = row["deletionVector"]
                row["deletionVector"] = {**echoed_values(dv), "uniqueId": echoed_path(dv_unique_id(dv))}
            out.append(row)
        return out


def _has_byte(strings: pa.Array, byte: bytes) -> bool:
    """Whether any string holds `byte`: one scan of the data buffer (20x faster than
    match_substring, which visits the strings one by one). A null's bytes count too: a
    false positive only costs the slow path."""
    if len(strings) == 0:
        return False
    large = pa.types.is_large_string(strings.type) or pa.types.is_large_binary(strings.type)
    width = 8 if large else 4
    _validity, offsets, data = strings.buffers()
    offs = np.frombuffer(offsets, np.int64 if large else np.int32, len(strings) + 1, strings.offset * width)
    lo, hi = int(offs[0]), int(offs[-1])
    if data is None or hi <= lo:
        return False
    raw = np.frombuffer(data, np.uint8, hi - lo, lo)
    # in pieces into one small scratch mask: a mask as big as the data costs more in fresh
    # pages than the comparison itself
    step = 1 << 18
    scratch = np.empty(min(step, len(raw)), dtype=bool)
    for i in range(0, len(raw), step):
        piece = raw[i : i + step]
        if np.equal(piece, byte[0], out=scratch[: len(piece)]).any():
            return True
    return False


_HEAD_BYTES = 1 << 16


def _actions_in(data: bytes, name: str, limit: int | None = None, file: str | None = None) -> list[dict[str, Any]]:
    """`name` actions of a commit found by their marker, within the first `limit` bytes. A line
    holding the marker that is not JSON: skipped (the full parse reports it), or, given the
    commit's `file` (no full parse follows), a CorruptLogError naming the file and the line."""
    out = []
    marker = f'"{name}"'.encode()
    pos = data.find(marker, 0, limit)
    while pos != -1:
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        end = len(data) if end == -1 else end
        try:
            obj = loads_line(data[start:end], "")
        except CorruptLogError:
            if file is not None:
                loads_line(data[start:end], file, bytes(data[:start]).count(b"\n") + 1)  # raises, naming both
            obj = None  # the full parse reports it with file and line
        if isinstance(obj, dict) and isinstance(obj.get(name), dict):
            out.append(obj[name])
        pos = data.find(marker, end, limit)
    return out


def _metadata_in(data: bytes, limit: int | None = _HEAD_BYTES) -> list[dict[str, Any]]:
    """metaData actions starting in the first `limit` bytes of a commit (writers put them
    first; load_snapshot checks against the full parse and re-reads when one was missed)."""
    return _actions_in(data, "metaData", limit)


def _partition_keys(known: list[Metadata], found: list[dict[str, Any]]) -> list[str]:
    """Every partitionValues key the segment's metadata versions use, in first-seen order."""
    keys: list[str] = []
    for m in known + [Metadata.from_dict(d) for d in found]:
        keys.extend(k for k in m.partition_keys() if k not in keys)
    return keys


_MAP_ABOVE = 4 << 20


def read_commit_bytes(storage: Storage, path: str, size: int = 0) -> Any:
    """A commit's content: bytes, or a memory map for big files (see read_json_actions).

    A ratified commit whose staged file is gone was backfilled meanwhile (and its staged copy
    cleaned up): it is read from `_delta_log/<v>.json`, the same content."""
    try:
        return storage.read_mapped(path) if size > _MAP_ABOVE else storage.read(path)
    except FileNotFoundError as exc:
        alt = backfilled_path(path)
        if alt is not None:
            try:
                return storage.read(alt)
            except FileNotFoundError:
                pass
        raise CorruptLogError(f"{storage.display(path)}: commit file disappeared while reading", file=path) from exc


def read_commits(storage: Storage, commits: list[LogFile]) -> list[Any]:
    """The content of each commit, in order. A remote store fetches them all at once
    (`read_many`: concurrent requests, not one round trip after another); a local one reads
    them one by one (big commits memory-mapped). A commit missing from the bulk read is read
    again alone, which finds a ratified commit's backfilled copy or names the file."""
    remote = storage.remote
    if remote and len(commits) > 1:
        try:
            return storage.read_many([c.path for c in commits])
        except FileNotFoundError:
            pass
    return [read_commit_bytes(storage, c.path, 0 if remote else c.size) for c in commits]


def ratified_listing(
    storage: Storage, owner: CommitOwner, listing: LogListing | None = None, config: TableConfig | None = None
) -> LogListing:
    """The log listing with the owner's ratified, un-backfilled commits merged in.

    List first, then ask (the seed's order): the backfilled log says whether the table is
    managed and by whom; the owner is asked for commits after the listed latest; see
    log.merge_ratified for the race and the trust rules. A filesystem table comes back
    unchanged (the owner is not asked); so does a listing that was merged already.
    `config`: the caller's config of `listing` (not read again).
    """
    listing = listing if listing is not None else list_log(storage)
    if listing.owner_merged:
        return listing
    cfg = config if config is not None else _config_before_gap(storage, listing)
    managed = cfg.managed
    if managed is None:
        return listing
    owner_name = getattr(owner, "name", None) or "commit-owner"
    if managed.owner_name and owner_name != managed.owner_name:
        raise ManagedTableError(
            f"{storage.display()}: the table names commit-owner '{managed.owner_name}', not '{owner_name}'",
            owner=managed.owner_name,
        )
    base = listing.latest_backfilled
    # a catalog's copy of a version wins over a published file: ask it for every commit it still
    # stores (it stores only unpublished ones, so the answer stays short), not just the newer ones
    start = 0 if base is None or managed.flavor.catalog else base + 1
    answer = owner.get_commits(managed.table_conf(storage.location), start, None)
    who = f"commit-owner '{owner_name}'"
    ratified = [
        ratified_log_file(c.version, c.path, c.size, c.modification_time, answer.latest_table_version, who)
        for c in answer.commits
    ]
    merged, relisted = merge_ratified(
        storage,
        listing,
        ratified,
        answer.latest_table_version,
        owner_is_authoritative=managed.flavor.catalog,
        owner=who,
    )
    merged.owner_view = OwnerView(
        owner=owner_name,
        latest_ratified=answer.latest_table_version,
        backfilled_version=merged.latest_backfilled,
        unbackfilled=tuple(c.version for c in merged.commits if not c.backfilled),
        relisted=relisted,
    )
    return merged


def _config_before_gap(storage: Storage, listing: LogListing) -> TableConfig:
    """The table config that says whether (and by whom) the table is managed. Published files
    may have a gap a catalog fills (a writer published above the catalog's latest version,
    which the catalog then makes readers ignore): the config then comes from the commits
    before the gap, so the catalog is asked before the gap is an error."""
    try:
        return load_table_config(storage, listing)
    except LogGapError as exc:
        first = min(exc.details.get("missing") or [0])
        head = LogListing(
            [c for c in listing.commits if c.version < first],
            {v: f for v, f in listing.checkpoints.items() if v < first},
            [c for c in listing.compactions if c.end_version is not None and c.end_version < first],
            listing.staged,
        )
        if not head.commits:
            raise
        cfg = load_table_config(storage, head)
        if cfg.managed is None or not cfg.managed.flavor.catalog:
            raise  # only a catalog's word can fill a gap
        return cfg


def _with_owner_hint(exc: VersionNotFoundError, storage: Storage, listing: LogListing) -> VersionNotFoundError:
    """A version missing from a managed table read without its owner may just be un-backfilled."""
    if listing.owner_merged:
        return exc
    try:
        managed = load_table_config(storage, listing).managed
    except DeltaError:
        return exc
    if managed is None:
        return exc
    who = f"commit-owner '{managed.owner_name}'" if managed.owner_name else "its catalog"
    return VersionNotFoundError(
        f"{exc.message}; the table is managed by {who}, which alone knows the versions not yet backfilled",
        **exc.details,
    )


def staleness_warning(storage: Storage, managed: ManagedConfig | None, version: int) -> str | None:
    """Why the latest snapshot of a managed table read without its owner may be stale (one
    listing of the staging directory, for managed tables only)."""
    if managed is None:
        return None
    pending = [f.version for f in list_staged(storage) if f.version > version]
    who = f"commit-owner '{managed.owner_name}'" if managed.owner_name else "its catalog"
    text = (
        f"{storage.display()}: {managed.feature} table; without asking {who} this snapshot holds only the commits "
        f"backfilled to _delta_log/ (up to version {version}) and may be stale"
    )
    if pending:
        lo, hi = min(pending), max(pending)
        span = f"version {lo}" if lo == hi else f"versions {lo}-{hi}"
        text += (
            f"; {len(pending)} proposed commit file(s) for {span} wait in {managed.flavor.staged_dir}/ "
            f"(only the owner knows which are ratified)"
        )
    return text


def _refuse_damaged_commit(storage: Storage, segment: LogSegment, bulk: list[Any] | None) -> None:
    """Where a segment's replay found no protocol or no metaData: the first of its commits that
    is empty or holds a line that is not JSON (cut short, overwritten), named with its file and
    line as the full parse names it: that is why, not the version asked for. Nothing: the log
    really holds none (the caller says so)."""
    for i, c in enumerate(segment.commits):
        data = bulk[i] if bulk is not None else read_commit_bytes(storage, c.path)
        name = storage.display(c.path)
        if not len(data):
            raise CorruptLogError(f"{name}: the commit file of version {c.version} is empty", file=name)
        for lineno, line in enumerate(bytes(data).split(b"\n"), 1):
            if line.strip():
                loads_line(line, name, lineno)  # raises CorruptLogError naming the file and line


def _readable_config(state: NonFileState, where: str) -> ManagedConfig | None:
    """Check that the replayed state has a protocol and metadata this reader can read; its
    managed-commit configuration, if any."""
    if state.protocol is None:
        raise StateReconstructionError(f"{where}: the log holds no protocol action", missing="protocol")
    if state.metadata is None:
        raise StateReconstructionError(f"{where}: the log holds no metaData action", missing="metaData")
    check_reader_protocol(state.protocol, where)
    return managed_config(state.protocol, state.metadata, where)


@contextmanager
def _settled_on_failure(checkpoint: CheckpointReader | None) -> Iterator[None]:
    """On a failure, wait for the checkpoint reads started on threads before raising it."""
    try:
        yield
    except BaseException:
        if checkpoint is not None:
            checkpoint.settle()
        raise


def load_snapshot(
    location: str | os.PathLike[str] | Storage,
    version: int | None = None,
    listing: LogListing | None = None,
    owner: CommitOwner | None = None,
) -> Snapshot:
    """The table's snapshot at `version` (the latest when None).

    With `owner`, a managed table's un-backfilled commits are read too (ratified_listing);
    without it, the latest snapshot of a managed table carries a `staleness_warning`.
    """
    storage = as_storage(location)
    if owner is not None:
        listing = ratified_listing(storage, owner, listing)
    elif listing is None and version is None:
        # the latest state needs only the log from its latest checkpoint on: one GET of the
        # hint and a listing of the tail, not a listing of every commit the table ever had
        listing = tail_listing(storage)
    listing = listing or list_log(storage)
    try:
        segment = build_segment(storage, listing, version)
    except VersionNotFoundError as exc:
        raise _with_owner_hint(exc, storage, listing) from exc
    state = NonFileState()
    cp_others: list[tuple[str, dict[str, Any]]] = []
    checkpoint = CheckpointReader(storage, segment.checkpoint) if segment.checkpoint else None
    with _settled_on_failure(checkpoint):
        if checkpoint is not None:
            # the adds and removes are decoded on threads while the rest of the log is read
            checkpoint.start_reading_files()
            cp_others = checkpoint.others()
            checkpoint.start_reading_files(cp_others)
            for name, body in cp_others:
                state.apply(segment.checkpoint[0].version, name, body)
        commit_data = [
            (storage.display(c.path), c.version, data)
            for c, data in zip(segment.commits, read_commits(storage, segment.commits), strict=True)
        ]
        head_metas = [m for _p, _v, data in commit_data for m in _metadata_in(data)]
        keys = _partition_keys([state.metadata] if state.metadata else [], head_metas)
        batch = read_json_actions(commit_data, keys)
        metas = [body for _v, name, body in batch.others if name == "metaData"]
        if len(metas) != len(head_metas):
            # a metaData action beyond the head of its commit: parse again with all its keys
            full_keys = _partition_keys([state.metadata] if state.metadata else [], metas)
            if full_keys != keys:
                keys = full_keys
                batch = read_json_actions(commit_data, keys)
        where = f"{storage.display()} at version {segment.version}"
        for v, name, body in batch.others:
            state.apply(v, name, body)
        managed = _readable_config(state, where)
        warning = None
        if managed is not None and version is None and listing.owner_view is None:
            warning = staleness_warning(storage, managed, segment.version)
        tables = [batch.files]
        if checkpoint is not None:
            tables.insert(0, checkpoint.file_actions(cp_others, keys))
            check_hint(storage, listing, segment.checkpoint, tables[0])  # free: counts what was read
        files = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        active, tombstones = reconcile_files(files)
    return Snapshot(
        location=str(storage.location),
        version=segment.version,
        protocol=state.protocol,
        metadata=state.metadata,
        files=active,
        tombstones=tombstones,
        txns=state.txns,
        domains=state.domains,
        segment=segment,
        listing=listing,
        managed=managed,
        staleness_warning=warning,
    )


@dataclass(slots=True)
class TableConfig:
    """Protocol and metadata at a version, without the file list (cheap on big tables)."""

    version: int
    protocol: Protocol
    metadata: Metadata
    segment: LogSegment
    managed: ManagedConfig | None = None


def load_table_config(
    storage: Storage, listing: LogListing, version: int | None = None, owner: CommitOwner | None = None
) -> TableConfig:
    """Protocol and metadata at `version` (latest when None); with `owner`, a managed table's
    un-backfilled commits count (ratified_listing)."""
    if owner is not None:
        listing = ratified_listing(storage, owner, listing)
    segment = build_segment(storage, listing, version)
    state = NonFileState()
    if segment.checkpoint:
        for name, body in read_checkpoint_others(storage, segment.checkpoint, only=("protocol", "metaData")):
            state.apply(segment.checkpoint[0].version, name, body)
    bulk = read_commits(storage, segment.commits) if storage.remote else None
    for i, c in enumerate(segment.commits):
        data = bulk[i] if bulk is not None else read_commit_bytes(storage, c.path)
        for name in ("protocol", "metaData"):
            for body in _actions_in(data, name, file=storage.display(c.path)):
                state.apply(c.version, name, body)
    where = f"{storage.display()} at version {segment.version}"
    if state.protocol is None or state.metadata is None:
        _refuse_damaged_commit(storage, segment, bulk)  # the cause, when a commit is damaged
    managed = _readable_config(state, where)
    return TableConfig(segment.version, state.protocol, state.metadata, segment, managed)
