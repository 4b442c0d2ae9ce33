"""Reading a sync's commits: each commit's bytes, its size and time from the same open, its
commitInfo, and the history columns that commitInfo gives.

A remote store's batch is fetched at once (concurrent requests). A local log is read here,
one commit after another: reader threads only fought the sync's own thread for the
interpreter. A long local log is read by processes instead (forked, so they inherit the
storage and its checks), which parse each commit and build its columns on the other cores
while this process stores the batches before; the commits come back in order.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

from tables.delta import errors as delta_errors
from tables.delta.history.chain import commit_digest
from tables.delta.log.commitinfo import CommitInfoRead, parse_commit_info
from tables.delta.log.listing import LogFile
from tables.delta.storage.api import Capability, Storage
from tables.services.sync.commit_rows import info_values

KEEP_BYTES = 1 << 20  # a bigger commit is read again for growth (memory-mapped when big)
PROCESS_MIN = 10_000  # new commits of a local log from which processes read them
READER_TIMEOUT = 60.0  # seconds a chunk may take in a reader process (about 0.1 s when well)
Read = tuple[LogFile, bytes | None, CommitInfoRead | None]
Infos = dict[int, list[Any]]  # info_values by version
Digests = dict[int, str]  # the SHA-256 of each commit's bytes by version (tables.delta.history.chain)

logger = logging.getLogger(__name__)


def read_part(storage: Storage, lfs: list[LogFile], digests: Digests | None = None) -> list[Read]:
    """Each commit's bytes and commitInfo, its size and time learnt from the same open; with
    `digests`, each commit's SHA-256 put there from the bytes read (a commit too big to keep is
    not read again to be hashed). A commit that fails here is read again, in order, by the
    scan, which reports it."""
    with_info = Capability.READ_WITH_INFO in storage.capabilities
    out: list[Read] = []
    for lf in lfs:
        try:
            if with_info:
                data, info = storage.read_with_info(lf.path)
                lf.known(info.size, info.modification_time)
            else:
                data = storage.read(lf.path)
                _ = lf.modification_time  # the stat, cached on the LogFile
            read = parse_commit_info(data, lf)
        except (FileNotFoundError, delta_errors.DeltaError):
            continue
        if digests is not None:
            digests[lf.version] = commit_digest(data)
        out.append((lf, data if len(data) <= KEEP_BYTES else None, read))
    return out


def read_commits(storage: Storage, lfs: list[LogFile], digests: Digests | None = None) -> list[Read]:
    """`read_part`, a remote store's commits fetched at once (`read_many`)."""
    if not storage.remote:
        return read_part(storage, lfs, digests)
    try:
        blobs = storage.read_many([lf.path for lf in lfs])
    except (FileNotFoundError, delta_errors.DeltaError):
        return []  # the scan reads them one by one and reports what fails
    out: list[Read] = []
    for lf, data in zip(lfs, blobs, strict=True):
        try:
            out.append((lf, data if len(data) <= KEEP_BYTES else None, parse_commit_info(data, lf)))
        except delta_errors.DeltaError:
            continue
        if digests is not None:
            digests[lf.version] = commit_digest(data)
    return out


def reader_processes(storage: Storage, commits: int) -> int:
    """How many processes read `commits` new commits of the log in `storage`: none for a
    remote store (its reads wait on the network, not on a core), a storage that cannot read a
    file with its size and time at once, a short log or one core."""
    if storage.remote or Capability.READ_WITH_INFO not in storage.capabilities or commits < PROCESS_MIN:
        return 0
    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, 4) if cores > 1 else 0


_storage: Storage | None = None  # a reader process's storage (set once, when it starts)


def _start(storage: Storage) -> None:
    global _storage
    _storage = storage
    # a reader forked from a Celery worker inherits its SIGTERM handler (a warm shutdown of a
    # worker that is not there); the pool ends its readers with SIGTERM, which must end them
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _abandon(pool: Any) -> None:
    """End a pool whose reader does not answer: SIGKILL every reader (one stuck on a lock it
    inherited never runs a SIGTERM handler), then the pool's own ending in a thread of its
    own, since it waits on the queue's lock, which a killed reader may have held: that thread
    may never end, the sync goes on without it."""
    for proc in list(getattr(pool, "_pool", None) or ()):
        with contextlib.suppress(OSError, AttributeError):
            os.kill(proc.pid, signal.SIGKILL)
    threading.Thread(target=pool.terminate, name="reader-pool-end", daemon=True).start()


