"""Reachability of a registered table's versions (which can still be read or restored, and
why not), computed by the core and cached until the next sync or for a few minutes, since
retention windows move with the clock.

Pages never wait for it on a long log: above DELTAWEB_REACHABILITY_INLINE_VERSIONS versions a
page asks with `wait=False`, gets the last answer this process computed for the same synced
state (or None), and the answer is computed in a background thread for the next request. A
first full map of a 100,000-version table takes minutes; a web worker is killed long before."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache

from tables.delta import errors as delta_errors
from tables.delta.history.reachability import (
    Reachability,
    ReachState,
    answer,
    mark_recoverable,
    parse_interval,
    recovery_state,
    update_state,
)
from tables.delta.storage.backends.registry import VersionedBucket
from tables.delta.storage.boundary import Storage, as_storage
from tables.delta.storage.objectstore_config import is_object_location
from tables.delta.storage.versions import Recoverable, RecoveryView, recoverable_objects, versioned_bucket
from tables.models import Table
from tables.services.errors import ServiceError, from_delta
from tables.services.history.query import synced_key

CACHE_SECONDS = 300
T = TypeVar("T")
RETENTION_HELP = 'Give a retention such as "7 days", "interval 1 week" or "24 hours".'


def parse_retention(text: str | None) -> int:
    """A VACUUM retention a person typed, in ms; ServiceError `invalid` when unreadable."""
    ms = parse_interval(text)
    if ms is None:
        shown = (text or "").strip()[:40]
        raise ServiceError(f"'{shown}' is not a retention. {RETENTION_HELP}" if shown else RETENTION_HELP)
    return ms


def cache_epoch(now_ms: int | None = None) -> int:
    """The window the reachability cache is valid for: pages that show reachability key their
    own caches by it, so they are never staler than the answer they embed."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return now // (CACHE_SECONDS * 1000)


def table_reachability(
    table: Table, vacuum_retention: int | None = None, *, wait: bool = True
) -> dict[str, Any] | None:
    """`{latestVersion, logRetentionMs, deletedFileRetentionMs, versions: [...]}`, newest first;
    with `vacuum_retention` (ms) also `vacuumForecast {retentionMs, breaksVersions}`: the
    readable versions a VACUUM run now with that retention would break. Cached per retention,
    since the forecast costs the same replay as the answer itself.

    With `wait=False` on a log longer than `inline_versions()`, None (or the previous answer
    for the same synced state) instead of computing now; the computation runs in the
    background and the next request gets it."""
    now = int(time.time() * 1000)
    state_key, key = _keys(table, vacuum_retention, now)
    with _latest_lock:
        kept = _latest.get(state_key)
    if kept is not None and kept[0] == key and cache.has_key(key):
        # this process's own answer, valid while the cache holds it: no copy out of the cache
        # (unpickling a 100,000-version answer takes seconds)
        return kept[1]
    data = cache.get(key)
    if data is not None:
        with _latest_lock:
            _keep_newest(_latest, state_key, (key, data))
        return data
    if not wait and (table.last_synced_version or 0) >= inline_versions():
        _compute_later(key, state_key, table.location, now, vacuum_retention, table.pk)
        return None if kept is None else kept[1]  # read first: the thread may finish at once
    try:
        data = _compute(table.location, now, vacuum_retention).to_dict()
    except delta_errors.DeltaError as exc:
        raise from_delta(exc) from exc
    _remember(key, state_key, data)
    return data


def _keys(table: Table, vacuum_retention: int | None, now: int) -> tuple[str, str]:
    """(the key of the table's synced state, and of that state's answer in this clock window)."""
    forecast = "" if vacuum_retention is None else f":vac{vacuum_retention}"
    state_key = f"reach:{synced_key(table)}{forecast}"
    return state_key, f"{state_key}:{cache_epoch(now)}"


