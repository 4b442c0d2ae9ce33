"""A log's newest commit that its writer has not finished, as the sync keeps it and the pages
and the API show it (tables.delta.log.tip judges it).

The sync stores the history up to the commit before it and keeps only the notice: the
version, the file relative to the table, why it cannot be read, under `incompleteCommit` in
Table.latest_metadata (what the sync stored of the table's latest state), replaced by every
sync. Nothing of the incomplete version itself is stored; the next sync reads it again, and
once it is whole it is stored as any commit and the notice is gone.
"""

from __future__ import annotations

from typing import Any

from tables.delta.history.timestamps import CommitTimes

KEY = "incompleteCommit"
MAX_TEXT = 500  # a reason is ours, a file name the listing's: bounded all the same


def found(times: CommitTimes) -> dict[str, Any] | None:
    """The notice of the incomplete commit the sync's listing left out, or None."""
    incomplete = getattr(times.listing, "incomplete", None)
    return incomplete.to_dict() if incomplete is not None else None


def with_notice(metadata: dict[str, Any] | None, times: CommitTimes) -> dict[str, Any] | None:
    """`metadata` (what the sync keeps of the latest version) with the notice, when there is one."""
    notice = found(times)
    if notice is None:
        return metadata
    return {**(metadata or {}), KEY: notice}


def in_result(times: CommitTimes) -> dict[str, Any]:
    """What a sync job's result says of it: `{"incompleteCommit": {...}}`, or nothing."""
    notice = found(times)
    return {KEY: notice} if notice is not None else {}


def notice_of(table: Any) -> dict[str, Any] | None:
    """The notice the table's last sync left (version, file, reason, message), or None: the
    API's `incompleteCommit` and the banner of the table's pages."""
    stored = (table.latest_metadata or {}).get(KEY) if isinstance(table.latest_metadata, dict) else None
    if not isinstance(stored, dict) or type(stored.get("version")) is not int:
        return None
    version = stored["version"]
    reason = str(stored.get("reason") or "")[:MAX_TEXT]
    return {
        "version": version,
        "file": str(stored.get("file") or "")[:MAX_TEXT],
        "reason": reason,
        "shownUpTo": version - 1,
        "message": str(stored.get("message") or "")[: MAX_TEXT * 2],
    }
