"""Pins on the pages: pinning a version from its page, asking to remove a pin (and withdrawing
one's own request), an approver's decision on a removal. Each view parses the form and calls tables.services.pins.lifecycle; what the
pages show of pins (the version page, the Versions tab, History, the Overview) comes from
`pins_context`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, time
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from tables.models import Pin, PinState, Table
from tables.services.access import roles
from tables.services.errors import ServiceError
from tables.services.pins import lifecycle as pins
from tables.services.versions.unreadable import refuse_pin
from tables.web.base.ui import MAX_ID, PageError, page, table_of


class PinForm(forms.Form):
    name = forms.CharField(max_length=pins.MAX_NAME, help_text="unique among this table's pins")
    reason = forms.CharField(max_length=pins.MAX_TEXT, widget=forms.Textarea(attrs={"rows": 2}))
    expires = forms.DateField(
        required=False, help_text="optional: after this day the pin may be removed without approval"
    )


class PinTextForm(forms.Form):
    text = forms.CharField(required=False, max_length=pins.MAX_TEXT)


def pins_context(
    request: HttpRequest, table: Table, version: int | None = None, refused: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The pins a page lists (of a version, or all of the table's that hold one), what the
    user may do with them, and the store's note. `refused`: why this version cannot be pinned
    (`pin_refusal`), said instead of the form."""
    rows = Pin.objects.filter(table=table).select_related("created_by", "removal_requested_by")
    rows = rows.filter(version=version) if version is not None else rows.filter(state__in=PinState.holding())
    user = request.user
    shown = list(rows[:200])
    decided = pins.decisions([p.pk for p in shown])
    listed = [
        {
            "pin": p,
            "held_by": pins.held_by(p),
            "decision": decided.get(p.pk),
            "can_unpin": p.state == PinState.ACTIVE and roles.can_request_restore(user),
            "can_withdraw": p.state == PinState.UNPIN_REQUESTED and p.removal_requested_by_id == user.pk,
            "can_decide": p.state == PinState.UNPIN_REQUESTED
            and roles.can_approve(user)
            and p.removal_requested_by_id != user.pk,
        }
        for p in shown
    ]
    return {
        "pins": listed,
        "pin_form": PinForm() if version is not None and not refused and roles.can_request_restore(user) else None,
        "pin_refused": refused if version is not None else None,
        "pins_of_version": version is not None,
        "pin_note": pins.store_note(table),
    }


def _pin(pk: int) -> Pin:
    pin = Pin.objects.select_related("table").filter(pk=pk).first() if pk <= MAX_ID else None
    if pin is None:
        raise PageError(f"There is no pin {pk}.", 404)
    return pin


@page
@require_POST
def pin_new(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    table = table_of(slug)
    form = PinForm(request.POST)
    if not form.is_valid():
        first = next(iter(form.errors.values()))[0]
        messages.error(request, f"The pin was not made: {first}")
        return redirect("tables:version_detail", table.slug, version)
    d = form.cleaned_data
    expires = datetime.combine(d["expires"], time.max, tzinfo=UTC) if d.get("expires") else None
    try:
        if roles.can_request_restore(request.user):  # one without the role is refused as such (403)
            refuse_pin(table, version)
        pin = pins.create_pin(table, version, d["name"], d["reason"], request.user, expires)
    except ServiceError as exc:
        if exc.status in (401, 403, 404):
            raise
        messages.error(request, f"The pin was not made, so version {version} is not protected: {exc.message}")
    else:
        if pin.state == PinState.WRITING:
            messages.success(request, f"Version {version} is being kept as pin {pin.name!r} (a worker copies it).")
        else:
            messages.success(request, f"Version {version} is pinned as {pin.name!r} ({pin.protection}).")
    return redirect("tables:version_detail", table.slug, version)


def _after(request: HttpRequest, pin: Pin) -> HttpResponse:
    return redirect("tables:version_detail", pin.table.slug, pin.version)


def _text(request: HttpRequest, pin: Pin) -> str:
    form = PinTextForm(request.POST)
    if not form.is_valid():
        raise PageError("The text is too long (at most 5000 characters).", 400, pin.table)
    return form.cleaned_data["text"]


def _act(request: HttpRequest, pin: Pin, action: Callable[[], str], raised: tuple[int, ...]) -> HttpResponse:
    """Run one of a pin's actions and go back to its version's page: the action's own success
    message, or the service's refusal as an error message. The statuses in `raised` go on to
    the error page instead (signed out, not allowed, no such pin)."""
    try:
        messages.success(request, action())
    except ServiceError as exc:
        if exc.status in raised:
            raise
        messages.error(request, exc.message)
    return _after(request, pin)


@page
@require_POST
def pin_unpin(request: HttpRequest, pk: int) -> HttpResponse:
    pin = _pin(pk)

    def unpin() -> str:
        done = pins.request_unpin(pin, request.user, _text(request, pin))
        what = (
            "removed (it had expired)" if done.state == PinState.EXPIRED else "to be removed once an approver accepts"
        )
        return f"Pin {done.name!r}: {what}."

    return _act(request, pin, unpin, raised=(401, 403, 404))


@page
@require_POST
def pin_withdraw(request: HttpRequest, pk: int) -> HttpResponse:
    pin = _pin(pk)

    def withdraw() -> str:
        done = pins.withdraw_unpin(pin, request.user)
        return f"Pin {done.name!r}: your removal request is withdrawn; the pin holds its version."

    # withdrawing someone else's request (403) is refused as a message on the version's page
    return _act(request, pin, withdraw, raised=(401, 404))


def _decide(request: HttpRequest, pk: int, approve: bool) -> HttpResponse:
    pin = _pin(pk)
    text = _text(request, pin)

    def decide() -> str:
        if approve:
            pins.approve_unpin(pin, request.user, text)
            return f"Pin {pin.name!r} removed."
        pins.reject_unpin(pin, request.user, text)
        return f"Pin {pin.name!r} kept."

    return _act(request, pin, decide, raised=(401, 403, 404))


@page
@require_POST
def pin_approve(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, approve=True)


@page
@require_POST
def pin_reject(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, approve=False)
