"""Keeping a version: `keep_version` writes a new table whose single version 0 is version N of
another, so that no VACUUM or log cleanup of the source can take N away.

The new table holds N's protocol and metadata, its set transactions and domain metadata, and
its add actions as their commits wrote them (stats, tags, partition values, deletion vectors,
row tracking). Its files are placed by the storage: hard links on one local file system (no new
data bytes), copies where links cannot be made, server-side copies inside one object store. Its
log is version 0 (commitInfo first, with N's In-Commit Timestamp when the table has them on and
the source's own commitInfo kept in it) and a checkpoint of it, so the kept table is complete
even to a reader that starts from the checkpoint, and a log cleanup of the kept table has
nothing older to take.

Every path the source's log names is hostile: each is resolved through the source storage
(confined to its roots) and placed under a key of the kept table that cannot leave it (a path
that is absolute, climbs out with '..' or lands in `_delta_log/` is placed under `_kept/`
instead, and its add says so). Pure: no Django, no Spark (`delta keep` runs it).
"""

from __future__ import annotations

import hashlib
import posixpath
import random
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson

from tables.delta.errors import DeltaError, KeepTargetError, NotVersionedError, StorageError
from tables.delta.log.checkpoint import write_actions_checkpoint
from tables.delta.log.commitinfo import CommitInfoRead, bounded, read_commit_info
from tables.delta.log.ict import TIMESTAMP_KEYS, VERSION_KEYS, ict_config
from tables.delta.log.listing import LOG_DIR, commit_name
from tables.delta.snapshot.dv import deletion_vector_file, dv_location, z85_encode
from tables.delta.snapshot.files import log_add_actions
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.api import Capability, Storage
from tables.delta.storage.opening import as_storage, place_file
from tables.delta.write.keep_place import check_keep_place

KEPT_DIR = "_kept"  # where files whose own path cannot be kept go (a name VACUUM leaves alone)
OPERATION = "KEEP VERSION"
ENGINE_INFO = "deltaweb/0.1.0"


@dataclass(slots=True)
class KeepResult:
    """What a keep wrote: where, which version, and how each file got there."""

    source: str
    version: int
    into: str
    files: int = 0  # data files of the version
    deletion_vectors: int = 0  # DV files placed (inline ones need none)
    bytes: int = 0  # the version's data bytes (its adds' sizes)
    placed: dict[str, int] = field(default_factory=dict)  # link / copy / server-copy / present -> files
    bytes_copied: int = 0  # bytes written anew (copies), 0 when every file was linked
    relocated: int = 0  # files placed under _kept/ because their own path could not be kept
    commit_timestamp: int | None = None
    in_commit_timestamp: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "version": self.version,
            "into": self.into,
            "files": self.files,
            "deletionVectors": self.deletion_vectors,
            "bytes": self.bytes,
            "placed": dict(sorted(self.placed.items())),
            "bytesCopied": self.bytes_copied,
            "relocated": self.relocated,
            "commitTimestamp": self.commit_timestamp,
            "inCommitTimestamp": self.in_commit_timestamp,
        }


def kept_key(key: str) -> tuple[str, bool]:
    """The key a source file gets in the kept table and whether it moved: a relative key that
    stays inside the table and out of its log keeps its place (so adds keep their paths and
    'u' deletion vectors their descriptors); anything else goes under `_kept/`, named by a
    hash of where it came from."""
    norm = posixpath.normpath(key) if key else ""
    inside = (
        norm
        and "://" not in key
        and not key.startswith("/")
        and not norm.startswith("../")
        and norm not in (".", "..")
        and norm.split("/", 1)[0] not in (LOG_DIR, KEPT_DIR)
    )
    if inside:
        return norm, False
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    name = posixpath.basename(key.rstrip("/")) or "file"
    return f"{KEPT_DIR}/{digest}/{name[:150]}", True


def _check_target(source: Storage, dest: Storage) -> None:
    """The kept table must be new, outside the source (files inside the source's root that
    its log does not name are what the source's VACUUM deletes) and outside every other table
    and allowed root (`check_keep_place`)."""
    inner, outer = dest.display().rstrip("/"), source.display().rstrip("/")
    if inner == outer or inner.startswith(outer + "/"):
        raise KeepTargetError(
            f"{dest.display()} lies inside the table it keeps a version of; that table's VACUUM would delete it"
        )
    check_keep_place(dest.location)
    try:
        existing = list(dest.list_from(LOG_DIR))
    except FileNotFoundError:
        return
    if any(not posixpath.basename(f.path).startswith(".") for f in existing):
        raise KeepTargetError(f"{dest.display()} holds a Delta log already; a kept version goes to a new location")


