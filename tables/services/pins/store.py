"""The pin store: writing a pinned version into the kept table deltaweb owns
(`DELTAWEB_PIN_STORE`), the worker's part of it, deleting a kept table, and settling pins by
legal holds once a VACUUM deleted their objects (tables.services.pins.lifecycle is the pin's
life; tables.services.pins.queries which pins hold what)."""

from __future__ import annotations

import logging
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from tables.delta import errors as delta_errors
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.keep import HELD_LOOKED_AT, discard_kept, held_gone, keep_version, settle_held
from tables.delta.write.keep_place import check_pin_store
from tables.models import Pin, PinEvent, PinState, Table
from tables.services.errors import ServiceError, from_delta, one_line
from tables.services.jobs import faults
from tables.services.jobs import lifecycle as jobs
from tables.services.pins.queries import holding_pins

logger = logging.getLogger("tables.pins")

MAX_TEXT = 5000
PROTECTION = {
    "link": "hard links",
    "present": "hard links",
    "copy": "copies",
    "server-copy": "server-side copies",
    "hold": "legal holds",
}
NOT_PROTECTED = "not protected"  # a pin whose version could not be kept: said, never a silent fallback
WORKER_WRITING = "a worker is writing it"  # the worker's event; its time is the last sign of life


def event(pin: Pin, actor: Any, from_state: str, to_state: str, note: str = "") -> None:
    """One step of a pin's life, with who and when (the audit trail)."""
    PinEvent.objects.create(pin=pin, actor=actor, from_state=from_state, to_state=to_state, note=note[:MAX_TEXT])


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
    """Where a new pin's kept table lives: <store>/<table id>/<pin id>-v<version>-<random>.
    The ids alone are not enough: after the database is reset (or restored from a backup) they
    are given again, and a new pin would meet a kept table a lost row left behind (refused as
    another's, or worse, written beside its files). The path is stored on the pin
    (`Pin.store_location`) and read from there, never derived again: pins made before the
    random part still find theirs."""
    root = str(settings.DELTAWEB_PIN_STORE).rstrip("/")
    return f"{root}/{table.pk}/{pin.pk}-v{pin.version}-{secrets.token_hex(8)}"


def _protection(placed: dict[str, int]) -> str:
    kinds = {PROTECTION.get(k, k) for k, n in placed.items() if n}
    if not kinds:
        return "nothing to hold (no files)"  # an empty version: its log alone keeps it
    return " and ".join(sorted(kinds))


def write_version(pin: Pin, actor: Any) -> Pin:
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


def fail_pin(pin: Pin, why: str, discard: bool) -> dict[str, Any]:
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
        delete_kept(pin)
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
    if last is not None and last.note == WORKER_WRITING and last.at > timezone.now() - silent_after():
        return {"skipped": True, "writing": "another worker"}
    sign = PinEvent.objects.create(pin=pin, from_state=PinState.WRITING, to_state=PinState.WRITING, note=WORKER_WRITING)

    def touch() -> None:
        PinEvent.objects.filter(pk=sign.pk).update(at=timezone.now())

    try:
        with jobs.heartbeat(touch, float(settings.DELTAWEB_JOB_HEARTBEAT_SECONDS), f"pin-{pk}-heartbeat"):
            pin = write_version(pin, None)
    except ServiceError as exc:  # the store refused: nothing was written
        return fail_pin(pin, exc.message, discard=False)
    except delta_errors.DeltaError as exc:
        why = from_delta(exc, table=pin.table).message
        return fail_pin(pin, why, discard=not isinstance(exc, delta_errors.KeepTargetError))
    return {"state": pin.state, "protection": pin.protection}


def silent_after() -> timedelta:
    """How long a writing pin may show no sign of life (DELTAWEB_JOB_SILENT_MINUTES, as jobs)."""
    return timedelta(minutes=float(settings.DELTAWEB_JOB_SILENT_MINUTES))


def delete_kept(pin: Pin) -> None:
    """Delete the kept table's files (hard links: the table's own files stay); a failure is
    recorded on the pin, never raised at the approver (the row says it is removed)."""
    if not pin.store_location:
        return
    try:
        discard_kept(pin.store_location, pin.table.location)  # holds released, the files, the log last
    except (delta_errors.DeltaError, OSError) as exc:
        Pin.objects.filter(pk=pin.pk).update(error=one_line(f"the kept files were not all deleted: {exc}"))


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