def answer_token(table: Table) -> str:
    """Names the reachability answer a page asking now with `wait=False` would show, without
    reading it: pages that embed it key their own caches by this token (a page rendered while
    the answer is computed is cached too, and replaced once the answer is there)."""
    now = int(time.time() * 1000)
    state_key, key = _keys(table, None, now)
    if (table.last_synced_version or 0) < inline_versions() or cache.has_key(key):
        return key  # computed inline, or there
    with _latest_lock:
        kept = _latest.get(state_key)
    return f"{key}:pending" if kept is None else f"{key}:{kept[0]}"  # or the previous window's


def inline_versions() -> int:
    """Above this many versions, pages do not wait for a reachability answer."""
    return int(getattr(settings, "DELTAWEB_REACHABILITY_INLINE_VERSIONS", 5000))


logger = logging.getLogger(__name__)
# one background computation at a time per process: each is a full replay's worth of CPU
_background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reachability")
_queued: set[str] = set()
# the newest answer per synced state (with its key: the clock window it was computed in),
# whatever its window: a page shows it while the next window's answer is computed (it can
# only be older by the time one computation takes)
_latest: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()
_latest_lock = threading.Lock()


def _keep_newest(kept: OrderedDict[str, Any], key: str, value: Any) -> None:
    """Store `value` as the newest of `kept`, dropping the oldest beyond MAX_STATES."""
    kept.pop(key, None)
    kept[key] = value
    while len(kept) > MAX_STATES:
        kept.popitem(last=False)


def _remember(key: str, state_key: str, data: dict[str, Any]) -> None:
    cache.set(key, data, CACHE_SECONDS)
    with _latest_lock:
        _keep_newest(_latest, state_key, (key, data))


def shared_cache() -> bool:
    """Whether the cache is every process's (DELTAWEB_CACHE_URL): then workers compute."""
    return bool(getattr(settings, "DELTAWEB_CACHE_URL", ""))


COMPUTE_TASK = "tables.compute_reachability"


def precompute(table: Table) -> None:
    """After a sync of a long log, with a shared cache: a worker computes the answer now, so no
    page waits for it and no web process computes it (sent once per window and state)."""
    if shared_cache() and (table.last_synced_version or 0) >= inline_versions():
        _send_compute(table.pk, _keys(table, None, int(time.time() * 1000))[1], None)


def _send_compute(table_id: int, key: str, vacuum_retention: int | None) -> None:
    from tables.services import jobs

    if cache.add(f"{key}:sent", 1, CACHE_SECONDS):  # one message per answer, whatever the process
        try:
            jobs.send(COMPUTE_TASK, table_id, vacuum_retention)
        except Exception:  # the queue is down: the next page asks again once the mark expires
            cache.delete(f"{key}:sent")
            logger.warning("could not send the reachability of table %s to a worker", table_id, exc_info=True)


def compute_in_worker(table_id: int, vacuum_retention: int | None = None) -> bool:
    """The worker's side: the answer computed and put in the shared cache."""
    table = Table.objects.filter(pk=table_id).first()
    if table is None:
        return False
    table_reachability(table, vacuum_retention, wait=True)
    return True


def _compute_later(
    key: str, state_key: str, location: str, now: int, vacuum_retention: int | None, table_id: int | None = None
) -> None:
    if shared_cache() and table_id is not None:
        _send_compute(table_id, key, vacuum_retention)
        return
    with _latest_lock:
        if key in _queued:
            return
        _queued.add(key)

    def run() -> None:
        try:
            _remember(key, state_key, _compute(location, now, vacuum_retention).to_dict())
        except Exception:  # a page asking later computes again; its own path reports errors
            logger.warning("reachability of %s failed in the background", state_key, exc_info=True)
        finally:
            with _latest_lock:
                _queued.discard(key)

    _background.submit(run)


# The states of the last few tables answered, in this process: the next answer after a sync
# reads only the new commits and compares the file listing (tables.delta.history.reachability
# update_state), instead of replaying the whole log again. A process without one (another
# worker, after a restart) computes it in full once.
MAX_STATES = 4
_states: OrderedDict[str, ReachState] = OrderedDict()
_states_lock = threading.Lock()


