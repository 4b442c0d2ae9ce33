"""Reachability of a registered table's versions (which can still be read or restored, and
why not), computed by the core and kept in the shared cache (settings.CACHES["shared"]: Redis,
or a table of the database) as runs (`ReachRuns`), for every process to read: one answer per
synced state, valid until the next sync. The retention windows move with the clock: each
process derives the current window's answer from the stored one (`ReachRuns.at`, a vectorised
pass over the versions' timestamps), never computing it again. The missing files' names are
stored apart, in blocks, and read only for the one version whose entry lists them
(`version_reachability`, the API's pages); lists of versions get counts.

Who computes: a log shorter than DELTAWEB_REACHABILITY_INLINE_VERSIONS versions is answered
where it is asked (it costs little); a longer one only by a Celery worker, after each sync. A
web process says it is being computed meanwhile, and the API waits for the worker a few
seconds. A first full map of a 100,000-version table takes a minute of CPU and hundreds of MB:
no web process holds it. A VACUUM forecast (its horizon moves over every removal) is still
computed per window, by a worker on a long log."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import caches

from tables.delta import errors as delta_errors
from tables.delta.history.reachability.compute import (
    Reachability,
    ReachState,
    answer,
    mark_recoverable,
    parse_interval,
    recovery_state,
    update_state,
)
from tables.delta.history.reachability.runs import STORED_FORMAT, MissingNames, ReachRuns
from tables.delta.storage.api import Storage
from tables.delta.storage.backends.registry import VersionedBucket
from tables.delta.storage.objectstore_config import is_object_location
from tables.delta.storage.opening import as_storage
from tables.delta.storage.versions import Recoverable, RecoveryView, recoverable_objects, versioned_bucket
from tables.models import Table
from tables.services.errors import ServiceError, from_delta, printable
from tables.services.history.query import synced_key
from tables.services.versions.pinned import mark_pin

CACHE_SECONDS = 300  # an answer's window
KEEP_SECONDS = 7 * 86400  # an answer is shown after its window while the next one is computed
T = TypeVar("T")
RETENTION_HELP = 'Give a retention such as "7 days", "interval 1 week" or "24 hours".'
PENDING = "This table's log is long: what can still be read is being computed; it is shown here when done."
COMPUTE_TASK = "tables.compute_reachability"
logger = logging.getLogger(__name__)


def parse_retention(text: str | None) -> int:
    """A VACUUM retention a person typed, in ms; ServiceError `invalid` when unreadable."""
    ms = parse_interval(text)
    shown = printable((text or "").strip(), 40)
    if ms is None:
        raise ServiceError(f"'{shown}' is not a retention. {RETENTION_HELP}" if shown else RETENTION_HELP)
    if ms > MAX_RETENTION_MS:  # the forecast's times are 64-bit milliseconds, stored and shown
        raise ServiceError(f"'{shown}' is longer than any retention (at most 100 years). {RETENTION_HELP}")
    return ms


MAX_RETENTION_MS = 100 * 366 * 86_400_000


def _now_ms() -> int:
    """The clock the answers' windows read (one place, for tests to move)."""
    return int(time.time() * 1000)


def cache_epoch(now_ms: int | None = None) -> int:
    """The window the reachability cache is valid for: pages that show reachability key their
    own caches by it, so they are never staler than the answer they embed."""
    now = _now_ms() if now_ms is None else now_ms
    return now // (CACHE_SECONDS * 1000)


def inline_versions() -> int:
    """Logs with this many versions or more are answered by a worker only."""
    return int(getattr(settings, "DELTAWEB_REACHABILITY_INLINE_VERSIONS", 5000))


def wait_seconds() -> float:
    """How long the API waits for a worker's answer before it says to ask again."""
    return float(getattr(settings, "DELTAWEB_REACHABILITY_WAIT_SECONDS", 20))


def _shared() -> Any:
    return caches["shared"]


