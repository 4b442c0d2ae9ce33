"""deltaweb as a commit-owner, as the rest of the app reaches it: the one way to build the
DatabaseOwner (with its hook that schedules a backfill after each ratified commit), and
whether a table is read and written through it.

Syncs, reads, restores and the owner use cases (tables.services.managed.use_cases) all take the owner
from here, so it is constructed the same way everywhere.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from tables.models import ManagedTable, OwnerState, Table
from tables.services.jobs import lifecycle as jobs
from tables.services.owner.db import DatabaseOwner

logger = logging.getLogger("tables.owner")


def send_backfill(table_pk: int) -> None:
    """Queue a backfill of the table's ratified commits; the beat catches up if the broker is down."""

    def later(exc: Exception) -> None:
        logger.warning("backfill of table %s not queued (%s); the beat schedule will do it", table_pk, exc)

    jobs.send_or_mark(jobs.BACKFILL_TASK, table_pk, mark=later)


def _schedule_backfill(mt: ManagedTable, version: int) -> None:
    """After a ratified commit: backfill once the transaction commits (the beat catches up too)."""
    if getattr(settings, "DELTAWEB_OWNER_AUTO_BACKFILL", True):
        transaction.on_commit(lambda: send_backfill(mt.table_id))


def database_owner() -> DatabaseOwner:
    """deltaweb's commit-owner, with the backfill hook."""
    return DatabaseOwner(on_ratified=_schedule_backfill)


def managed_of(table: Table) -> ManagedTable | None:
    return ManagedTable.objects.filter(table=table).select_related("table", "frozen_by").first()


def owner_of(table: Table) -> DatabaseOwner | None:
    """The DatabaseOwner when deltaweb is the table's commit-owner (its ratified, un-backfilled
    commits are then read too), else None (filesystem tables, tables managed elsewhere)."""
    if ManagedTable.objects.filter(table=table, state__in=(OwnerState.ACTIVE, OwnerState.RELEASING)).exists():
        return database_owner()
    return None
