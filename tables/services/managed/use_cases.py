"""Use cases of deltaweb as a commit-owner: take over, hand back, create, freeze, backfill.

Views, the API, the management command and tasks call these; each checks the role and
calls the core (tables.delta.write.managed) with the DatabaseOwner.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from tables.delta import errors as delta_errors
from tables.delta.write import managed as core
from tables.models import ManagedTable, OwnerState, Table
from tables.services.access import roles
from tables.services.catalog.registration import make_new_table_dir
from tables.services.errors import ServiceError, http_status
from tables.services.owner.access import database_owner, managed_of
from tables.services.owner.db import table_conf
from tables.services.sync.store import start_sync

logger = logging.getLogger("tables.owner")


def _check(user, what: str) -> None:
    if user is not None and not roles.can_approve(user):
        raise ServiceError(f"{what} needs the approver role (or staff).", "permission_denied", 403)


def _core(call, *args, **kwargs) -> dict[str, Any]:
    try:
        return call(*args, **kwargs)
    except delta_errors.DeltaError as exc:
        # the statuses of tables.services.errors, except that a log the owner cannot read is the request's fault here
        status = http_status(exc)
        raise ServiceError(str(exc), exc.code, status if status in (403, 409) else 400) from exc


def take_over(table: Table, user=None) -> dict[str, Any]:
    """Make deltaweb the table's commit-owner (two-phase: proposal, then the ownership commit
    with In-Commit Timestamps on, put-if-absent in `_delta_log/`)."""
    _check(user, "Taking a table over")
    out = _core(core.take_over, table.location, database_owner())
    with transaction.atomic():
        start_sync(table, user)
    return out


def hand_back(table: Table, user=None) -> dict[str, Any]:
    """Make the table a filesystem table again: everything backfilled, the removing commit written."""
    _check(user, "Handing a table back")
    out = _core(core.hand_back, table.location, database_owner())
    with transaction.atomic():
        start_sync(table, user)
    return out


def create_managed_table(name: str, location: str, schema: dict[str, Any], user=None, **kwargs: Any) -> Table:
    """Create an empty managed table at `location` (version 0 put-if-absent) and register it."""
    _check(user, "Creating a managed table")
    path = make_new_table_dir(location)  # checked under the allowed roots before anything is made
    slug = slugify(name)[:200]
    if not name.strip() or not slug or Table.objects.filter(slug=slug).exists():
        raise ServiceError(f"Give the table a new name ('{name}' is empty or registered already).", "invalid_name")
    table = Table.objects.create(name=name.strip(), slug=slug, location=path, created_by=user)
    try:
        _core(core.create_managed_table, path, database_owner(), schema, name=name, **kwargs)
    except ServiceError:
        table.delete()
        raise
    with transaction.atomic():
        start_sync(table, user)
    return table


def freeze(table: Table, user, reason: str) -> ManagedTable:
    """Refuse every commit until unfrozen (approvers and staff)."""
    _check(user, "Freezing a table")
    reason = (reason or "").strip()
    if not reason:
        raise ServiceError("Say why the table is frozen.", "invalid_reason")
    n = ManagedTable.objects.filter(table=table, state=OwnerState.ACTIVE).update(
        frozen=True, frozen_by=user, frozen_reason=reason[:2000], frozen_at=timezone.now()
    )
    if n != 1:
        raise ServiceError(f"deltaweb is not the commit-owner of {table}.", "not_managed", 409)
    return managed_of(table)


def unfreeze(table: Table, user) -> ManagedTable:
    _check(user, "Unfreezing a table")
    n = ManagedTable.objects.filter(table=table).update(frozen=False, frozen_reason="", frozen_by=None, frozen_at=None)
    if n != 1:
        raise ServiceError(f"deltaweb is not the commit-owner of {table}.", "not_managed", 409)
    return managed_of(table)


def backfill(table_pk: int, version: int | None = None) -> int | None:
    """Backfill the table's ratified commits (all, or up to `version`); idempotent."""
    mt = ManagedTable.objects.filter(table_id=table_pk).select_related("table").first()
    if mt is None:
        return None
    owner = database_owner()
    return owner.backfill_to_version(table_conf(mt), mt.latest_version if version is None else version)


def backfill_all() -> dict[int, int | None]:
    """Beat: every managed table with a lag (and any interrupted take-over or hand-back); staged
    files of published versions are deleted once past the retention."""
    out = {}
    for pk in ManagedTable.objects.exclude(state=OwnerState.RELEASED).values_list("table_id", flat=True):
        try:
            out[pk] = backfill(pk)
            mt = ManagedTable.objects.select_related("table").get(table_id=pk)
            database_owner().cleanup_staged(table_conf(mt))  # published staged files past the retention
        except delta_errors.DeltaError as exc:
            logger.warning("backfill of table %s failed: %s", pk, exc)
            out[pk] = None
    return out
