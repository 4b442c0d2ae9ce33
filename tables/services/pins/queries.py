"""Which pins hold what: the holding pins of a table by version, the kept table a pin reads
from, and what the pins alone now keep of a table (a VACUUM met them)."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db.models import OuterRef, Prefetch, Q, QuerySet, Subquery

from tables.delta import errors as delta_errors
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.models import Pin, PinEvent, PinState, Table

DECISIONS = ("removal approved", "removal rejected")  # how an approver's decision's event begins


def decision_events() -> Q:
    """The events that are an approver's decision on a pin's removal."""
    return Q(note__startswith=DECISIONS[0]) | Q(note__startswith=DECISIONS[1])


def listed(pins: QuerySet[Pin]) -> QuerySet[Pin]:
    """Pins as a list of them shows them, in a constant number of queries however many: who
    made, asked and decided joined in, the last decision's note annotated (`decision_note`),
    the audit trail and its actors fetched once for all the pins."""
    last = PinEvent.objects.filter(decision_events(), pin=OuterRef("pk")).order_by("-at", "-pk").values("note")[:1]
    trail = PinEvent.objects.select_related("actor").order_by("at", "id")
    return (
        pins.select_related("created_by", "removal_requested_by", "decided_by")
        .annotate(decision_note=Subquery(last))
        .prefetch_related(Prefetch("events", queryset=trail))
    )


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


def _present(storage: Any, path: str) -> bool:
    try:
        return bool(storage.exists(storage.resolve(path)))
    except (delta_errors.DeltaError, OSError, AttributeError):
        return False
