"""A version the table lost, readable from the pin that keeps it: the reachability answer's
entries marked with the pin (`mark_pin`, `with_pins`); the core's runs stay free of pins."""

from __future__ import annotations

from typing import Any

from tables.delta.history.reachability.runs import ReachRuns
from tables.models import Table


def table_gives(entry: dict[str, Any]) -> bool:
    """Whether the table's own log and files still give the version of this (unmarked) entry."""
    return bool(entry.get("readable")) and not int((entry.get("missingFiles") or {}).get("count") or 0)


def mark_pin(entry: dict[str, Any], pins: dict[int, Any]) -> dict[str, Any]:
    """The entry as the app answers it: the core's entry with `pin`, the Pin a version the
    table lost (files vacuumed, log cleaned up) is read from: None while the table gives the
    version; a version a pin in `pins` ({version: pin}) keeps is readable from it. The rest
    (reason, missingFiles, restorable) still says what the table itself lost. The core's
    runs stay free of pins: this is the service's word over them. (An entry stays the core's
    dict, made per request from the cached runs: lists of versions read thousands of them, and
    the API's VersionReachabilitySerializer writes its `readFrom` from `pin`.)"""
    pin = pins.get(entry["version"])
    if pin is None or table_gives(entry):
        return {**entry, "pin": None}
    return {**entry, "readable": True, "pin": pin}


class PinnedRuns:
    """A table's answer (`ReachRuns`) with the versions its pins keep marked (`mark_pin`) in
    every entry it gives (by version, by index newest first, by slice, iterated); the runs,
    the head and the forecast are the core's, unchanged."""

    def __init__(self, runs: ReachRuns, pins: dict[int, Any]) -> None:
        self._runs, self.pins = runs, pins

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runs, name)

    def __len__(self) -> int:
        return len(self._runs)

    def _marked(self, entry: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if entry is None else mark_pin(entry, self.pins)

    def entry(self, version: int, *, paths: bool = True) -> dict[str, Any] | None:
        return self._marked(self._runs.entry(version, paths=paths))

    def get(self, version: int, default: Any = None) -> dict[str, Any] | None:
        """Counts only, as `ReachRuns.get`: what a list of versions shows."""
        found = self.entry(version, paths=False) if isinstance(version, int) else None
        return default if found is None else found

    def __getitem__(self, index: int | slice) -> Any:
        found = self._runs[index]
        if isinstance(index, slice):
            return [self._marked(e) for e in found]
        return self._marked(found)

    def __iter__(self) -> Any:
        return (self._marked(e) for e in self._runs)


def with_pins(table: Table, runs: ReachRuns | None) -> PinnedRuns | None:
    """The answer with the versions the table's pins keep marked (one query for the pins)."""
    if runs is None:
        return None
    from tables.services.pins.queries import holding_pins

    pins: dict[int, Any] = {}
    for pin in holding_pins(table):
        if pin.store_location:
            pins.setdefault(pin.version, pin)
    return PinnedRuns(runs, pins)