def _prepare(task: tuple[list[tuple[int, str]], int, bool]) -> list[tuple]:
    """In a reader process: each commit's (version, size, time, bytes kept for growth,
    whether commitInfo came first, its two timestamps or None without one, its info_values,
    the SHA-256 of its bytes)."""
    commits, keep_after, json_text = task
    storage = _storage
    assert storage is not None
    out = []
    for version, path in commits:
        lf = LogFile("commit", version, path, fmt="json", storage=storage)
        try:
            data, info = storage.read_with_info(path)
            read = parse_commit_info(data, lf)
        except (FileNotFoundError, delta_errors.DeltaError):
            continue  # read again, in order, by the scan, which reports it
        stamps = None if read.info is None else (read.in_commit_timestamp, read.timestamp)
        kept = data if version > keep_after and len(data) <= KEEP_BYTES else None
        values = info_values(read.info, json_text)
        out.append((version, info.size, info.modification_time, kept, read.first, stamps, values, commit_digest(data)))
    return out


def _received(chunk: list[LogFile], prepared: list[tuple]) -> tuple[list[Read], Infos, Digests]:
    by_version = {lf.version: lf for lf in chunk}
    reads: list[Read] = []
    infos: Infos = {}
    digests: Digests = {}
    for version, size, mtime, data, first, stamps, values, digest in prepared:
        lf = by_version[version]
        lf.known(size, mtime)
        # what the scan asks of a commitInfo: whether there is one, and its two timestamps
        info = None if stamps is None else {"inCommitTimestamp": stamps[0], "timestamp": stamps[1]}
        reads.append((lf, data, CommitInfoRead(version, info, first)))
        infos[version] = values
        digests[version] = digest
    return reads, infos, digests


def prepared_in_processes(
    storage: Storage, chunks: list[list[LogFile]], keep_after: int, json_text: bool, processes: int
) -> Iterator[tuple[list[Read], Infos | None, Digests | None]]:
    """Each chunk's reads (bytes kept only past `keep_after`, commitInfo reduced to what the
    scan asks), info_values and digests, in order, from `processes` forked readers. At most two chunks
    per process wait to be taken: memory stays bounded however long the log.

    A worker forks from a process with threads of its own (the pool's, heartbeats): a child
    can inherit a lock some other thread held and wait on it forever. A chunk that does not
    come back within READER_TIMEOUT seconds ends the readers, and this process reads the rest
    itself (info_values and digests None: the caller makes them), so the sync finishes either way."""
    tasks = [([(lf.version, lf.path) for lf in chunk], keep_after, json_text) for chunk in chunks]
    ctx = multiprocessing.get_context("fork")
    done = 0
    # The heap the readers inherit (a million LogFiles, the ORM's state) is frozen first, so
    # no collector walks it while they run: a reader's full collection touched, and so copied,
    # every inherited page, and this process's walked it again at every full collection (at
    # 1 M commits: the readers' CPU 69 s -> 36 s, this process's 27 s -> 17 s).
    gc.freeze()
    pool = ctx.Pool(processes, initializer=_start, initargs=(storage,))
    stuck = False
    try:
        pending: deque = deque()
        sent = 0
        for chunk in chunks:
            while sent < len(tasks) and len(pending) < 2 * processes:
                pending.append(pool.apply_async(_prepare, (tasks[sent],)))
                sent += 1
            try:
                prepared = pending.popleft().get(timeout=READER_TIMEOUT)
            except multiprocessing.TimeoutError:
                logger.warning(
                    "reader processes gave no answer in %s s; this process reads the remaining %s chunks",
                    READER_TIMEOUT,
                    len(chunks) - done,
                )
                stuck = True
                break
            yield _received(chunk, prepared)
            done += 1
    finally:
        if stuck:
            _abandon(pool)
        else:
            pool.terminate()
        gc.unfreeze()  # what the sync let go of can be collected again
    for chunk in chunks[done:]:
        digests: Digests = {}
        yield read_commits(storage, chunk, digests), None, digests