def _state_key(table: Table, vacuum_retention: int | None) -> str:
    """Names the answer for the table's synced state (and the forecast's retention); the
    location is in it so that a table registered again under a reused id never meets an
    answer of the old one."""
    where = hashlib.sha256(table.location.encode()).hexdigest()[:12]
    forecast = "" if vacuum_retention is None else f":vac{vacuum_retention}"
    return f"reach{STORED_FORMAT}:{synced_key(table)}:{where}{forecast}"  # an older format is never read


def is_long(table: Table) -> bool:
    """Whether the table's synced log is long enough that only a worker answers for it."""
    return (table.last_synced_version or 0) >= inline_versions()


def table_reachability(table: Table, vacuum_retention: int | None = None, *, wait: bool = True) -> ReachRuns | None:
    """The table's answer (`ReachRuns`: every version newest first, looked up by version);
    with `vacuum_retention` (ms) its VACUUM forecast too: the readable versions a VACUUM run
    now with that retention would break. Kept per retention, since the forecast costs the same
    replay as the answer itself.

    The answer is computed once per synced state (a long log's by a worker, after the sync)
    and stored; a later window's is derived from it in this process (`ReachRuns.at`: only the
    retention windows move with the clock), never computed again. A forecast's horizon moves
    with the clock too, through every removal: it is computed per window, as before. When a
    long log has no answer yet: None with `wait=False`, else the worker is waited for up to
    `wait_seconds()`, then ServiceError `reachability_pending` (503)."""
    now = _now_ms()
    state_key, epoch = _state_key(table, vacuum_retention), cache_epoch(now)
    if vacuum_retention is None:
        return _window(table, state_key, epoch, now, wait)
    found = _stored(state_key, epoch)
    if found is not None and found[0] == epoch:
        return found[1]
    if not is_long(table):
        return _compute_and_store(table, vacuum_retention, state_key, now)
    if _send_compute(table.pk, f"{state_key}:{epoch}", vacuum_retention):
        found = _stored(state_key, epoch) or found  # a worker that runs tasks at once (eager) has it
    if found is not None:
        return found[1]  # the previous window's, while the worker computes this one's
    return _waited(lambda: _stored(state_key, epoch), wait)


def _waited(look: Callable[[], tuple[int, ReachRuns] | None], wait: bool) -> ReachRuns | None:
    """The worker's answer once `look` finds it, within `wait_seconds()` (None at once without
    `wait`), else ServiceError `reachability_pending`."""
    if not wait:
        return None
    deadline = time.monotonic() + wait_seconds()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        found = look()
        if found is not None:
            return found[1]
    raise ServiceError(PENDING, code="reachability_pending", status=503)


def _window(table: Table, state_key: str, epoch: int, now: int, wait: bool) -> ReachRuns | None:
    """The answer of this window: derived from the state's stored answer (this process's copy,
    else the shared cache's); computed where asked on a short log without one, by a worker
    (asked once per state) on a long log."""
    found = _derived(state_key, epoch, now)
    if found is not None:
        return found
    if not is_long(table):
        _compute_and_store(table, None, state_key, now)
        return _derived(state_key, epoch, now)
    if _send_compute(table.pk, f"{state_key}:answer", None):
        found = _derived(state_key, epoch, now)  # a worker that runs tasks at once (eager) has it
    if found is not None:
        return found
    return _waited(lambda: _pair(_derived(state_key, epoch, now)), wait)


def _pair(found: ReachRuns | None) -> tuple[int, ReachRuns] | None:
    return None if found is None else (0, found)


def answer_token(table: Table) -> str:
    """Names the answer a page asking now with `wait=False` would show, without deriving it:
    pages that embed it key their own caches by this token (a page rendered while the answer
    is computed is cached too, and replaced once the answer is there)."""
    now = _now_ms()
    state_key, epoch = _state_key(table, None), cache_epoch(now)
    if not is_long(table) or _base(state_key) is not None:
        return f"{state_key}:{epoch}"  # this window's, derived from the state's answer
    return f"{state_key}:pending"