class _Placer:
    """Plans where each source file goes in the kept table (once each), then places them all,
    in parallel (an object store's copies are one round trip each), counting how."""

    THREADS = 16

    def __init__(self, source: Storage, dest: Storage, result: KeepResult) -> None:
        self.source, self.dest, self.result = source, dest, result
        self.todo: dict[str, tuple[str, int | None]] = {}  # into -> (source key, size if known)

    def plan(self, key: str, size: int | None, into: str | None = None) -> tuple[str, bool]:
        moved = False
        if into is None:
            into, moved = kept_key(key)
        if into not in self.todo:
            self.todo[into] = (key, size)
            self.result.relocated += int(moved)
        return into, moved

    def data_file(self, add: dict[str, Any]) -> dict[str, Any]:
        key = self.source.resolve(add["path"])
        into, moved = self.plan(key, add.get("size") if isinstance(add.get("size"), int) else None)
        out = dict(add)
        if moved:
            out["path"] = quote(into, safe="/")
        dv = add.get("deletionVector")
        if isinstance(dv, dict) and dv.get("storageType") in ("u", "p"):
            out["deletionVector"] = self.deletion_vector(dv)
        out["dataChange"] = True
        return out

    def deletion_vector(self, dv: dict[str, Any]) -> dict[str, Any]:
        if dv.get("storageType") == "u":
            where = deletion_vector_file(dv) or ""
            _into, moved = kept_key(where)
            if not moved:  # kept at its place: the descriptor stays as it is
                self.plan(where, None)
                return dv
            key = where
        else:
            key = self.source.resolve(dv_location(dv))
        # an absolute DV (or one whose place cannot be kept) becomes a relative one beside
        # the data: a new file name from a UUID, the descriptor made for it
        name = uuid.uuid5(uuid.NAMESPACE_URL, key)
        self.plan(key, None, f"deletion_vector_{name}.bin")
        return {**dv, "storageType": "u", "pathOrInlineDv": z85_encode(name.bytes)}

    def place_all(self) -> None:
        def one(item: tuple[str, tuple[str, int | None]]) -> tuple[str, str, int | None]:
            into, (key, size) = item
            return into, place_file(self.source, key, self.dest, into), size

        items = list(self.todo.items())
        threads = 1 if not self.dest.remote else min(self.THREADS, max(1, len(items)))
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for into, how, size in pool.map(one, items):
                self.result.placed[how] = self.result.placed.get(how, 0) + 1
                if posixpath.basename(into).startswith("deletion_vector_"):
                    self.result.deletion_vectors += 1
                if how == "copy":
                    self.result.bytes_copied += size if size is not None else self.dest.head(into).size


