"""Pins: a named, reasoned, optionally expiring promise that a version of a table stays
readable, whatever VACUUM and log cleanup any engine runs on the table.

Creating a pin writes the version into the pin store deltaweb owns (`DELTAWEB_PIN_STORE`) with
the core's `keep_version`: a table of its own whose version 0 is the pinned version, its files
hard links where the store shares the table's file system (no new data bytes), server-side
copies inside one object store, else copies (tables.services.pins.store). Removing a pin before
it expires is a request an approver (never the requester) accepts, as restores are
(tables.services.approvals); every step is a PinEvent, the audit. Reading a pinned version whose
log or files the table lost goes to the pin store (`pinned_snapshot` of
tables.services.pins.queries, used by tables.services.versions.read). A pin by legal holds
names the held objects; every sync (and the beat's sweep) looks at their current state whatever the log still
says, and once a VACUUM deleted them (a delete marker above each held version) the held versions
are copied into the pin store (`settle_held_pins`), so the kept table, self-contained, reads
again in any engine, the holds staying until the pin goes. A pin left "writing" is resumed or
failed by the beat's sweep (`sweep_pins`), with the reason.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from tables.delta import errors as delta_errors
from tables.delta.storage.api import is_uri
from tables.models import Pin, PinEvent, PinState, Table
from tables.services import approvals
from tables.services.access import roles
from tables.services.catalog.lookup import INT64_MAX
from tables.services.errors import ServiceError, from_delta
from tables.services.jobs import lifecycle as jobs
from tables.services.pins.queries import decision_events
from tables.services.pins.store import (
    MAX_TEXT,
    NOT_PROTECTED,
    PROTECTION,
    check_store,
    delete_kept,
    event,
    fail_pin,
    settle_held_pins,
    silent_after,
    store_location,
    write_version,
)

MAX_NAME = 200
MAX_RESUMES = 2  # times the sweep sends a pin left in "writing" again before it fails it


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
        return write_version(pin, user)
    except delta_errors.DeltaError as exc:
        if not isinstance(exc, delta_errors.KeepTargetError):  # never another's kept table
            delete_kept(pin)
        pin.delete()  # nothing was promised: the row goes with the refusal
        raise from_delta(exc, table=table) from exc


def _send(pk: int) -> None:
    def wait(exc: Exception) -> None:
        Pin.objects.filter(pk=pk, state=PinState.WRITING).update(
            error=jobs.unreachable_message(exc, "the pin waits to be written")
        )

    jobs.send_or_mark(jobs.PIN_TASK, pk, mark=wait)


def sweep_pins(older_than: timedelta | None = None, resumes: int = MAX_RESUMES) -> dict[str, list[int]]:
    """The beat's sweep of pins: a pin left in "writing" with no sign of life for `older_than`
    (DELTAWEB_JOB_SILENT_MINUTES: its worker was killed or restarted, or the task queue lost or
    never got its message) is resumed (what was written of it deleted, the task sent again) at
    most `resumes` times, then failed, each with the reason as an event; due pins expire; held
    pins whose objects are gone are settled (`settle_held_pins`), whatever the log says.
    {"resumed": [...], "failed": [...], "expired": [n], "settled": [...]}."""
    horizon = timezone.now() - (older_than if older_than is not None else silent_after())
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
            delete_kept(pin)  # what a stopped writer left: the next write starts clean
            if Pin.objects.filter(pk=pin.pk, state=PinState.WRITING).exists():
                event(
                    pin, None, PinState.WRITING, PinState.WRITING, f"resumed by the sweep ({done + 1}/{resumes}): {why}"
                )
                _send(pin.pk)
                resumed.append(pin.pk)
        elif "failed" in fail_pin(pin, f"{why}; resumed {done} times, given up", discard=True):
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
        approvals.transition(
            Pin.objects.filter(pk=pin.pk, state=PinState.ACTIVE),
            {"state": PinState.UNPIN_REQUESTED, "removal_requested_by": user, "removal_reason": reason},
            ServiceError(f"Pin #{pin.pk} is not active; only an active pin's removal can be requested.",
                         "invalid_state", 409),
            lambda: event(pin, user, PinState.ACTIVE, PinState.UNPIN_REQUESTED, f"removal requested: {reason}"),
        )  # fmt: skip
    pin.refresh_from_db()
    return pin


def withdraw_unpin(pin: Pin, user: Any) -> Pin:
    """The requester takes back their own removal request: the pin holds its version again
    (active), the request's fields cleared, and an event says it was withdrawn."""
    current = Pin.objects.filter(pk=pin.pk).values_list("state", "removal_requested_by_id").first()
    if current is None or current[0] != PinState.UNPIN_REQUESTED:
        raise ServiceError(f"Pin #{pin.pk} has no removal request to withdraw.", "invalid_state", 409)
    approvals.check_withdrawer(
        user, current[1], refused="Only the person who asked to remove a pin can withdraw the request."
    )
    with transaction.atomic():
        approvals.transition(
            Pin.objects.filter(pk=pin.pk, state=PinState.UNPIN_REQUESTED, removal_requested_by=user),
            {"state": PinState.ACTIVE, "removal_requested_by": None, "removal_reason": ""},
            ServiceError(f"Pin #{pin.pk} has no removal request to withdraw.", "invalid_state", 409),
            lambda: event(
                pin, user, PinState.UNPIN_REQUESTED, PinState.ACTIVE, "removal request withdrawn by its requester"
            ),
        )
    pin.refresh_from_db()
    return pin


def decisions(pin_ids: list[int]) -> dict[int, dict[str, str]]:
    """{pin id: {"by", "note"}}: the last approver's decision on each pin's removal (the note
    says approved or rejected, with the approver's comment), one query."""
    out: dict[int, dict[str, str]] = {}
    found = PinEvent.objects.filter(decision_events(), pin_id__in=pin_ids).select_related("actor")
    for e in found.order_by("at", "pk"):
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
    approvals.check_can_decide(
        user,
        pin.removal_requested_by_id,
        role_needed="Deciding a pin's removal needs the approver role (or staff).",
        own_request=f"You asked to remove pin #{pin.pk}; another approver must decide.",
    )


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
        approvals.transition(
            Pin.objects.filter(pk=pin.pk, state=PinState.UNPIN_REQUESTED),
            {"state": PinState.ACTIVE, "decided_by": user, "decided_at": timezone.now()},
            ServiceError(f"Pin #{pin.pk} has no removal awaiting a decision.", "invalid_state", 409),
            lambda: event(pin, user, PinState.UNPIN_REQUESTED, PinState.ACTIVE, f"removal rejected: {comment}"),
        )
    pin.refresh_from_db()
    return pin


def _remove(pin: Pin, user: Any, to_state: str, note: str) -> Pin:
    with transaction.atomic():
        current = Pin.objects.select_for_update().filter(pk=pin.pk).values_list("state", flat=True).first()
        if current not in PinState.holding():
            raise ServiceError(f"Pin #{pin.pk} is {current}; it holds nothing to remove.", "invalid_state", 409)
        Pin.objects.filter(pk=pin.pk).update(state=to_state, decided_by=user, decided_at=timezone.now())
        event(pin, user, current, to_state, note)
    delete_kept(pin)
    pin.refresh_from_db()
    return pin


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


def store_note(table: Table) -> str | None:
    """A clear word where the pin store cannot protect this table's files by link or
    server-side copy: pins still keep them, by copying every byte."""
    store, location = str(settings.DELTAWEB_PIN_STORE), table.location
    if is_uri(store) != is_uri(location):
        return "the pin store is on another kind of storage than this table: pinning copies every file"
    return None
