"""Why a version can be read neither from the table nor from a pin, and which pin could have
kept it: the words a page and a refusal share (`unreadable_why`), with the VACUUM that made it
unreadable (`vacuum_of`)."""

from __future__ import annotations

from typing import Any

from tables.delta import errors as delta_errors
from tables.models import Table
from tables.services.errors import ServiceError
from tables.services.versions.reachability import table_reachability, version_reachability


def vacuum_of(table: Table, version: int) -> dict[str, Any] | None:
    """The VACUUM that made `version` unreadable, as the sync recorded it (the first file
    removal whose unreadable versions hold it), else the first VACUUM commit after it:
    `{"version", "timestamp"}` (ms), or None when neither is known."""
    from tables.models import Commit, FileRemovalEvent

    found = FileRemovalEvent.objects.filter(table=table, unreadable_from__lte=version, unreadable_to__gte=version)
    for event in found.order_by("version", "pk")[:20]:
        if any(lo <= version <= hi for lo, hi in (event.unreadable or [])):
            at = event.vacuum_end_version if event.vacuum_end_version is not None else event.vacuum_start_version
            return {"version": at, "timestamp": event.vacuum_timestamp}
    commit = (
        Commit.objects.filter(table=table, version__gt=version, operation__in=("VACUUM START", "VACUUM END"))
        .order_by("version")
        .values("version", "timestamp")
        .first()
    )
    return dict(commit) if commit else None


def _readable_after(table: Table, version: int) -> int | None:
    """The oldest version after `version` the table still gives or a pin keeps, if known."""
    from tables.services.pins.queries import holding_pins

    try:
        runs = table_reachability(table, wait=False)
    except (ServiceError, delta_errors.DeltaError):
        return None
    found = None
    for first, _last, state in runs.runs(version + 1) if runs is not None else ():
        if state["readable"] and not state["missing"]:
            found = first
            break
    kept = [p.version for p in holding_pins(table) if p.store_location and version < p.version]
    return min([v for v in (found, *kept) if v is not None], default=None)


def unreadable_why(table: Table, version: int, entry: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Why a version can be read neither from the table nor from a pin, in words a page and a
    refusal share, with which pin could have kept it: `{"version", "reason", "missing",
    "vacuum", "readableAfter", "why", "pinHint", "text"}`; None when it can be read (from the
    table or a pin) or while a long log's answer is computed."""
    from tables.delta.history.timestamps import format_ms

    if entry is None:
        entry = version_reachability(table, version, wait=False)
    if entry is None or entry.get("readable"):
        return None
    reason = entry.get("reason")
    missing = int((entry.get("missingFiles") or {}).get("count") or 0)
    vacuum = vacuum_of(table, version) if reason == "files_missing" else None
    if reason == "files_missing":
        by = ""
        if vacuum and vacuum.get("version") is not None:
            when = format_ms(vacuum.get("timestamp"))
            by = f" by the VACUUM at version {vacuum['version']}" + (f" ({when})" if when else "")
        files = f"{missing:,} of its data file{'' if missing == 1 else 's'}"
        why = f"{files} {'was' if missing == 1 else 'were'} removed{by}"
        before = (
            f"the VACUUM at version {vacuum['version']}"
            if vacuum and vacuum.get("version") is not None
            else ("the VACUUM that removed its files")
        )
        hint = f"no pin holds it; a pin made before {before} would have kept it"
        if not by:
            # no VACUUM in the log removed them: the log names files its storage cannot give
            # (deleted outside Delta, or a path outside the table's allowed roots)
            files = f"{missing:,} data file{'' if missing == 1 else 's'} its log names"
            why = f"{files} cannot be opened ({'it is' if missing == 1 else 'they are'} gone, or outside the allowed roots)"
            hint = "no pin holds it"
    elif reason == "log_expired":
        why = "log cleanup removed the commits needed to rebuild it"
        hint = "no pin holds it; a pin made before the log cleanup (while its commits were there) would have kept it"
    else:
        why = "its state cannot be rebuilt from the log"
        hint = "no pin holds it; a pin made while it could still be read would have kept it"
    return {
        "version": version,
        "reason": reason,
        "missing": missing,
        "vacuum": vacuum,
        "recoverable": bool(entry.get("recoverable")),
        "restorable": bool(entry.get("restorable")),
        "readableAfter": _readable_after(table, version),
        "why": why,
        "pinHint": hint,
        "text": f"Version {version} of {table.name} cannot be read: {why}, and {hint}.",
    }


def pin_refusal(table: Table, version: int, entry: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Why no pin of `version` can be made, or None when one can (or while a long log's answer
    is computed: the pin then says what it finds). A pin copies the version from the table, so
    a version the table no longer gives whole cannot be kept: its files were removed (VACUUM)
    or its commits cleaned up, time travel to it is impossible, and a pin would keep nothing.
    `entry` is its reachability entry with the pins marked (`version_reachability`).
    `{"why", "text", "keptBy"}`: the short reason a page shows, the refusal's sentence, and
    the pin that keeps the version already, if one does."""
    if entry is None:
        entry = version_reachability(table, version, wait=False)
    if entry is None:
        return None
    kept_by = entry.get("pin")  # the Pin that keeps it (versions/pinned.py's mark_pin)
    if entry.get("readable") and not kept_by:
        return None
    reason = entry.get("reason")
    lost = {
        "files_missing": "its data files were removed from the table (VACUUM)",
        "log_expired": "log cleanup removed the commits that rebuild it",
    }.get(reason or "", "the table cannot rebuild it")
    if kept_by:
        why = f"{lost}; pin {kept_by.name} already keeps it"
        text = f"Version {version} of {table.name} cannot be pinned again: {why}, and a new pin copies from the table."
        return {"why": why, "text": text, "keptBy": kept_by}
    said = unreadable_why(table, version, entry) or {}
    why = f"{said.get('why') or lost}, so time travel to it is impossible"
    after = said.get("readableAfter")
    then = f" The oldest readable version after it is version {after}." if after is not None else ""
    text = f"Version {version} of {table.name} cannot be pinned: {why} and a pin would keep nothing.{then}"
    return {"why": f"{lost}; time travel to it is impossible", "text": text, "keptBy": None}


def refuse_pin(table: Table, version: int) -> None:
    """ServiceError (422 `version_unreadable`) before a pin of a version the table no longer
    gives whole is made (`pin_refusal`); nothing is written, no pin row is left."""
    refusal = pin_refusal(table, version)
    if refusal is not None:
        raise ServiceError(refusal["text"], "version_unreadable", 422, version=version)
