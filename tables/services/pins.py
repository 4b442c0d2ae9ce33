"""Pins: a named, reasoned, optionally expiring promise that a version of a table stays
readable, whatever VACUUM and log cleanup any engine runs on the table.

Creating a pin writes the version into the pin store deltaweb owns (`DELTAWEB_PIN_STORE`) with
the core's `keep_version`: a table of its own whose version 0 is the pinned version, its files
hard links where the store shares the table's file system (no new data bytes), server-side
copies inside one object store, else copies. Removing a pin before it expires is a request an
approver (never the requester) accepts, as restores are; every step is a PinEvent, the audit.
Reading a pinned version whose log or files the table lost goes to the pin store
(`pinned_snapshot`, used by tables.services.versions). A pin by legal holds names the held
objects; every sync (and the beat's sweep) looks at their current state whatever the log still
says, and once a VACUUM deleted them (a delete marker above each held version) the held versions
are copied into the pin store (`settle_held_pins`), so the kept table, self-contained, reads
again in any engine, the holds staying until the pin goes. A pin left "writing" is resumed or
failed by the beat's sweep (`sweep_pins`), with the reason.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from tables.delta import errors as delta_errors
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.api import is_uri
from tables.delta.write.keep import HELD_LOOKED_AT, discard_kept, held_gone, keep_version, settle_held
from tables.delta.write.keep_place import check_pin_store
from tables.models import Pin, PinEvent, PinState, Table
from tables.services import faults, jobs
from tables.services.access import roles
from tables.services.errors import ServiceError, from_delta, one_line
from tables.services.lookup import INT64_MAX

logger = logging.getLogger("tables.pins")

MAX_NAME = 200
MAX_TEXT = 5000
PROTECTION = {
    "link": "hard links",
    "present": "hard links",
    "copy": "copies",
    "server-copy": "server-side copies",
    "hold": "legal holds",
}
NOT_PROTECTED = "not protected"  # a pin whose version could not be kept: said, never a silent fallback
MAX_RESUMES = 2  # times the sweep sends a pin left in "writing" again before it fails it
WORKER_WRITING = "a worker is writing it"  # the worker's event; its time is the last sign of life


def event(pin: Pin, actor: Any, from_state: str, to_state: str, note: str = "") -> None:
    """One step of a pin's life, with who and when (the audit trail)."""
    PinEvent.objects.create(pin=pin, actor=actor, from_state=from_state, to_state=to_state, note=note[:MAX_TEXT])


def _text(value: Any, what: str, limit: int, required: bool = True) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if required and not text:
        raise ServiceError(f"Give the pin's {what}.", "invalid_pin")
    if len(text) > limit:
        raise ServiceError(f"The pin's {what} is too long (at most {limit:,} characters).", "invalid_pin")
    if "\x00" in text:  # no database stores it as text
        raise ServiceError(f"The pin's {what} holds a NUL character.", "invalid_pin")
    return text