class _Holder:
    """Object Lock instead of copies: a legal hold on the exact version of each object the
    version needs, and adds that name those objects by their absolute URIs (a shallow clone of
    the source). Nothing is copied; the held versions outlive any delete of their keys."""

    THREADS = 16

    def __init__(self, source: Storage, bucket: Any, result: KeepResult) -> None:
        self.source, self.bucket, self.result = source, bucket, result
        self.held: dict[str, str] = {}  # object path -> held version id

    def _absolute(self, key: str) -> tuple[str, str]:
        """(URI as an add names it, object path) of a source key in the held bucket."""
        bucket_uri, obj = self.source.object_ref(key)
        if bucket_uri.rstrip("/") != self.bucket.where:
            raise StorageError(f"{self.source.display(key)} is not in the table's bucket; it cannot be held with it")
        return quote(self.source.uri(key), safe="/:"), obj

    def adds(self, adds: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out, wanted = [], set()
        for add in adds:
            uri, obj = self._absolute(self.source.resolve(add["path"]))
            wanted.add(obj)
            kept = {**add, "path": uri, "dataChange": True}
            dv = add.get("deletionVector")
            if isinstance(dv, dict) and dv.get("storageType") in ("u", "p"):
                where = deletion_vector_file(dv) if dv["storageType"] == "u" else dv_location(dv)
                dv_uri, dv_obj = self._absolute(self.source.resolve(where) if dv["storageType"] == "p" else where)
                wanted.add(dv_obj)
                kept["deletionVector"] = {**dv, "storageType": "p", "pathOrInlineDv": dv_uri}
            out.append(kept)
        objs = sorted(wanted)
        with ThreadPoolExecutor(max_workers=self.THREADS) as pool:
            futures = {obj: pool.submit(self.bucket.hold_current, obj) for obj in objs}
        failed = next((f.exception() for f in futures.values() if f.exception() is not None), None)
        if failed is not None:
            # a hold refused (no permission, say): the ones placed are released, none left behind
            for obj, f in futures.items():
                if f.exception() is None:
                    self.bucket.release(obj, f.result())
            raise failed
        self.held = {obj: f.result() for obj, f in futures.items()}
        self.result.placed["hold"] = len(self.held)
        return out

    def record(self, dest: Storage) -> None:
        """The holds, beside the kept log (a name engines and VACUUM leave alone): what a
        removed pin releases."""
        body = {"bucket": self.bucket.where, "objects": [{"key": k, "versionId": v} for k, v in self.held.items()]}
        dest.put(f"{KEPT_DIR}/holds.json", orjson.dumps(body), overwrite=True)


def _lock_bucket(source: Storage) -> Any | None:
    """The source's bucket when it keeps versions under Object Lock (holds can keep them)."""
    from tables.delta.storage.versions import versioned_bucket

    try:
        bucket = versioned_bucket(source)
    except (NotVersionedError, StorageError):
        return None
    lock = getattr(bucket, "object_lock", None)
    return bucket if lock is not None and lock() else None


def _source_commit_info(source: Storage, snap: Snapshot) -> CommitInfoRead | None:
    lf = next((c for c in snap.listing.commits if c.version == snap.version), None)
    if lf is None:
        return None  # the version's commit is gone (its state came from a checkpoint)
    try:
        return read_commit_info(source, lf)
    except (DeltaError, OSError):
        return None


def _commit_time(snap: Snapshot, info: CommitInfoRead | None) -> int:
    if info is not None and info.timestamp is not None:
        return info.timestamp
    files = [c for c in snap.listing.commits if c.version == snap.version] or (snap.segment.checkpoint or [])
    return files[0].modification_time if files else 0


def _head_actions(snap: Snapshot, ict_on: bool) -> list[dict[str, Any]]:
    """protocol, metaData (the ICT enablement properties dropped when ICT is on: the kept
    table has it from its first version), txns and live domain metadata."""
    metadata = {k: v for k, v in snap.metadata.to_dict().items() if v is not None}
    if ict_on:
        conf = dict(metadata.get("configuration") or {})
        for k in VERSION_KEYS + TIMESTAMP_KEYS:
            conf.pop(k, None)
        metadata["configuration"] = conf
    actions: list[dict[str, Any]] = [{"protocol": snap.protocol.to_dict()}, {"metaData": metadata}]
    actions += [{"txn": dict(t)} for t in snap.txns.values()]
    actions += [{"domainMetadata": dict(d)} for d in snap.domains.values() if not d.get("removed")]
    return actions


def keep_version(
    source: Storage | str,
    version: int,
    into: Storage | str,
    hold: bool | None = False,
    on_placed: Callable[[KeepResult], None] | None = None,
) -> KeepResult:
    """Write `into` as a new Delta table whose single version 0 equals `version` of `source`:
    files placed (linked, server-copied or copied), then version 0, then its checkpoint.
    With `hold` (None: when the source's bucket has Object Lock), legal holds on the exact
    object versions instead of copies, the adds naming them by absolute URI.
    KeepTargetError when `into` is a table already, lies inside one or is an allowed root
    (`check_keep_place`); the source's errors (a version not
    there any more, a path outside its roots) before anything is written. `on_placed` is
    called once the files are placed (or held), before the log is written: a kept table
    without a log is one whose writer stopped there (`discard_kept` clears it)."""
    src, dest = as_storage(source), as_storage(into)
    snap = load_snapshot(src, version)
    _check_target(src, dest)
    adds, _found = log_add_actions(src, snap, snap.files)
    for a in adds:  # every path the log names is checked before anything is written
        src.resolve(a["path"])
        dv = a.get("deletionVector")
        if isinstance(dv, dict) and dv.get("storageType") == "p":
            src.resolve(dv_location(dv))
    info = _source_commit_info(src, snap)
    ict_on = ict_config(snap).applies(snap.version)
    result = KeepResult(src.display(), snap.version, dest.display())
    bucket = _lock_bucket(src) if hold is None or hold else None
    if hold and bucket is None:
        raise StorageError(f"{src.display()}: the bucket has no Object Lock; its objects cannot be held")
    holder = _Holder(src, bucket, result) if bucket is not None else None
    if holder is not None:
        kept_adds = holder.adds(adds)
        holder.record(dest)  # before the log: a writer stopped now leaves holds discard_kept finds
    else:
        placer = _Placer(src, dest, result)
        kept_adds = [placer.data_file(a) for a in adds]
        placer.place_all()
    if on_placed is not None:
        on_placed(result)
    result.files = len(kept_adds)
    result.bytes = sum(a["size"] for a in kept_adds if isinstance(a.get("size"), int))
    result.commit_timestamp = _commit_time(snap, info)
    result.in_commit_timestamp = info.in_commit_timestamp if info is not None and ict_on else None
    if ict_on and result.in_commit_timestamp is None:
        result.in_commit_timestamp = result.commit_timestamp
    commit_info: dict[str, Any] = {
        "timestamp": result.commit_timestamp,
        "operation": OPERATION,
        "operationParameters": {"source": src.display(), "version": snap.version},
        "engineInfo": ENGINE_INFO,
        "isBlindAppend": False,
    }
    if info is not None and info.info is not None:
        commit_info["sourceCommitInfo"] = bounded(info.info)
    if ict_on:
        commit_info = {"inCommitTimestamp": result.in_commit_timestamp, **commit_info}
    actions = _head_actions(snap, ict_on) + [{"add": a} for a in kept_adds]
    dest.make_dir(LOG_DIR)
    body = b"\n".join(orjson.dumps(a) for a in [{"commitInfo": commit_info}, *actions]) + b"\n"
    dest.put_if_absent(commit_name(0), body)
    if Capability.SET_MTIME in dest.capabilities and result.commit_timestamp:
        # the kept version keeps its time: TIMESTAMP AS OF on the kept table finds it
        dest.set_mtime(commit_name(0), result.commit_timestamp)
    write_actions_checkpoint(dest, 0, actions)
    return result


SETTLE_OPERATION = "KEEP VERSION (HELD OBJECTS COPIED)"


def _held_copies(src: Storage, adds: list[dict[str, Any]], held: dict[str, str]) -> list[tuple]:
    """(source add, what: "path" or "dv", object, held version id, key in the kept table) for
    each file a held kept version names: its data file under its own relative key, its
    deletion vector beside the data under a name from a UUID (a relative 'u' descriptor), so
    that the settled kept table names no object outside itself."""
    out = []
    for add in adds:
        targets = [("path", add["path"])]
        dv = add.get("deletionVector")
        if isinstance(dv, dict) and dv.get("storageType") == "p":
            targets.append(("dv", dv_location(dv)))
        for what, path in targets:
            rel = src.resolve(path)
            _bucket, obj = src.object_ref(rel)
            if obj not in held:
                raise StorageError(f"{src.display(rel)} is named by the kept version but holds no legal hold")
            if what == "path":
                key, _moved = kept_key(rel)
            else:
                key = f"deletion_vector_{uuid.uuid5(uuid.NAMESPACE_URL, obj)}.bin"
            out.append((add, what, obj, held[obj], key))
    return out


def _read_holds(dest: Storage) -> dict[str, str] | None:
    """{object path: held version id} a kept table's `_kept/holds.json` records; None when it
    was kept without holds."""
    try:
        holds = orjson.loads(dest.read(f"{KEPT_DIR}/holds.json"))
    except FileNotFoundError:
        return None
    return {str(h["key"]): str(h["versionId"]) for h in holds.get("objects") or ()}


HELD_LOOKED_AT = 256  # held objects looked at per look (one listing of the key's versions each)


def held_gone(source: Storage | str, into: Storage | str, live: set[str] | None = None,
              limit: int = HELD_LOOKED_AT) -> list[str]:  # fmt: skip
    """The held objects of the kept table `into` that are no longer current in the source's
    bucket (a delete marker above the held version, or another version written over it),
    whatever the source's log says: a VACUUM, a checkpoint and a log cleanup by any engine may
    have run since. Only objects not in `live` (object paths the source's latest version
    names: those no VACUUM deletes) are looked at, at most `limit` of them (at random), in
    parallel. Empty
    when nothing held is gone, when `into` holds nothing, or once it was settled."""
    from tables.delta.storage.versions import versioned_bucket

    src, dest = as_storage(source), as_storage(into)
    held = _read_holds(dest)
    if not held or load_snapshot(dest).version != 0:
        return []
    candidates = sorted(k for k in held if live is None or k not in live)
    if len(candidates) > limit:  # a sample: a VACUUM deletes every file it may at once
        candidates = random.sample(candidates, max(0, limit))
    if not candidates:
        return []
    bucket = versioned_bucket(src)

    def gone(key: str) -> bool:
        latest = next((v for v in bucket.key_versions(key) if v.is_latest), None)
        return latest is None or latest.delete_marker or latest.version_id != held[key]

    with ThreadPoolExecutor(max_workers=min(_Holder.THREADS, len(candidates))) as pool:
        return [k for k, g in zip(candidates, pool.map(gone, candidates), strict=True) if g]


def settle_held(source: Storage | str, into: Storage | str, now_ms: int | None = None) -> dict[str, Any] | None:
    """A version kept by legal holds, once the source's VACUUM put delete markers above the
    objects it names: each held object version copied server-side (CopyObject of that exact
    version) into the kept table, and version 1 committed naming the copies by paths relative
    to the kept table (and its checkpoint), so any engine opens the kept table as it is, with
    the pin store's options alone. The holds stay until the pin is removed. None when `into`
    has no holds or was settled already; else {"version": 1, "copied", "bytes"}."""
    from tables.delta.storage.versions import versioned_bucket

    src, dest = as_storage(source), as_storage(into)
    held = _read_holds(dest)
    if held is None:
        return None
    snap = load_snapshot(dest)
    if snap.version != 0:
        return None  # settled before
    adds, _found = log_add_actions(dest, snap, snap.files)
    copies = _held_copies(src, adds, held)
    bucket = versioned_bucket(src)
    to_bucket_uri, _obj = dest.object_ref(KEPT_DIR)
    to_bucket = to_bucket_uri.split("://", 1)[1].split("/", 1)[0]
    with ThreadPoolExecutor(max_workers=_Holder.THREADS) as pool:
        jobs = [(obj, vid, to_bucket, dest.object_ref(key)[1]) for _a, _w, obj, vid, key in copies]
        list(pool.map(lambda j: bucket.copy_version(*j), jobs))
    now = int(time.time() * 1000) if now_ms is None else now_ms
    moved: dict[int, dict[str, Any]] = {}
    for add, what, _obj, _vid, key in copies:
        new = moved.setdefault(id(add), {**add, "dataChange": False})
        if what == "path":
            new["path"] = quote(key, safe="/=")
        else:  # a relative deletion vector: its UUID in the descriptor, the file beside the data
            name = uuid.UUID(key[len("deletion_vector_") : -len(".bin")])
            new["deletionVector"] = {
                **add["deletionVector"],
                "storageType": "u",
                "pathOrInlineDv": z85_encode(name.bytes),
            }
    new_adds = [moved.get(id(a), a) for a in adds]
    removes = [
        {"path": a["path"], "deletionTimestamp": now, "dataChange": False, "extendedFileMetadata": True,
         "partitionValues": a.get("partitionValues") or {}, "size": a.get("size"),
         **({"deletionVector": a["deletionVector"]} if a.get("deletionVector") else {})}
        for a in adds
    ]  # fmt: skip
    info: dict[str, Any] = {
        "timestamp": now,
        "operation": SETTLE_OPERATION,
        "operationParameters": {"copied": len(copies)},
        "engineInfo": ENGINE_INFO,
    }
    if ict_config(snap).applies(1):
        first = _source_commit_info(dest, snap)
        before = first.in_commit_timestamp if first is not None and first.in_commit_timestamp else 0
        info = {"inCommitTimestamp": max(now, before + 1), **info}
    body = [{"commitInfo": info}, *({"remove": r} for r in removes), *({"add": a} for a in new_adds)]
    dest.put_if_absent(commit_name(1), b"\n".join(orjson.dumps(a) for a in body) + b"\n")
    write_actions_checkpoint(dest, 1, _head_actions(snap, False) + [{"add": a} for a in new_adds])
    return {"version": 1, "copied": len(copies), "bytes": sum(int(a.get("size") or 0) for a in adds)}


def discard_kept(into: Storage | str, source: Storage | str | None = None) -> int:
    """Undo a keep: release its legal holds (recorded in `_kept/holds.json`, on the bucket of
    `source`, else of the kept table's own first add), then delete the kept table's files, its
    log last (a hard link's other name, the source's, stays). Also a keep whose writer stopped
    before its log. The number of files deleted."""
    from tables.delta.storage.versions import versioned_bucket

    dest = as_storage(into)
    held = _read_holds(dest)
    if held:
        if source is not None:
            bucket = versioned_bucket(as_storage(source))
        else:  # the holds are on the source's bucket, which the kept table's own adds name
            first = load_snapshot(dest, 0).file_paths()[:1]
            bucket = versioned_bucket(as_storage(first[0].rsplit("/", 1)[0])) if first else None
        for key, version_id in held.items() if bucket is not None else ():
            bucket.release(key, version_id)
    keys = sorted(dest.list_tree(""), key=lambda k: k.startswith(f"{LOG_DIR}/"))
    for key in keys:
        dest.delete(key)
    return len(keys)