def _state(location: str) -> ReachState:
    """The table's state, updated with what changed since this process last looked (hold
    _states_lock: an update changes the state in place)."""
    state = _states.pop(location, None)
    state = update_state(state, location)
    _keep_newest(_states, location, state)
    return state


def _compute(location: str, now: int, vacuum_retention: int | None) -> Reachability:
    with _states_lock:  # one at a time, and the state unchanged while it is read
        state = _state(location)
        result = answer(state, location, now, vacuum_retention)
        _mark_recoverable(result, state, location, now)
        return result


# --- recovery from a versioned bucket ------------------------------------------------------------


@dataclass(slots=True)
class Recovery:
    """What a table's versioned bucket could give back: the noncurrent versions of its gone
    objects, the view of the table with them back, its state and its answer (None when there
    is nothing to recover)."""

    storage: Storage
    bucket: VersionedBucket
    recoverable: Recoverable
    view: RecoveryView
    state: ReachState
    answer: Reachability | None


def _recovery(state: ReachState, location: str, now: int) -> Recovery:
    """The recovery of a table (NotVersionedError when its store keeps no versions): one
    listing of the versions under its prefix; the map computed again only on the view."""
    storage = as_storage(location)
    bucket = versioned_bucket(storage)
    found = recoverable_objects(storage, bucket)
    view = RecoveryView(storage, bucket, found)
    if not found.objects:
        return Recovery(storage, bucket, found, view, state, None)
    rstate = recovery_state(state, view, found.objects)
    return Recovery(storage, bucket, found, view, rstate, answer(rstate, view, now))


def _mark_recoverable(result: Reachability, state: ReachState, location: str, now: int) -> None:
    """Mark the unreadable versions that the bucket's noncurrent versions would make readable
    again. Nothing is asked of the store when every version is readable or the table is not
    in an object store; a store without versioning, or one that refuses the listing (its
    credentials may not allow ListBucketVersions), leaves the marks unknown (None)."""
    if all(v.readable for v in result.versions) or not is_object_location(location):
        return
    try:
        found = _recovery(state, location, now)
    except delta_errors.NotVersionedError:
        return
    except (delta_errors.DeltaError, OSError) as exc:
        logger.warning("recoverable versions of %s could not be listed: %s", location, exc)
        return
    mark_recoverable(result, found.answer)


def recovery_of(location: str) -> tuple[Reachability, Recovery]:
    """The table's reachability now (recoverable versions marked) and its recovery: what a
    restore that recovers files first plans on. NotVersionedError when the store keeps no
    versions; other storage errors as they come."""
    now = int(time.time() * 1000)
    with _states_lock:
        state = _state(location)
        result = answer(state, location, now)
        found = _recovery(state, location, now)
    mark_recoverable(result, found.answer)
    return result, found


def with_file_state(location: str, use: Callable[[ReachState], T]) -> T:
    """`use` run on the table's kept state brought up to date without listing the table's files
    (the sync's look at vanished files lists them itself, or asks about a few), under the kept
    states' lock: the state is this process's, shared with the pages' answers."""
    with _states_lock:
        state = _states.pop(location, None)
        state = update_state(state, location, list_files=False)
        _keep_newest(_states, location, state)
        return use(state)


def version_reachability(table: Table, version: int, *, wait: bool = True) -> dict[str, Any] | None:
    """One version's entry, or None when the version is not in the table's log at all (or,
    with `wait=False`, when the answer for a long log is still being computed)."""
    data = table_reachability(table, wait=wait)
    for entry in data["versions"] if data else ():
        if entry["version"] == version:
            return entry
    return None


FORECAST_LISTED = 1000


def vacuum_forecast(data: dict[str, Any], limit: int = FORECAST_LISTED) -> dict[str, Any] | None:
    """The forecast of a `table_reachability` answer, its list bounded (newest first): a
    100,000-version table must not answer with 100,000 numbers."""
    forecast = data.get("vacuumForecast")
    if forecast is None:
        return None
    broken = forecast["breaksVersions"]
    return {
        "retentionMs": forecast["retentionMs"],
        "count": len(broken),
        "breaksVersions": broken[:limit],
        "truncated": len(broken) > limit,
    }
