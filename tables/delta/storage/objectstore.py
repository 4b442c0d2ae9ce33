"""Tables in object stores (S3 and S3-compatible servers, Azure Blob/ADLS, Google Cloud Storage)
behind the storage interface, through `obstore` (the Rust `object_store` crate delta-rs uses).

A location is `s3://bucket/prefix` (or `s3a://`), `gs://bucket/prefix`, `az://container/prefix`
or `abfss://container@account.dfs.core.windows.net/prefix`. Keys are relative to the location,
as for a local table; `resolve` may also return an absolute URI for a file the log names in
another allowed location.

Credentials come from the environment the way the ecosystem passes them (AWS_*, AZURE_*,
GOOGLE_*; obstore's `from_env`), overridden by an optional per-location `options` dict (keys
as delta-rs' `storage_options` take them). No secret ever reaches a message, a repr or a log:
errors name the location and the store's error code, nothing the request carried.

Confinement: every key is normalised here (`..` resolved, never sent to the store) and must lie
under one of the allowed location prefixes of its scheme, else `PathOutsideRootsError`.

Object stores are slow per request and fast in parallel, so listings keep what they return
(size, last-modified: commit times on object stores are the objects' times) and `read_many`
fetches many objects at once. Writing needs an atomic put-if-absent (conditional PUT with
If-None-Match): a store that cannot do it is refused for writing, never silently overwritten.
A conditional write whose answer was lost (a dropped connection, a 5xx after it landed, then
obstore's retry refused with 412) is resolved by reading the object back: our bytes there mean
it landed, anything else is another writer's; it is never written a second time.
"""

from __future__ import annotations

import errno
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import unquote

from tables.delta.errors import (
    ACCESS_CODES,
    BucketNotFoundError,
    CommitConflictError,
    ConditionalPutUnsupportedError,
    ObjectStoreAccessError,
    PathOutsideRootsError,
    StorageError,
    StorageUnavailableError,
)
from tables.delta.storage.api import MAX_LOG_PATH_CHARS, Capability, FileInfo, Storage, allowed_roots, refuse_long_path
from tables.delta.storage.backends import backend_for_scheme, backend_of
from tables.delta.storage.objectstore_config import (
    ERROR_CODE,
    HTTP_STATUS,
    RETRY_CONFIG,
    ObjectLocation,
    build_store,
    is_object_location,
    normalize_key,
    parse_location,
    scheme_of,
    scrubbed_line,
    secrets_of,
)

CONCURRENCY = 32  # requests in flight in read_many
BLOB_CACHE_BYTES = 256 << 20  # parquet checkpoints are opened twice (non-file actions, then files)
COMMIT_NAME = re.compile(r"(^|/)_delta_log/\d{20}\.json$")  # immutable once written: kept when read
RETRIED = re.compile(r"after (\d+) retries")  # obstore's own count in a request's error
T = TypeVar("T")


def unanswered(exc: BaseException) -> bool:
    """Whether a store's error says it did not answer (network, 5xx or a timeout after the
    retries), as opposed to refusing (credentials, a missing bucket) or not supporting a call."""
    from obstore import exceptions as ox

    if not isinstance(exc, ox.GenericError):
        return False
    text = str(exc)
    code = ERROR_CODE.search(text)
    status = HTTP_STATUS.search(text)
    if code and code[1] in (*ACCESS_CODES, "NoSuchBucket", "ContainerNotFound"):
        return False
    if status and status[1] in ("401", "403"):
        return False
    return "request" in text or "timed out" in text.lower()


def backoff(attempt: int) -> float:
    """Seconds to wait before our own retry number `attempt` (0 first), as RETRY_CONFIG's."""
    cfg = RETRY_CONFIG["backoff"]
    wait = cfg["init_backoff"].total_seconds() * cfg["base"] ** attempt
    return min(wait, cfg["max_backoff"].total_seconds())


# --- the storage -----------------------------------------------------------------------------------


# Stores built in this process, shared by every storage of the same bucket with the same options
# and environment: building one (its HTTP client, its credentials) costs milliseconds, which a
# probe of thousands of tables in one bucket would otherwise pay per table. Keyed by everything
# the build reads, so a changed credential or endpoint builds a new one.
_SHARED_MAX = 64
_shared: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_shared_lock = threading.Lock()