def _version(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        raise ServiceError(f"The version to pin must be a number (0 or more), not {str(value)[:40]!r}.", "invalid_pin")
    return value


STORE_REFUSED = (
    "Pins cannot be written: the pin store is {why}; an administrator must set DELTAWEB_PIN_STORE to a "
    "directory of its own outside every table and allowed root (see docs/pins.md)."
)


def check_store(look: bool = True) -> None:
    """The pin store's rule (the core's `check_pin_store`: not a system directory, not an
    allowed root nor above one, not inside a Delta table), checked again before each pin is
    written (the app's start checks it too, tables/apps.py). A ServiceError that names no
    server directory."""
    try:
        check_pin_store(str(settings.DELTAWEB_PIN_STORE), list(settings.DELTAWEB_ALLOWED_ROOTS), look=look)
    except delta_errors.PinStoreRefusedError as exc:
        raise ServiceError(STORE_REFUSED.format(why=exc.details.get("why", "refused")), exc.code, 503) from None


def store_location(table: Table, pin: Pin) -> str:
    """Where a pin's kept table lives: <store>/<table id>/<pin id>-v<version>."""
    root = str(settings.DELTAWEB_PIN_STORE).rstrip("/")
    return f"{root}/{table.pk}/{pin.pk}-v{pin.version}"


def _protection(placed: dict[str, int]) -> str:
    kinds = {PROTECTION.get(k, k) for k, n in placed.items() if n}
    if not kinds:
        return "nothing to hold (no files)"  # an empty version: its log alone keeps it
    return " and ".join(sorted(kinds))


def create_pin(
    table: Table,
    version: Any,
    name: Any,
    reason: Any,
    user: Any,
    expires_at: datetime | None = None,
    background: bool | None = None,
) -> Pin:
    """Pin `version` of `table`: the row, then the version written into the pin store. On
    local disk (hard links: seconds for 10,000 files) it is written now, and a version that
    cannot be kept is refused with nothing saved. Where the table or the store is an object
    store (`background` None), or with `background`, the pin is `writing` and a worker keeps the
    version (`write_pin`): a row first, sent once the transaction commits. Refused: a name the
    table's pins have, an expiry in the past, a user without the role."""
    if not roles.can_request_restore(user):
        raise ServiceError("Pinning a version needs the analyst or approver role (or staff).", "permission_denied", 403)
    version = _version(version)
    name, reason = _text(name, "name", MAX_NAME), _text(reason, "reason", MAX_TEXT)
    if expires_at is not None and expires_at <= timezone.now():
        raise ServiceError("The pin's expiry must lie in the future.", "invalid_pin")
    check_store()
    if background is None:
        background = is_uri(table.location) or is_uri(str(settings.DELTAWEB_PIN_STORE))
    try:
        with transaction.atomic():
            pin = Pin.objects.create(
                table=table, version=version, name=name, reason=reason, expires_at=expires_at, created_by=user,
                state=PinState.WRITING,
            )  # fmt: skip
            pin.store_location = store_location(table, pin)
            pin.save(update_fields=["store_location"])
            event(pin, user, "", PinState.WRITING, f"pin version {version}: {reason}")
            if background:
                transaction.on_commit(lambda: _send(pin.pk))
    except IntegrityError:
        raise ServiceError(f"This table has a pin named {name!r} already.", "pin_exists", 409) from None
    if background:
        return pin
    try:
        return _write(pin, user)
    except delta_errors.DeltaError as exc:
        if not isinstance(exc, delta_errors.KeepTargetError):  # never another's kept table
            _delete_kept(pin)
        pin.delete()  # nothing was promised: the row goes with the refusal
        raise from_delta(exc, table=table) from exc


def _send(pk: int) -> None:
    try:
        jobs.send(jobs.PIN_TASK, pk)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        Pin.objects.filter(pk=pk, state=PinState.WRITING).update(
            error=f"the task queue is unreachable ({type(exc).__name__}); the pin waits to be written"
        )


def _write(pin: Pin, actor: Any) -> Pin:
    """Keep the pin's version in the store (hold=None: legal holds where the table's bucket has
    Object Lock, else links or copies) and make the pin active; the store checked first."""
    check_store()
    kept = keep_version(
        pin.table.location, pin.version, pin.store_location, hold=None,
        on_placed=lambda _result: faults.reached("pin-placed"),  # the fault suite stops a worker here
    )  # fmt: skip
    protection = _protection(kept.placed)
    Pin.objects.filter(pk=pin.pk, state=PinState.WRITING).update(
        state=PinState.ACTIVE, protection=protection, files=kept.files, bytes=kept.bytes,
        bytes_copied=kept.bytes_copied, error="",
    )  # fmt: skip
    event(pin, actor, PinState.WRITING, PinState.ACTIVE, f"kept version {pin.version} ({protection})")
    pin.refresh_from_db()
    return pin


def _fail(pin: Pin, why: str, discard: bool) -> dict[str, Any]:
    """A pin the store could not protect: failed, "not protected", with why; what was written
    of it deleted (never another's kept table: `discard` False)."""
    message = one_line(why)
    moved = Pin.objects.filter(pk=pin.pk, state=PinState.WRITING).update(
        state=PinState.FAILED, protection=NOT_PROTECTED, error=message
    )
    if not moved:
        return {"skipped": True}  # written or failed meanwhile by another
    event(pin, None, PinState.WRITING, PinState.FAILED, f"{NOT_PROTECTED}: {message}")
    if discard:
        _delete_kept(pin)
    return {"failed": message}


def _last_sign(pin: Pin) -> datetime | None:
    return PinEvent.objects.filter(pin=pin).aggregate(at=Max("at"))["at"]


def write_pin(pk: int) -> dict[str, Any]:
    """The worker's part: keep a `writing` pin's version, leaving a sign of life (an event whose
    time a heartbeat moves on) that the beat's sweep reads; a version that cannot be kept makes
    the pin `failed` and "not protected", with why, and what was written of it is deleted. A pin
    another worker is writing (its sign of life fresh) is left to it."""
    pin = Pin.objects.select_related("table").filter(pk=pk, state=PinState.WRITING).first()
    if pin is None:
        return {"skipped": True}
    last = PinEvent.objects.filter(pin=pin).order_by("-at", "-pk").first()
    if last is not None and last.note == WORKER_WRITING and last.at > timezone.now() - _silent_after():
        return {"skipped": True, "writing": "another worker"}
    sign = PinEvent.objects.create(pin=pin, from_state=PinState.WRITING, to_state=PinState.WRITING, note=WORKER_WRITING)

    def touch() -> None:
        PinEvent.objects.filter(pk=sign.pk).update(at=timezone.now())

    try:
        with jobs.heartbeat(touch, float(settings.DELTAWEB_JOB_HEARTBEAT_SECONDS), f"pin-{pk}-heartbeat"):
            pin = _write(pin, None)
    except ServiceError as exc:  # the store refused: nothing was written
        return _fail(pin, exc.message, discard=False)
    except delta_errors.DeltaError as exc:
        why = from_delta(exc, table=pin.table).message
        return _fail(pin, why, discard=not isinstance(exc, delta_errors.KeepTargetError))
    return {"state": pin.state, "protection": pin.protection}


def _silent_after() -> timedelta:
    """How long a writing pin may show no sign of life (DELTAWEB_JOB_SILENT_MINUTES, as jobs)."""
    return timedelta(minutes=float(settings.DELTAWEB_JOB_SILENT_MINUTES))


def sweep_pins(older_than: timedelta | None = None, resumes: int = MAX_RESUMES) -> dict[str, list[int]]:
    """The beat's sweep of pins: a pin left in "writing" with no sign of life for `older_than`
    (DELTAWEB_JOB_SILENT_MINUTES: its worker was killed or restarted, or the task queue lost or
    never got its message) is resumed (what was written of it deleted, the task sent again) at
    most `resumes` times, then failed, each with the reason as an event; due pins expire; held
    pins whose objects are gone are settled (`settle_held_pins`), whatever the log says.
    {"resumed": [...], "failed": [...], "expired": [n], "settled": [...]}."""
    horizon = timezone.now() - (older_than if older_than is not None else _silent_after())
    resumed, failed = [], []
    writing = Pin.objects.filter(state=PinState.WRITING).select_related("table").annotate(last=Max("events__at"))
    for pin in writing.filter(last__lt=horizon):
        since = pin.last.isoformat(timespec="seconds")
        done = pin.events.filter(note__startswith="resumed by the sweep").count()
        why = (
            f"no worker finished writing it: no sign of life since {since} (its worker was killed or restarted, "
            f"or the task queue lost its message)"
        )
        if done < resumes:
            _delete_kept(pin)  # what a stopped writer left: the next write starts clean
            if Pin.objects.filter(pk=pin.pk, state=PinState.WRITING).exists():
                event(
                    pin, None, PinState.WRITING, PinState.WRITING, f"resumed by the sweep ({done + 1}/{resumes}): {why}"
                )
                _send(pin.pk)
                resumed.append(pin.pk)
        elif "failed" in _fail(pin, f"{why}; resumed {done} times, given up", discard=True):
            failed.append(pin.pk)
    settled = []
    held = Pin.objects.filter(state__in=PinState.holding(), protection=PROTECTION["hold"])
    for table in Table.objects.filter(pk__in=held.values("table_id")):
        settled += settle_held_pins(table, quick=True)
    return {"resumed": resumed, "failed": failed, "expired": [expire_pins()], "settled": settled}


def _expired(pin: Pin) -> bool:
    return pin.expires_at is not None and pin.expires_at <= timezone.now()


def request_unpin(pin: Pin, user: Any, reason: Any) -> Pin:
    """Ask to remove a pin. Before its expiry the removal waits for an approver; after it,
    the pin is removed at once (its promise has ended)."""
    if not roles.can_request_restore(user):
        raise ServiceError("Removing a pin needs the analyst or approver role (or staff).", "permission_denied", 403)
    reason = _text(reason, "removal reason", MAX_TEXT)
    if _expired(pin):
        return _remove(pin, user, PinState.EXPIRED, f"removed after its expiry: {reason}")
    with transaction.atomic():
        moved = Pin.objects.filter(pk=pin.pk, state=PinState.ACTIVE).update(
            state=PinState.UNPIN_REQUESTED, removal_requested_by=user, removal_reason=reason
        )
        if moved != 1:
            raise ServiceError(f"Pin #{pin.pk} is not active; only an active pin's removal can be requested.",
                               "invalid_state", 409)  # fmt: skip
        event(pin, user, PinState.ACTIVE, PinState.UNPIN_REQUESTED, f"removal requested: {reason}")
    pin.refresh_from_db()
    return pin


def withdraw_unpin(pin: Pin, user: Any) -> Pin:
    """The requester takes back their own removal request: the pin holds its version again
    (active), the request's fields cleared, and an event says it was withdrawn."""
    current = Pin.objects.filter(pk=pin.pk).values_list("state", "removal_requested_by_id").first()
    if current is None or current[0] != PinState.UNPIN_REQUESTED:
        raise ServiceError(f"Pin #{pin.pk} has no removal request to withdraw.", "invalid_state", 409)
    if current[1] is None or current[1] != getattr(user, "pk", None):
        raise ServiceError(
            "Only the person who asked to remove a pin can withdraw the request.", "permission_denied", 403
        )
    with transaction.atomic():
        moved = Pin.objects.filter(pk=pin.pk, state=PinState.UNPIN_REQUESTED, removal_requested_by=user).update(
            state=PinState.ACTIVE, removal_requested_by=None, removal_reason=""
        )
        if moved != 1:
            raise ServiceError(f"Pin #{pin.pk} has no removal request to withdraw.", "invalid_state", 409)
        event(pin, user, PinState.UNPIN_REQUESTED, PinState.ACTIVE, "removal request withdrawn by its requester")
    pin.refresh_from_db()
    return pin


DECISIONS = ("removal approved", "removal rejected")


def decisions(pin_ids: list[int]) -> dict[int, dict[str, str]]:
    """{pin id: {"by", "note"}}: the last approver's decision on each pin's removal (the note
    says approved or rejected, with the approver's comment), one query."""
    from django.db.models import Q

    which = Q(note__startswith=DECISIONS[0]) | Q(note__startswith=DECISIONS[1])
    out: dict[int, dict[str, str]] = {}
    for e in PinEvent.objects.filter(which, pin_id__in=pin_ids).select_related("actor").order_by("at", "pk"):
        out[e.pin_id] = {"by": e.actor.get_username() if e.actor else "—", "note": e.note}
    return out


def held_by(pin: Pin) -> str:
    """What holds the pin's version now, in words: its protection while it holds it; once
    removed or expired, nothing (its kept files deleted); a failed pin is not protected."""
    if pin.state in PinState.holding():
        return pin.protection or "—"
    if pin.state == PinState.FAILED:
        return NOT_PROTECTED
    if pin.state == PinState.WRITING:
        return "being written"
    return "nothing: released, its kept files deleted"


def _check_can_decide(pin: Pin, user: Any) -> None:
    if not roles.can_approve(user):
        raise ServiceError("Deciding a pin's removal needs the approver role (or staff).", "permission_denied", 403)
    if pin.removal_requested_by_id is not None and pin.removal_requested_by_id == user.pk:
        raise ServiceError(f"You asked to remove pin #{pin.pk}; another approver must decide.", "own_request", 403)


def approve_unpin(pin: Pin, user: Any, comment: Any = "") -> Pin:
    """An approver accepts a removal: the pin is removed and its kept table deleted from the store."""
    _check_can_decide(pin, user)
    comment = _text(comment, "comment", MAX_TEXT, required=False)
    if Pin.objects.filter(pk=pin.pk, state=PinState.UNPIN_REQUESTED).count() != 1:
        raise ServiceError(f"Pin #{pin.pk} has no removal awaiting a decision.", "invalid_state", 409)
    return _remove(pin, user, PinState.REMOVED, f"removal approved{': ' + comment if comment else ''}")


def reject_unpin(pin: Pin, user: Any, comment: Any) -> Pin:
    """An approver refuses a removal (saying why): the pin stays active."""
    _check_can_decide(pin, user)
    comment = _text(comment, "comment saying why the removal is rejected", MAX_TEXT)
    with transaction.atomic():
        moved = Pin.objects.filter(pk=pin.pk, state=PinState.UNPIN_REQUESTED).update(
            state=PinState.ACTIVE, decided_by=user, decided_at=timezone.now()
        )
        if moved != 1:
            raise ServiceError(f"Pin #{pin.pk} has no removal awaiting a decision.", "invalid_state", 409)
        event(pin, user, PinState.UNPIN_REQUESTED, PinState.ACTIVE, f"removal rejected: {comment}")
    pin.refresh_from_db()
    return pin


def _remove(pin: Pin, user: Any, to_state: str, note: str) -> Pin:
    with transaction.atomic():
        current = Pin.objects.select_for_update().filter(pk=pin.pk).values_list("state", flat=True).first()
        if current not in PinState.holding():
            raise ServiceError(f"Pin #{pin.pk} is {current}; it holds nothing to remove.", "invalid_state", 409)
        Pin.objects.filter(pk=pin.pk).update(state=to_state, decided_by=user, decided_at=timezone.now())
        event(pin, user, current, to_state, note)
    _delete_kept(pin)
    pin.refresh_from_db()
    return pin


def _delete_kept(pin: Pin) -> None:
    """Delete the kept table's files (hard links: the table's own files stay); a failure is
    recorded on the pin, never raised at the approver (the row says it is removed)."""
    if not pin.store_location:
        return
    try:
        discard_kept(pin.store_location, pin.table.location)  # holds released, the files, the log last
    except (delta_errors.DeltaError, OSError) as exc:
        Pin.objects.filter(pk=pin.pk).update(error=one_line(f"the kept files were not all deleted: {exc}"))


def expire_pins(now: datetime | None = None) -> int:
    """Pins past their expiry, removed (their kept tables deleted); how many."""
    due = Pin.objects.filter(state__in=PinState.holding(), expires_at__lte=now or timezone.now())
    count = 0
    for pin in due:
        try:
            _remove(pin, None, PinState.EXPIRED, "expired")
            count += 1
        except ServiceError:
            continue  # removed by someone else meanwhile
    return count


def holding_pins(table: Table) -> list[Pin]:
    return list(Pin.objects.filter(table=table, state__in=PinState.holding()).order_by("version", "pk"))


def pins_by_version(table: Table) -> dict[int, list[Pin]]:
    """{version: its holding pins}, one query: what History, Versions and the map mark."""
    out: dict[int, list[Pin]] = {}
    for pin in holding_pins(table):
        out.setdefault(pin.version, []).append(pin)
    return out


def holding_pin(table: Table, version: int) -> Pin | None:
    """The first pin that holds `version` of `table`, if any."""
    pin = Pin.objects.filter(table=table, version=version, state__in=PinState.holding()).order_by("pk").first()
    return pin if pin is not None and pin.store_location else None


def kept_location(pin_id: int) -> str | None:
    """The kept table of a pin that still holds its version (a preview job reads it)."""
    pin = Pin.objects.filter(pk=pin_id, state__in=PinState.holding()).first()
    return pin.store_location if pin is not None and pin.store_location else None


def pinned_snapshot(table: Table, version: int) -> Snapshot | None:
    """The version as its pin keeps it (the kept table's version 0, numbered as the table's
    version), None when no pin holds it."""
    pin = holding_pin(table, version)
    if pin is None:
        return None
    snap = load_snapshot(pin.store_location)  # the kept version: 0, or 1 once held objects were copied
    return dataclasses.replace(snap, version=version)


def held_bytes(table: Table, pins: list[Pin], latest: Snapshot) -> dict[int, int]:
    """{pin id: bytes its version's files take that the latest version does not reference}:
    what a VACUUM of the table would delete but the pin keeps (the pin alone holds them)."""
    live = set(latest.file_paths())
    out: dict[int, int] = {}
    for pin in pins:
        try:
            kept = load_snapshot(pin.store_location)  # latest: settled held pins are at version 1
        except delta_errors.DeltaError:
            out[pin.pk] = 0
            continue
        paths, sizes = kept.file_paths(), kept.files.column("size").to_pylist()
        out[pin.pk] = sum(s for p, s in zip(paths, sizes, strict=True) if p not in live)
    return out


MAX_CHECKED = 5000  # kept files looked for in the table per pin (HEADs on an object store)


def pins_met(table: Table) -> list[tuple[Pin, int, int]]:
    """(pin, files, bytes) of each holding pin whose version's files are gone from the table:
    what the pin alone now keeps (a VACUUM met it). Only files the latest version no longer
    references are looked for, at most MAX_CHECKED per pin; the rest of those count as gone."""
    from tables.delta.storage.opening import as_storage

    pins = holding_pins(table)
    if not pins:
        return []
    storage = as_storage(table.location)
    live = set(load_snapshot(table.location).file_paths())
    out = []
    for pin in pins:
        try:
            kept = load_snapshot(pin.store_location)  # latest: settled held pins are at version 1
        except delta_errors.DeltaError:
            continue
        sizes = kept.files.column("size").to_pylist()
        files = nbytes = 0
        for i, (path, size) in enumerate(zip(kept.file_paths(), sizes, strict=True)):
            if path in live:
                continue
            if i < MAX_CHECKED and _present(storage, path):
                continue
            files, nbytes = files + 1, nbytes + int(size or 0)
        if files:
            out.append((pin, files, nbytes))
    return out


QUICK_LOOK = 32  # held objects the sweep looks at per pin, at random
SETTLED = "held versions copied into the pin store"  # the settling event's words


def _live_objects(table: Table) -> set[str]:
    """The object paths the table's latest version names (no VACUUM deletes them)."""
    from tables.delta.storage.opening import as_storage

    storage = as_storage(table.location)
    out = set()
    for path in load_snapshot(table.location).file_paths():
        try:
            out.add(storage.object_ref(storage.resolve(path))[1])
        except (delta_errors.DeltaError, ValueError):
            continue
    return out


def settle_held_pins(table: Table, quick: bool = False) -> list[int]:
    """The pins by legal holds of `table` whose held objects are gone from the table's bucket
    (a delete marker above the held version: a VACUUM, whatever the log still says after a
    checkpoint and a log cleanup) settled: each held version copied into the pin store and the
    kept table given a version naming the copies by relative paths (keep.settle_held), with an
    event on the pin. The ids of the pins settled; a pin that could not be settled says why in
    an event and stays. `quick` (the beat's sweep, every minute, for deletes no commit tells
    of): a sample of the held objects, without replaying the table's latest version."""
    settled, live = [], None
    for pin in holding_pins(table):
        if pin.protection != PROTECTION["hold"] or not pin.store_location:
            continue
        if pin.events.filter(note__contains=SETTLED).exists():
            continue  # settled before: its kept table names its own copies
        try:
            if live is None and not quick:
                live = _live_objects(table)
            gone = held_gone(table.location, pin.store_location, live, limit=QUICK_LOOK if quick else HELD_LOOKED_AT)
            if not gone:
                continue
            done = settle_held(table.location, pin.store_location)
        except (delta_errors.DeltaError, OSError) as exc:
            event(pin, None, pin.state, pin.state, one_line(f"the held objects could not be copied: {exc}")[:1000])
            continue
        if done is not None:
            note = f"the held objects were deleted ({len(gone)} looked at behind a delete marker): "
            note += f"{done['copied']} {SETTLED}"
            event(pin, None, pin.state, pin.state, f"{note} ({done['bytes']} bytes)")
            settled.append(pin.pk)
    return settled


def look_at_held(table: Table) -> list[int]:
    """The sync's look at its table's pins by legal holds (every sync, whatever its commits
    say: the log may no longer name what a VACUUM deleted); never fails the sync."""
    if not Pin.objects.filter(table=table, state__in=PinState.holding(), protection=PROTECTION["hold"]).exists():
        return []
    try:
        return settle_held_pins(table)
    except Exception:  # a look never fails the sync: the next one looks again
        logger.warning("the look at table %s's held pins failed", table.pk, exc_info=True)
        return []


def settle_after_commit(table: Table) -> None:
    """Called by the sync's look when files vanished, inside its transaction: the table's held
    pins looked at once it commits, outside it (object copies)."""
    if Pin.objects.filter(table=table, state__in=PinState.holding(), protection=PROTECTION["hold"]).exists():
        transaction.on_commit(lambda: look_at_held(table))


def _present(storage: Any, path: str) -> bool:
    try:
        return bool(storage.exists(storage.resolve(path)))
    except (delta_errors.DeltaError, OSError, AttributeError):
        return False


def store_note(table: Table) -> str | None:
    """A clear word where the pin store cannot protect this table's files by link or
    server-side copy: pins still keep them, by copying every byte."""
    store, location = str(settings.DELTAWEB_PIN_STORE), table.location
    if is_uri(store) != is_uri(location):
        return "the pin store is on another kind of storage than this table: pinning copies every file"
    return None


def pin_payload(pin: Pin) -> dict[str, Any]:
    """A pin as the API and pages show it (never the store's location on the server)."""
    return {
        "id": pin.pk,
        "table": pin.table_id,
        "version": pin.version,
        "name": pin.name,
        "reason": pin.reason,
        "expiresAt": pin.expires_at.isoformat() if pin.expires_at else None,
        "state": pin.state,
        "createdBy": pin.created_by.get_username() if pin.created_by else None,
        "createdAt": pin.created_at.isoformat() if pin.created_at else None,
        "protection": pin.protection or None,
        "files": pin.files,
        "bytes": pin.bytes,
        "bytesCopied": pin.bytes_copied,
        "removalRequestedBy": pin.removal_requested_by.get_username() if pin.removal_requested_by else None,
        "removalReason": pin.removal_reason or None,
        "decidedBy": pin.decided_by.get_username() if pin.decided_by else None,
        "decisionComment": (decisions([pin.pk]).get(pin.pk) or {}).get("note"),
        "heldBy": held_by(pin),
        "error": pin.error or None,
        "events": [
            {
                "at": e.at.isoformat(),
                "actor": e.actor.get_username() if e.actor else None,
                "from": e.from_state or None,
                "to": e.to_state,
                "note": e.note,
            }
            for e in pin.events.all()
        ],
    }
