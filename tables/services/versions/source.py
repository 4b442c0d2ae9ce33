"""Where a version's files are read from: the one rule every reader asks.

A version is read from the table while the table still has it: its log replays and none of its
data files were removed. Once VACUUM or log cleanup took any of that, a pin that holds the
version answers instead: the pin store keeps the version as a table of its own (its latest
version is the pinned one, tables.services.pins.lifecycle), with the same rows. A version that is
neither readable nor pinned is refused by its reader with the reason the reachability answer
gives.

Readers ask `source_of(table, version)` and open `source.location` at `source.version`
(None: the kept table's latest). A Spark job receives `source.as_params()` in its parameters
(the pin's id, never the pin store's directory) and rebuilds the place with `from_params`, so a queued job reads what was decided when it
was started even if a sync meanwhile learns more.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tables.models import Pin, Table


@dataclasses.dataclass(frozen=True)
class Source:
    """The place a version is read from."""

    location: str  # the table to open: the registered table, or its pin's kept table
    version: int | None  # the version to read there; None is the kept table's latest
    pin: Pin | None = None  # the pin it is read from; None when the table itself has it

    @property
    def from_pin(self) -> bool:
        return self.pin is not None

    def as_params(self) -> dict[str, Any]:
        """What a job's parameters carry of the place (JSON): the pin by its id, never the pin
        store's directory, since a job's parameters are shown to whoever may see the job."""
        return {"version": self.version, "pin": self.pin.pk if self.pin else None}


def from_params(p: dict[str, Any], table_location: str) -> tuple[str, int | None]:
    """(location, version) of a place a job's parameters carry (`Source.as_params`); a pin
    removed since the job was started is said, not read around."""
    if p.get("pin") is None:
        return table_location, p.get("version")
    from tables.services.pins.queries import kept_location

    kept = kept_location(p["pin"])
    if kept is None:
        raise ValueError(f"the pin (id {p['pin']}) that kept a version of this job was removed since it was started")
    return kept, p.get("version")


def table_has(table: Table, version: int, *, wait: bool = False) -> bool | None:
    """Whether the table's own log and files still give the version: True, False, or None
    while the reachability answer of a long log is still being computed (`wait=False`)."""
    from tables.services.versions.pinned import table_gives
    from tables.services.versions.reachability import version_reachability

    entry = version_reachability(table, version, wait=wait, pins=False)  # the table's own word
    if entry is None:
        return None
    return table_gives(entry)


def source_of(table: Table, version: int, *, wait: bool = False) -> Source:
    """Where `version` of `table` is read from (see the module's docstring). Without a pin the
    table is the answer, readable or not: its reader then says why it cannot be read. With a
    pin, an answer not yet known reads the pin, which never misses a file."""
    from tables.services.pins.queries import holding_pin

    pin = holding_pin(table, version)
    if pin is None or table_has(table, version, wait=wait):
        return Source(table.location, version, None)
    return Source(pin.store_location, None, pin)