def _shared_store(loc: ObjectLocation, options: Mapping[str, Any]) -> Any:
    prefixes = backend_of(loc.kind).env_prefixes  # the variables its backend reads (registry)
    env = tuple(sorted((k, v) for k, v in os.environ.items() if prefixes and k.startswith(prefixes)))
    key = (loc.scheme, loc.kind, loc.bucket, loc.account, loc.host, repr(sorted(options.items())), env)
    with _shared_lock:
        store = _shared.get(key)
        if store is not None:
            _shared.move_to_end(key)
            return store
    store = build_store(loc, options)
    with _shared_lock:
        _shared[key] = store
        while len(_shared) > _SHARED_MAX:
            _shared.popitem(last=False)
    return store


class ObjectStoreStorage:
    """A table root in an object store, confined to the allowed location prefixes of its scheme
    (its own location when none are configured)."""

    remote = True  # many small requests cost round trips: callers batch reads (read_many)
    capabilities = frozenset(
        {Capability.OPEN_INPUT, Capability.PLACE, Capability.STORE_OPTIONS, Capability.REQUEST_COUNT}
    )

    def __init__(
        self,
        location: str,
        roots: Iterable[str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self._loc = parse_location(str(location))
        self.location = self._loc.uri()
        configured = tuple(roots) if roots is not None else allowed_roots()
        prefixes = []
        for r in configured:
            if is_object_location(str(r)):
                p = parse_location(str(r))
                if p.kind == self._loc.kind:
                    prefixes.append(p)
        # configured roots that name no prefix of this scheme allow nothing of it
        self._prefixes = tuple(prefixes) if configured else (self._loc,)
        self.roots = tuple(p.root for p in self._prefixes)
        self._options = dict(options or {})
        self._secret_values = secrets_of(self._options)
        self._stores: dict[tuple[str, str, str | None], Any] = {}
        self._listed: dict[tuple[tuple[str, str, str | None], str], FileInfo] = {}
        self._blobs: OrderedDict[tuple[tuple[str, str, str | None], str], bytes] = OrderedDict()
        self._blob_bytes = 0
        self._put_checked = False
        self._level_memo: tuple[str, Any] | None = None  # is_dir's listing, for the next one
        self.requests = 0  # requests made (benchmarks)
        self._bucket_clients: dict[tuple[str, str, str | None], Any] = {}

    def __repr__(self) -> str:
        return f"ObjectStoreStorage({self.location!r})"

    # -- stores, keys and confinement

    def _store(self, store_id: tuple[str, str, str | None]) -> Any:
        store = self._stores.get(store_id)
        if store is None:
            kind, bucket, account = store_id
            loc = ObjectLocation(self._loc.scheme, kind, bucket, "", account, self._loc.host)
            with self._errors(""):
                store = _shared_store(loc, self._options)
            self._stores[store_id] = store
        return store

    def refusal(self, key: str) -> str:
        return (
            f"{key[:300]!r} lies outside the allowed locations (another bucket, an absolute path or '..' "
            f"leading out of them); it was not read"
        )

    def _target(self, key: str) -> tuple[tuple[str, str, str | None], str]:
        """(store id, object path) of a key, normalised and checked against the prefixes."""
        if "\x00" in key or key.startswith("/") or key.startswith("file:"):
            raise PathOutsideRootsError(self.refusal(key), file=key[:300])
        if "://" in key:
            try:
                loc = parse_location(key)
            except StorageError:
                raise PathOutsideRootsError(self.refusal(key), file=key[:300]) from None
            store_id, path = loc.store_id, loc.prefix
            if loc.account is None and backend_of(loc.kind).accounts:
                # a URI without the account names this location's account
                store_id = (loc.kind, loc.bucket, self._loc.account)
        else:
            joined = f"{self._loc.prefix}/{key}" if self._loc.prefix else key
            path = normalize_key(joined)
            if path is None:
                raise PathOutsideRootsError(self.refusal(key), file=key[:300])
            store_id = self._loc.store_id
        if not any(p.contains(store_id, path) for p in self._prefixes):
            raise PathOutsideRootsError(self.refusal(key), file=key[:300])
        return store_id, path

    def _root_target(self) -> tuple[tuple[str, str, str | None], str]:
        """(store id, object path) of the location itself, checked like any key: a storage
        opened on a prefix outside the allowed ones lists nothing there."""
        store_id, path = self._loc.store_id, self._loc.prefix
        if not any(p.contains(store_id, path) for p in self._prefixes):
            raise PathOutsideRootsError(self.refusal(self.location), file=self.location[:300])
        return store_id, path

    def resolve(self, log_path: str) -> str:
        """The key of a path as the log names it: URL-decoded and relative to the root, or an
        absolute URI (kept as a key when it lies in another allowed location). Checked here,
        so a refused path fails before anything is requested, as does one longer than any
        store's key (before a copy of it is made)."""
        refuse_long_path(log_path, MAX_LOG_PATH_CHARS)
        key = unquote(log_path)
        refuse_long_path(key)
        if key.startswith("file:") or key.startswith("/"):
            raise PathOutsideRootsError(self.refusal(key), file=key[:300])
        if "://" in key:
            backend = backend_for_scheme(scheme_of(key))
            if backend is None or backend.kind != self._loc.kind:
                raise PathOutsideRootsError(self.refusal(key), file=key[:300])
            store_id, path = self._target(key)
            if store_id == self._loc.store_id and self._loc.contains(store_id, path) and path != self._loc.prefix:
                return path[len(self._loc.prefix) + 1 :] if self._loc.prefix else path
            return self._loc_for(store_id).uri(path)
        self._target(key)
        return key

    def _loc_for(self, store_id: tuple[str, str, str | None]) -> ObjectLocation:
        kind, bucket, account = store_id
        host = self._loc.host if account == self._loc.account else None
        return ObjectLocation(self._loc.scheme, kind, bucket, "", account if host else None, host)

    def _clean(self, text: str) -> str:
        """One line of a store's error, without query strings or any secret."""
        return scrubbed_line(str(text), self._secret_values)[:200]

    @contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        """Translate the store's exceptions into the core's (FileNotFoundError stays one)."""
        from obstore import exceptions as ox

        try:
            yield
        except (FileNotFoundError, ox.NotFoundError) as exc:
            if "NoSuchBucket" in str(exc) or "ContainerNotFound" in str(exc):
                raise self._no_bucket() from None
            raise FileNotFoundError(errno.ENOENT, "no such object", self.display(key)) from None
        except (ox.PermissionDeniedError, ox.UnauthenticatedError) as exc:
            raise self._denied(key, exc) from None
        except ox.UnknownConfigurationKeyError as exc:
            m = re.search(r"key: '([^']{1,80})'", str(exc))
            raise StorageError(
                f"{self.location}: unknown storage option {m[1] if m else ''!r} for this store"
            ) from None
        except (ox.GenericError, ox.BaseError, OSError, ValueError) as exc:
            text = str(exc)
            code = ERROR_CODE.search(text)
            status = HTTP_STATUS.search(text)
            if code and code[1] in ("NoSuchBucket", "ContainerNotFound"):
                raise self._no_bucket() from None
            if (code and code[1] in ACCESS_CODES) or (status and status[1] in ("401", "403")):
                raise self._denied(key, exc) from None
            if unanswered(exc):
                reason = code[1] if code else (f"HTTP {status[1]}" if status else self._clean(text))
                raise StorageUnavailableError(
                    f"{self.display(key)}: the object store did not answer after {RETRY_CONFIG['max_retries']} "
                    f"retries ({reason})"
                ) from None
            raise StorageError(f"{self.display(key)}: {type(exc).__name__}: {self._clean(text)}") from None

    def _no_bucket(self) -> BucketNotFoundError:
        what = backend_of(self._loc.kind).container
        return BucketNotFoundError(f"{self.location}: the {what} '{self._loc.bucket}' does not exist")

    def _denied(self, key: str, exc: BaseException) -> ObjectStoreAccessError:
        code = ERROR_CODE.search(str(exc))
        reason = code[1] if code else type(exc).__name__
        return ObjectStoreAccessError(
            f"{self.display(key)}: access denied by the object store ({reason}); check the credentials for this location"
        )

    # -- listing

    def _remember(self, store_id: tuple[str, str, str | None], batch: Any) -> list[tuple[str, int, int]]:
        """(object path, size, mtime ms) of an arrow listing batch, kept for `stat`."""
        import pyarrow as pa

        rb = pa.table(batch)  # arro3 batches and tables, through the Arrow C interface
        paths = rb.column("path").to_pylist()
        sizes = rb.column("size").to_pylist()
        # truncated to ms: a store may keep finer times (obstore's MemoryStore keeps µs)
        times = rb.column("last_modified").cast(pa.timestamp("ms", "UTC"), safe=False).cast(pa.int64()).to_pylist()
        out = list(zip(paths, sizes, times, strict=True))
        for path, size, mtime in out:
            self._listed[(store_id, path)] = FileInfo(path, size, mtime)
        return out

    def _rel(self, path: str) -> str:
        return path[len(self._loc.prefix) + 1 :] if self._loc.prefix else path

    def _list_level(self, rel_dir: str) -> tuple[list[tuple[str, int, int]], list[str]]:
        """Objects directly under `rel_dir` (object paths) and its sub-prefixes."""
        import obstore

        memo, self._level_memo = self._level_memo, None
        if memo is not None and memo[0] == rel_dir:
            return memo[1]

        store_id, path = self._target(rel_dir) if rel_dir else (self._loc.store_id, self._loc.prefix)
        store = self._store(store_id)

        def listing() -> Any:
            self.requests += 1
            return obstore.list_with_delimiter(store, path or None, return_arrow=True)

        with self._errors(rel_dir):
            res = self._whole_listing(listing)
            objects = self._remember(store_id, res["objects"])
        return objects, list(res["common_prefixes"])

    def _whole_listing(self, call: Callable[[], T]) -> T:
        """`call` (a whole listing, safe to repeat), again when the body of its answer was cut
        short: obstore retries a listing's request but not the reading of its body, which would
        otherwise fail the read at the first dropped connection."""
        from obstore import exceptions as ox

        for attempt in range(RETRY_CONFIG["max_retries"]):
            try:
                return call()
            except ox.GenericError as exc:
                if "response body" not in str(exc):
                    raise
            time.sleep(backoff(attempt))
        return call()

    def list_names(self, rel_dir: str) -> list[str]:
        """Names of the objects directly under `rel_dir`, sorted (sizes and times kept for stat)."""
        objects, subdirs = self._list_level(rel_dir)
        if not objects and not subdirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", self.display(rel_dir))
        return sorted(p.rsplit("/", 1)[-1] for p, _s, _t in objects)

    def list_dir(self, rel_dir: str) -> list[FileInfo]:
        objects, subdirs = self._list_level(rel_dir)
        if not objects and not subdirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", self.display(rel_dir))
        out = [FileInfo(f"{rel_dir}/{p.rsplit('/', 1)[-1]}", s, t) for p, s, t in objects]
        out.sort(key=lambda f: f.path)
        return out

    def list_from(self, prefix: str, start_after: str | None = None) -> Iterator[FileInfo]:
        """Objects directly under `prefix`, sorted, after `start_after` (the listing starts
        there: an offset, not a filter over the whole directory; checked again here, since
        a server may ignore the offset and list the whole directory)."""
        import obstore

        store_id, path = self._target(prefix) if prefix else self._root_target()
        offset = self._target(start_after)[1] if start_after else None
        store = self._store(store_id)
        base = f"{path}/" if path else ""

        def listing() -> list[FileInfo]:
            self.requests += 1
            out: list[FileInfo] = []
            for batch in obstore.list(store, path or None, offset=offset, chunk_size=1000, return_arrow=True):
                for p, s, t in self._remember(store_id, batch):
                    name = p[len(base) :]
                    if "/" not in name and (offset is None or p > offset):
                        out.append(FileInfo(f"{prefix}/{name}" if prefix else name, s, t))
            return out

        with self._errors(prefix):
            out = self._whole_listing(listing)
        out.sort(key=lambda f: f.path)
        return iter(out)

    def list_tree(self, prefix: str = "", exclude: tuple[str, ...] = ()) -> Iterator[str]:
        """Every object below `prefix`, as keys, in no order; top-level `exclude` skipped."""
        import obstore

        store_id, path = self._target(prefix) if prefix else self._root_target()
        store = self._store(store_id)
        base = f"{path}/" if path else ""
        with self._errors(prefix):
            self.requests += 1
            for batch in obstore.list(store, path or None, chunk_size=1000, return_arrow=True):
                for p, _s, _t in self._remember(store_id, batch):
                    rel = p[len(base) :]
                    if exclude and not prefix and rel.split("/", 1)[0] in exclude:
                        continue
                    yield f"{prefix}/{rel}" if prefix else rel

    def is_dir(self, rel: str) -> bool:
        """Whether at least one object lies under `rel` (object stores have no directories).

        Answered by listing the level itself, kept for the listing that follows (list_log
        asks is_dir, then list_names, of `_delta_log/`): one request instead of two."""
        level = self._list_level(rel)
        objects, subdirs = level
        if not objects and not subdirs:
            return False
        self._level_memo = (rel, level)
        return True

    # -- reading

    def _kept(self, key: tuple[tuple[str, str, str | None], str]) -> bytes | None:
        data = self._blobs.get(key)
        if data is not None:
            self._blobs.move_to_end(key)
        return data

    def _keep(self, key: tuple[tuple[str, str, str | None], str], data: bytes) -> None:
        if key in self._blobs:
            return
        self._blobs[key] = data
        self._blob_bytes += len(data)
        while self._blob_bytes > BLOB_CACHE_BYTES and len(self._blobs) > 1:
            _k, old = self._blobs.popitem(last=False)
            self._blob_bytes -= len(old)

    def read(self, path: str, range: tuple[int, int] | None = None) -> bytes:
        import obstore

        store_id, obj = self._target(path)
        if range is None and COMMIT_NAME.search(obj):
            # a commit file never changes once written (put-if-absent): the replay that found
            # the table's config and the history that reads commitInfo share one GET
            hit = self._kept((store_id, obj))
            if hit is not None:
                return hit
        store = self._store(store_id)
        with self._errors(path):
            self.requests += 1
            if range is None:
                data = bytes(obstore.get(store, obj).bytes())
                if COMMIT_NAME.search(obj):
                    self._keep((store_id, obj), data)
                return data
            start, end = range
            if end <= start:
                return b""
            return bytes(obstore.get_range(store, obj, start=start, end=end))

    read_mapped = read  # no memory maps over a network: the bytes are in memory anyway

    def read_many(self, paths: list[str]) -> list[bytes]:
        """The bytes of every path, fetched concurrently (at most CONCURRENCY in flight);
        FileNotFoundError (its filename the missing key) when one is absent."""
        keys = [self._target(p) for p in paths]
        out: list[bytes | None] = [self._kept(k) if COMMIT_NAME.search(k[1]) else None for k in keys]
        todo = [i for i, d in enumerate(out) if d is None]
        if len(todo) < len(paths):  # only what was not read already
            fetched = self._fetch_many([paths[i] for i in todo], [keys[i] for i in todo])
            for i, data in zip(todo, fetched, strict=True):
                out[i] = data
            return out  # type: ignore[return-value]
        return self._fetch_many(paths, keys)

    def _fetch_many(self, paths: list[str], keys: list[tuple[tuple[str, str, str | None], str]]) -> list[bytes]:
        if len(paths) <= 1:
            return [self.read(p) for p in paths]
        import obstore

        targets = [(self._store(sid), obj) for sid, obj in keys]

        def one(i: int) -> bytes:
            store, obj = targets[i]
            try:
                return bytes(obstore.get(store, obj).bytes())
            except Exception as exc:
                with self._errors(paths[i]):
                    raise exc from None
                raise  # pragma: no cover (_errors always raises)

        self.requests += len(paths)
        # obstore's blocking calls release the GIL while the request is out: a thread pool
        # keeps CONCURRENCY requests in flight without an event loop
        with ThreadPoolExecutor(min(CONCURRENCY, len(paths))) as pool:
            blobs = list(pool.map(one, range(len(paths))))
        for key, data in zip(keys, blobs, strict=True):
            if COMMIT_NAME.search(key[1]):
                self._keep(key, data)
        return blobs

    def open_input(self, path: str) -> Any:
        """A seekable in-memory file for pyarrow over the whole object (one GET, kept for a
        second open of the same checkpoint)."""
        import pyarrow as pa

        key = self._target(path)
        data = self._kept(key)
        if data is None:
            data = self.read(path)
            self._keep(key, data)
        return pa.BufferReader(pa.py_buffer(data))

    def head(self, path: str) -> FileInfo:
        """Size and last-modified time (ms); from the last listing when it saw the object."""
        import obstore

        store_id, obj = self._target(path)
        hit = self._listed.get((store_id, obj))
        if hit is not None:
            return FileInfo(path, hit.size, hit.modification_time)
        with self._errors(path):
            self.requests += 1
            meta = obstore.head(self._store(store_id), obj)
        info = FileInfo(path, int(meta["size"]), int(meta["last_modified"].timestamp() * 1000))
        self._listed[(store_id, obj)] = FileInfo(obj, info.size, info.modification_time)
        return info

    stat = head

    def exists(self, path: str) -> bool:
        try:
            self.head(path)
        except FileNotFoundError:
            return False
        return True

    # -- writing

    def _forget(self, store_id: tuple[str, str, str | None], obj: str) -> None:
        self._level_memo = None
        self._listed.pop((store_id, obj), None)
        old = self._blobs.pop((store_id, obj), None)
        if old is not None:
            self._blob_bytes -= len(old)

    def _conditional_put_refusal(self, why: str) -> ConditionalPutUnsupportedError:
        return ConditionalPutUnsupportedError(
            f"{self.location}: writing refused: the object store {why}, so a commit could silently replace "
            "another writer's (reading still works)"
        )

    def _check_conditional_put(self) -> None:
        """Once per storage: prove the store refuses a second put-if-absent of one key (some
        S3-compatible servers ignore If-None-Match and would overwrite a commit)."""
        if self._put_checked:
            return
        import obstore
        from obstore import exceptions as ox

        store_id, probe = self._target(f"_delta_log/.put-if-absent-probe-{uuid.uuid4().hex}")
        store = self._store(store_id)
        with self._errors("_delta_log"):
            try:
                self._put_if_absent(store, probe, b"1")
                # True: the second put replaced the first (the read-back found "2")
                ignored = self._put_if_absent(store, probe, b"2")
            except (NotImplementedError, ox.NotSupportedError):
                raise self._conditional_put_refusal("cannot put an object only if absent") from None
            finally:
                try:
                    self.requests += 1
                    obstore.delete(store, probe)
                except Exception:
                    pass  # a leftover probe is harmless: the log ignores dot files
        if ignored:
            raise self._conditional_put_refusal("ignored a conditional put (If-None-Match) and overwrote an object")
        self._put_checked = True

    def put(self, path: str, data: bytes, overwrite: bool = False) -> bool:
        """Write `path` whole (a single PUT). Without `overwrite`, a conditional PUT that the
        store refuses when the object exists: False says so, nothing was replaced."""
        import obstore
        from obstore import exceptions as ox

        store_id, obj = self._target(path)
        if not overwrite:
            self._check_conditional_put()
        store = self._store(store_id)
        with self._errors(path):
            try:
                if not overwrite:
                    return self._put_if_absent(store, obj, data)
                self.requests += 1
                obstore.put(store, obj, data, mode="overwrite", use_multipart=False)
            except (NotImplementedError, ox.NotSupportedError):
                raise self._conditional_put_refusal("cannot put an object only if absent") from None
            finally:
                self._forget(store_id, obj)
        return True

    def _put_if_absent(self, store: Any, obj: str, data: bytes) -> bool:
        """A conditional PUT whose outcome is known: True when the object now holds `data` (our
        write landed, perhaps on an attempt whose answer was lost), False when it holds another
        writer's bytes. A conditional write that may or may not have landed is resolved by
        reading it back, never by writing twice; an attempt is repeated only while the object
        is absent, and each is If-None-Match, so none can replace anything."""
        import obstore
        from obstore import exceptions as ox

        for attempt in range(RETRY_CONFIG["max_retries"] + 1):
            try:
                self.requests += 1
                obstore.put(store, obj, data, mode="create", use_multipart=False)
                return True
            except (ox.AlreadyExistsError, ox.PreconditionError):
                # obstore repeats a PUT answered 5xx or dropped mid-way: the 412 may be the answer
                # to our own earlier attempt, which only the bytes there can tell
                return self._read_back(store, obj) == data
            except ox.GenericError as exc:
                if not unanswered(exc):
                    raise
                try:
                    held = self._read_back(store, obj)
                except Exception:
                    raise exc from None  # the store answers nothing: the PUT's own error says so
                if held is not None:
                    return held == data
                retried = RETRIED.search(str(exc))
                # obstore does not repeat a conditional PUT whose connection dropped (it is not
                # idempotent to it); one it did retry (5xx) has had its bounded retries already
                if (retried and int(retried[1]) > 0) or attempt == RETRY_CONFIG["max_retries"]:
                    raise
            time.sleep(backoff(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _read_back(self, store: Any, obj: str) -> bytes | None:
        """The object's bytes read directly from the store (no cache), None when absent."""
        import obstore
        from obstore import exceptions as ox

        try:
            self.requests += 1
            return bytes(obstore.get(store, obj).bytes())
        except (FileNotFoundError, ox.NotFoundError):
            return None

    def put_if_absent(self, rel: str, data: bytes) -> None:
        """`put` without overwrite, raising CommitConflictError when the object exists."""
        if not self.put(rel, data):
            raise CommitConflictError(f"{self.display(rel)} exists already", version=-1)

    def place(self, source: Storage, key: str, into: str) -> str:
        """Put the object `key` of `source` at `into` here: a server-side copy ("server-copy",
        one CopyObject, the bytes never leave the store) when both are in the same store,
        else the bytes read and written once ("copy"). Both keys are confined."""
        import obstore

        store_id, obj = self._target(into)
        if isinstance(source, ObjectStoreStorage) and source.same_store(self):
            from_id, from_obj = source._target(key)
            if from_id == store_id:
                with self._errors(into):
                    self.requests += 1
                    obstore.copy(self._store(store_id), from_obj, obj, overwrite=True)
                    self._forget(store_id, obj)
                return "server-copy"
            bucket = self._bucket_client(store_id)
            if bucket is not None and hasattr(bucket, "server_copy"):  # another bucket, one service
                self.requests += 1
                bucket.server_copy(from_id[1], from_obj, obj)
                self._forget(store_id, obj)
                return "server-copy"
        data = source.read(key)
        self.put(into, data, overwrite=True)  # the same file's bytes: the same object either way
        return "copy"

    def _bucket_client(self, store_id: tuple[str, str, str | None]) -> Any:
        """The backend's own client of a bucket (S3's, through boto3), None where it has none;
        made once per bucket (a client costs tens of milliseconds to build)."""
        clients = self._bucket_clients
        if store_id not in clients:
            factory = backend_of(self._loc.kind).versioning
            clients[store_id] = None if factory is None else factory(self._loc_for(store_id), self._options)
        return clients[store_id]

    def same_store(self, other: ObjectStoreStorage) -> bool:
        """Whether `other` reaches the same service with the same options (a copy between
        them can stay inside the store)."""
        return (self._loc.kind, self._loc.host, self._loc.account) == (
            other._loc.kind,
            other._loc.host,
            other._loc.account,
        ) and self._options == other._options

    def list_dirs(self, prefix: str = "") -> list[str]:
        import obstore

        store_id, path = self._target(prefix) if prefix else self._root_target()
        base = f"{path}/" if path else ""
        with self._errors(prefix):
            self.requests += 1
            listed = obstore.list_with_delimiter(self._store(store_id), base or None)
        return sorted(p[len(base) :].rstrip("/") for p in listed["common_prefixes"] if p.startswith(base))

    def make_dir(self, path: str) -> None:
        self._target(path)  # checked against the allowed prefixes; an object store has no directories

    def delete(self, path: str) -> None:
        import obstore

        store_id, obj = self._target(path)
        with self._errors(path):
            try:
                self.requests += 1
                obstore.delete(self._store(store_id), obj)
            except FileNotFoundError:
                pass
            finally:
                self._forget(store_id, obj)

    # -- naming

    def uri(self, path: str = "") -> str:
        """The object's URI (`s3://bucket/key`) for engines that open it themselves."""
        if not path:
            return self.location
        store_id, obj = self._target(path)
        return self._loc_for(store_id).uri(obj)

    def object_ref(self, path: str) -> tuple[str, str]:
        """(the bucket's URI, the object path) of a key, checked against the allowed prefixes:
        what an engine that builds its own store (Spark's executors) needs to fetch it."""
        store_id, obj = self._target(path)
        return self._loc_for(store_id).uri(), obj

    def presign(self, path: str, seconds: int) -> str:
        """A pre-signed GET URL of a key, valid for `seconds`, from the location's own endpoint and
        credentials (Delta Sharing's file URLs); the key is confined like any read."""
        from datetime import timedelta

        import obstore

        store_id, obj = self._target(path)
        with self._errors(path):
            return str(obstore.sign(self._store(store_id), "GET", obj, timedelta(seconds=seconds)))

    def store_options(self) -> dict[str, Any]:
        """The per-location options this storage was opened with (secrets included: never log them)."""
        return dict(self._options)

    def display(self, path: str = "") -> str:
        if not path:
            return self.location
        return path if "://" in path else f"{self.location}/{path}"

    def local_file(self, path: str) -> str:
        raise StorageError(f"{self.display(path)}: an object-store file has no local path")

    local_file_unchecked = local_file
