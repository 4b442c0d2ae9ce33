"""Recovery from a versioned bucket, at the storage boundary: which objects of a table that are
gone (deleted by VACUUM or log cleanup: a delete marker is their current version) survive as
noncurrent versions, a read-only view of the table as it would be were they back, and putting
them back.

Only object stores whose backend describes its versions (`Backend.versioning`: S3) answer;
any other storage raises `NotVersionedError`, as does a bucket whose versioning is not on.
Keys stay confined: versions are listed under the table's own prefix only, and every key is
checked by the storage's own confinement (`object_ref`) before it is read or written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tables.delta.errors import NotVersionedError, PathOutsideRootsError, RecoveryError, StorageError
from tables.delta.storage.api import Capability, FileInfo, Storage
from tables.delta.storage.backends.registry import ObjectVersion, VersionedBucket

MAX_RECOVERABLE_BYTES = 5 * 1024**3  # a larger object is not copied (one PUT's limit)


def versioned_bucket(storage: Storage) -> VersionedBucket:
    """The object versions of the storage's bucket; NotVersionedError when the storage is not
    an object store whose backend keeps versions, or the bucket's versioning is not on (a
    suspended bucket writes "null" versions that replace each other: no safe copy back)."""
    from tables.delta.storage.objectstore import ObjectStoreStorage
    from tables.delta.storage.objectstore_config import backend_of, parse_location

    if not isinstance(storage, ObjectStoreStorage):
        raise NotVersionedError(f"{storage.display()}: not in an object store; there are no object versions")
    loc = parse_location(storage.location)
    factory = backend_of(loc.kind).versioning
    if factory is None:
        raise NotVersionedError(f"{storage.display()}: recovery from object versions is not supported for this store")
    bucket = factory(loc, storage.store_options())
    status = bucket.status()
    if status != "Enabled":
        raise NotVersionedError(
            f"{storage.display()}: the bucket's versioning is {'suspended' if status else 'off'}; "
            "there are no noncurrent versions to recover from"
        )
    return bucket


@dataclass(frozen=True, slots=True)
class Recoverable:
    """Keys (relative to the table) with no current object and a noncurrent version to copy."""

    objects: dict[str, ObjectVersion]
    listed_versions: int  # versions and delete markers listed under the table's prefix

    def log_keys(self) -> list[str]:
        return sorted(k for k in self.objects if k.startswith("_delta_log/"))


def recoverable_objects(storage: Storage, bucket: VersionedBucket) -> Recoverable:
    """One listing of every version under the table's prefix: for each key whose current
    version is a delete marker (or that has no current version), its newest noncurrent
    object version, if it is not too large to copy."""
    from tables.delta.storage.objectstore_config import parse_location

    loc = parse_location(storage.location)
    base = f"{loc.prefix}/" if loc.prefix else ""
    current: set[str] = set()
    newest: dict[str, ObjectVersion] = {}
    count = 0
    for v in bucket.list_versions(base):
        count += 1
        if not v.key.startswith(base) or v.key == base:
            continue
        if v.is_latest and not v.delete_marker:
            current.add(v.key)
        elif not v.delete_marker and v.key not in newest:  # listed newest first per key
            newest[v.key] = v
    objects = {k[len(base) :]: v for k, v in newest.items() if k not in current and v.size <= MAX_RECOVERABLE_BYTES}
    return Recoverable(objects, count)


class RecoveryView:
    """A table's storage as it would be were its recoverable objects back: listings and reads
    of the storage, with the noncurrent versions where no current object is. Read-only:
    planners and the reachability map run on it to see what recovery would make readable."""

    remote = True
    # read-only: nothing is placed here; a footer is read from the bytes (open_input)
    capabilities = frozenset({Capability.OPEN_INPUT, Capability.STORE_OPTIONS})

    def __init__(self, storage: Storage, bucket: VersionedBucket, recoverable: Recoverable) -> None:
        self.base, self.bucket, self.recoverable = storage, bucket, recoverable
        self.location = storage.location
        self._objects = recoverable.objects

    def __repr__(self) -> str:
        return f"RecoveryView({self.location!r}, {len(self._objects)} recoverable)"

    def _version(self, path: str) -> ObjectVersion | None:
        return self._objects.get(path) if "://" not in path else None

    def _info(self, path: str, v: ObjectVersion) -> FileInfo:
        return FileInfo(path, v.size, v.last_modified)

    def _under(self, prefix: str) -> Iterator[str]:
        start = f"{prefix}/" if prefix else ""
        return (k for k in self._objects if k.startswith(start))

    # -- listing

    def list_from(self, prefix: str, start_after: str | None = None) -> Iterator[FileInfo]:
        try:
            out = {f.path: f for f in self.base.list_from(prefix, start_after)}
        except FileNotFoundError:
            out = {}
        for k in self._under(prefix):
            if "/" not in k[len(prefix) + 1 if prefix else 0 :] and (start_after is None or k > start_after):
                out[k] = self._info(k, self._objects[k])
        return iter(sorted(out.values(), key=lambda f: f.path))

    def list_dir(self, rel_dir: str) -> list[FileInfo]:
        out = list(self.list_from(rel_dir))
        if not out and not self.is_dir(rel_dir):
            raise FileNotFoundError(2, "no such directory", self.display(rel_dir))
        return out

    def list_names(self, rel_dir: str) -> list[str]:
        return [f.path.rsplit("/", 1)[-1] for f in self.list_dir(rel_dir)]

    def list_tree(self, prefix: str = "", exclude: tuple[str, ...] = ()) -> Iterator[str]:
        yield from self.base.list_tree(prefix, exclude)
        for k in self._under(prefix):
            if not (exclude and not prefix and k.split("/", 1)[0] in exclude):
                yield k

    def list_dirs(self, prefix: str = "") -> list[str]:
        names = set(self.base.list_dirs(prefix))
        start = f"{prefix}/" if prefix else ""
        names.update(k[len(start) :].split("/", 1)[0] for k in self._under(prefix) if "/" in k[len(start) :])
        return sorted(names)

    def is_dir(self, rel: str) -> bool:
        return any(True for _ in self._under(rel)) or self.base.is_dir(rel)  # type: ignore[attr-defined]

    # -- reading

    def read(self, path: str, range: tuple[int, int] | None = None) -> bytes:
        v = self._version(path)
        if v is None:
            return self.base.read(path, range)
        _bucket_uri, key = self.base.object_ref(path)  # type: ignore[attr-defined]  # confined as every read
        if key != v.key:
            raise PathOutsideRootsError(self.refusal(path), file=path[:300])
        return self.bucket.read_version(key, v.version_id, range)

    read_mapped = read

    def read_many(self, paths: list[str]) -> list[bytes]:
        if not any(self._version(p) for p in paths):
            return self.base.read_many(paths)
        return [self.read(p) for p in paths]

    def open_input(self, path: str) -> Any:
        import pyarrow as pa

        return pa.BufferReader(pa.py_buffer(self.read(path)))

    def head(self, path: str) -> FileInfo:
        v = self._version(path)
        return self._info(path, v) if v is not None else self.base.head(path)

    stat = head

    def exists(self, path: str) -> bool:
        return self._version(path) is not None or self.base.exists(path)  # type: ignore[attr-defined]

    # -- naming, and no writing

    def resolve(self, log_path: str) -> str:
        return self.base.resolve(log_path)

    def uri(self, path: str = "") -> str:
        return self.base.uri(path)

    def display(self, path: str = "") -> str:
        return self.base.display(path)

    def object_ref(self, path: str) -> tuple[str, str]:
        return self.base.object_ref(path)  # type: ignore[attr-defined]

    def store_options(self) -> dict[str, Any]:
        return self.base.store_options()  # type: ignore[attr-defined]

    def refusal(self, key: str) -> str:
        return self.base.refusal(key)  # type: ignore[attr-defined]

    def _read_only(self, *_args: Any, **_kwargs: Any) -> Any:
        raise StorageError(f"{self.display()}: a view of recoverable objects is read-only")

    put = put_if_absent = delete = make_dir = _read_only


def copy_back(
    storage: Storage,
    bucket: VersionedBucket,
    objects: Iterable[tuple[str, ObjectVersion]],
    done: Callable[[str, ObjectVersion, dict[str, Any] | None], None] | None = None,
) -> list[dict[str, Any]]:
    """Put each (key relative to the table, noncurrent version) back, in order, never over a
    current object (the backend's conditional copy), each checked against its version. `done`
    is told before each copy (report None) and after it (the report), so that a caller can
    record the copy before it happens. The first failure raises RecoveryError; the copies made
    before it stay (nothing is ever deleted)."""
    reports = []
    for rel, version in objects:
        try:
            _bucket_uri, key = storage.object_ref(rel)  # type: ignore[attr-defined]
        except PathOutsideRootsError:
            raise RecoveryError(
                f"{rel[:300]!r} lies outside the table's allowed locations; it was not copied"
            ) from None
        if key != version.key:
            raise RecoveryError(f"{storage.display(rel)}: the version listed is of another object")
        if done is not None:
            done(rel, version, None)
        report = {**bucket.copy_back(key, version), "path": rel}
        if done is not None:
            done(rel, version, report)
        reports.append(report)
    return reports