# the answers this process read last: per state, the stored answer and the window derived from
# it (state key -> (epoch, derived, stored)); forecasts per window (state key -> (epoch, answer))
MAX_KEPT = 8
_kept: OrderedDict[str, tuple[int, ReachRuns, ReachRuns]] = OrderedDict()
_forecasts: OrderedDict[str, tuple[int, ReachRuns]] = OrderedDict()
_kept_lock = threading.Lock()


def _keep_newest(kept: OrderedDict[str, Any], key: str, value: Any, most: int) -> None:
    """Store `value` as the newest of `kept`, dropping the oldest beyond `most`."""
    kept.pop(key, None)
    kept[key] = value
    while len(kept) > most:
        kept.popitem(last=False)


def _keep_answer(state_key: str, value: tuple[int, ReachRuns, ReachRuns]) -> None:
    """Keep a state's answer in this process, dropping the same table's answers of earlier
    states (a sync made them stale: a worker living through syncs holds one per table)."""
    table = _table_part(state_key)
    with _kept_lock:
        for key in [k for k in _kept if k != state_key and _table_part(k) == table]:
            del _kept[key]
        _keep_newest(_kept, state_key, value, MAX_KEPT)


def _table_part(state_key: str) -> tuple[str, str]:
    """(table id, location hash) of a state key (`_state_key`'s layout)."""
    parts = state_key.split(":")
    return parts[1], parts[4] if len(parts) > 4 else ""


def _base(state_key: str) -> ReachRuns | None:
    """The answer stored for this state (computed at some time of it): this process's copy,
    else the shared cache's (without the missing files' names: `_StoredNames` reads them)."""
    with _kept_lock:
        mine = _kept.get(state_key)
    if mine is not None:
        return mine[2]
    value = _shared().get(state_key)
    if value is None:
        return None
    base = ReachRuns.from_bytes(value, _StoredNames(state_key))
    _keep_answer(state_key, (-1, base, base))
    return base


def _derived(state_key: str, epoch: int, now: int) -> ReachRuns | None:
    """This window's answer: kept once derived in this process (a few ms at 1,000,000 versions,
    once per window)."""
    with _kept_lock:
        mine = _kept.get(state_key)
    if mine is not None and mine[0] == epoch:
        return mine[1]
    base = _base(state_key)
    if base is None:
        return None
    derived = base.at(now)
    with _kept_lock:
        _keep_newest(_kept, state_key, (epoch, derived, base), MAX_KEPT)
    return derived


def _stored(state_key: str, epoch: int) -> tuple[int, ReachRuns] | None:
    """A forecast's (its window, the answer) last stored, or None: this process's copy when it
    is the current window's, else from the shared cache (its window read first, a few bytes;
    the answer itself only when it is newer than the copy)."""
    with _kept_lock:
        mine = _forecasts.get(state_key)
    if mine is not None and mine[0] == epoch:
        return mine
    shared = _shared()
    stamp = shared.get(f"{state_key}:epoch")
    if stamp is None or (mine is not None and mine[0] >= stamp):
        return mine
    value = shared.get(state_key)
    if value is None:
        return mine
    found = (value[0], ReachRuns.from_bytes(value[1], _StoredNames(state_key)))
    with _kept_lock:
        _keep_newest(_forecasts, state_key, found, MAX_KEPT)
    return found


class _StoredNames:
    """The missing files' names of a stored answer, read from the shared cache when a version's
    own page lists them: the index of the blocks first, then the blocks that can hold the
    version (`MissingNames`); nothing of them stays in the process between two such reads."""

    def __init__(self, state_key: str) -> None:
        self.key = f"{state_key}:names"

    def paths(self, version: int) -> list[str] | None:
        shared = _shared()
        index = shared.get(self.key)
        if index is None:
            return None

        def fetch(wanted: list[int]) -> list[bytes | None]:
            found = shared.get_many([f"{self.key}:{i}" for i in wanted])
            return [found.get(f"{self.key}:{i}") for i in wanted]

        return MissingNames.reader(index, fetch).paths(version)


