"""Ratifying a Unity Catalog client's commit (UC's add-commit and the preview commits API):
the commit's fields checked, the DatabaseOwner asked, its answer in UC's error model
(`UcError`); and a client's report that it published (set-latest-backfilled-version). The
use cases that call these are tables.services.owner.catalog."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from tables.delta.managed.owner import CommitConflict, CommitRefused, CommitResponse
from tables.models import ManagedTable, RatifiedCommit
from tables.services.errors import ServiceError
from tables.services.owner.access import database_owner
from tables.services.owner.db import table_conf


class UcError(ServiceError):
    """An error in Unity Catalog's model: `type` (e.g. NoSuchTableException) and HTTP status."""

    def __init__(self, uc_type: str, status: int, message: str) -> None:
        super().__init__(message, uc_type, status)
        self.uc_type = uc_type

    def body(self) -> dict[str, Any]:
        return {"error": {"type": self.uc_type, "code": self.status, "message": self.message}}


def bad(message: str) -> UcError:
    return UcError("InvalidParameterValueException", 400, message)


def int_param(body: dict[str, Any], key: str, *, minimum: int = 0) -> int:
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum or value > 2**63 - 1:
        raise bad(f"'{key}' must be an integer >= {minimum}")
    return value


def max_unpublished() -> int:
    """How many ratified commits may wait for publishing before new ones are refused (429)."""
    return int(getattr(settings, "DELTAWEB_UC_MAX_UNPUBLISHED", 1000))


def commit_fields(commit: Any) -> dict[str, Any]:
    if not isinstance(commit, dict):
        raise bad("'commit' must be an object")
    out = {
        "version": int_param(commit, "version", minimum=1),
        "timestamp": int_param(commit, "timestamp", minimum=1),
        "file-size": int_param(commit, "file-size", minimum=1),
        "file-modification-timestamp": int_param(commit, "file-modification-timestamp"),
    }
    name = commit.get("file-name")
    if not isinstance(name, str) or not name:
        raise bad("'file-name' is required")
    out["file-name"] = name
    return out


def add_commit(
    mt: ManagedTable,
    user,
    commit: dict[str, Any],
    *,
    etag_version: int | None = None,
    idempotent: bool = False,
) -> None:
    """Ratify the client's staged commit as `commit["version"]`, or raise UC's error.

    `etag_version`: the metadata version an assert-etag named (checked under the owner's row
    lock, so a metadata commit cannot slip between check and ratification). `idempotent`: the
    preview API answers a resent accepted commit (same version and file) with success.
    """
    version, file_name = commit["version"], commit["file-name"]
    if mt.latest_version - mt.backfilled_version >= max_unpublished():
        raise UcError(
            "ResourceExhaustedException",
            429,
            f"{mt.latest_version - mt.backfilled_version} ratified commits are not published yet; publish them and "
            f"report set-latest-backfilled-version before committing more",
        )
    outcome = database_owner().commit_staged(
        table_conf(mt),
        version,
        file_name,
        committed_by=user.get_username(),
        claimed=(commit["timestamp"], commit["file-size"]),
        etag_version=etag_version,
        known=mt,
    )
    if isinstance(outcome, CommitResponse):
        return
    if isinstance(outcome, CommitConflict):
        if idempotent:  # the preview API: resending the accepted commit (same version and file) is success
            same = RatifiedCommit.objects.filter(table_id=mt.table_id, version=version).values_list("path", flat=True)
            if any(p.rpartition("/")[2] == file_name for p in same):
                return
        raise UcError(
            "CommitVersionConflictException",
            409,
            f"Commit version {version} was ratified already; the latest table version is {outcome.winning_version}",
        )
    assert isinstance(outcome, CommitRefused)
    if outcome.code == "requirement_conflict":
        raise UcError("UpdateRequirementConflictException", 409, outcome.reason)
    if outcome.code in ("policy", "not_owned", "handing_back"):
        raise UcError("PermissionDeniedException", 403, f"deltaweb refused version {version}: {outcome.reason}")
    raise bad(f"Version {version} refused ({outcome.code}): {outcome.reason}")


def set_backfilled(mt: ManagedTable, version: int, *, fresh: bool = False) -> None:
    """`fresh`: `mt` was read in this request and nothing changed it since (no commit before)."""
    try:
        database_owner().mark_published(table_conf(mt), version, known=mt if fresh else None)
    except ValueError as exc:
        raise bad(str(exc)) from exc
