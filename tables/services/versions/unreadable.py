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