def _compute_and_store(table: Table, vacuum_retention: int | None, state_key: str, now: int) -> ReachRuns:
    try:
        result = _compute(table.location, now, vacuum_retention)
    except delta_errors.DeltaError as exc:
        raise from_delta(exc) from exc
    runs = ReachRuns.of(result)
    epoch = cache_epoch(now)
    shared = _shared()
    # the names first: a reader that finds the answer finds its names
    index, blocks = MissingNames.blocks_of(result.gone)
    names_key = f"{state_key}:names"
    shared.set_many({f"{names_key}:{i}": b for i, b in enumerate(blocks)}, KEEP_SECONDS)
    shared.set(names_key, index, KEEP_SECONDS)
    runs.names = _StoredNames(state_key)  # type: ignore[assignment]  # the process holds none either
    if vacuum_retention is None:
        shared.set(state_key, runs.to_bytes(), KEEP_SECONDS)
        _keep_answer(state_key, (epoch, runs, runs))
        return runs
    shared.set(state_key, (epoch, runs.to_bytes()), KEEP_SECONDS)
    shared.set(f"{state_key}:epoch", epoch, KEEP_SECONDS)  # after the answer: a reader never finds the mark first
    with _kept_lock:
        _keep_newest(_forecasts, state_key, (epoch, runs), MAX_KEPT)
    return runs


def precompute(table: Table) -> None:
    """After a sync of a long log: a worker computes the state's answer now, so no page waits
    for it (sent once per state, whatever the process; its later windows are derived)."""
    if is_long(table):
        _send_compute(table.pk, f"{_state_key(table, None)}:answer", None)


def _send_compute(table_id: int, key: str, vacuum_retention: int | None) -> bool:
    """Whether a worker was asked now (not already within this window)."""
    from tables.services.jobs import lifecycle as jobs

    return jobs.send_once(COMPUTE_TASK, f"{key}:sent", CACHE_SECONDS, table_id, vacuum_retention)


def compute_in_worker(table_id: int, vacuum_retention: int | None = None) -> bool:
    """The worker's side: the answer computed and stored in the shared cache (the state's once;
    a forecast once per window)."""
    table = Table.objects.filter(pk=table_id).first()
    if table is None:
        return False
    now = _now_ms()
    state_key = _state_key(table, vacuum_retention)
    if vacuum_retention is None:
        if _base(state_key) is None:  # another worker may have done it
            _compute_and_store(table, None, state_key, now)
        return True
    found = _stored(state_key, cache_epoch(now))
    if found is None or found[0] != cache_epoch(now):
        _compute_and_store(table, vacuum_retention, state_key, now)
    return True


# The states of the last few tables answered, in this process: the next answer after a sync
# reads only the new commits and compares the file listing (tables.delta.history.reachability.compute
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
    _keep_newest(_states, location, state, MAX_STATES)
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
    now = _now_ms()
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
        _keep_newest(_states, location, state, MAX_STATES)
        return use(state)


def version_reachability(table: Table, version: int, *, wait: bool = True, pins: bool = True) -> dict[str, Any] | None:
    """One version's entry, or None when the version is not in the table's log at all (or,
    with `wait=False`, when the answer for a long log is still being computed). With `pins`
    (the default) a version a pin keeps is marked readable from it (`with_pins`); without,
    the entry says only what the table itself still gives (tables.services.versions.source)."""
    data = table_reachability(table, wait=wait)
    if data is None:
        return None
    entry = data.entry(version)
    if not pins or entry is None:
        return entry
    from tables.services.pins.queries import holding_pin

    pin = holding_pin(table, version)
    return mark_pin(entry, {version: pin} if pin is not None else {})


FORECAST_LISTED = 1000  # versions a forecast lists: a 100,000-version table must not answer with them all
