"""The row count of a registered table's latest synced version, as the Overview shows it:
the core's `row_count` (numRecords of the adds' stats, else the Parquet footers, less the
deletion vectors' cardinality), kept in the shared cache until the next sync.

A long log's count (`inline_versions()` versions or more, the reachability's bound) is made by
a worker only, after the sync and when a page finds none: reading the adds of every active
file means replaying the commits that added them, hundreds of MB for a 100,000-commit log
without checkpoints, which no web process should hold. Pages get None meanwhile.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import caches

from tables.delta import errors as delta_errors
from tables.delta.snapshot.row_count import row_count
from tables.delta.storage.opening import as_storage
from tables.models import Table
from tables.services.errors import ServiceError, public_message
from tables.services.history.query import synced_key
from tables.services.jobs import lifecycle as jobs
from tables.services.versions.reachability import is_long
from tables.services.versions.read import snapshot_and_source

CACHE_SECONDS = 24 * 3600  # keyed by the synced state: the next sync asks anew
COUNT_TASK = "tables.count_rows"


def _key(table: Table) -> str:
    return f"rowcount:{synced_key(table)}"


def latest_row_count(table: Table, *, wait: bool = True) -> dict[str, Any] | None:
    """The latest synced version's rows: `{version, files, rows, fromStats, fromFooters,
    unknownFiles, complete}`, or `{error}` when its log or files cannot be read now. None for a
    table never synced, and (with wait=False) while a worker makes a long log's count."""
    if table.last_synced_version is None:
        return None
    key = _key(table)
    found = caches["shared"].get(key)
    if found is not None:
        return found
    if not wait and is_long(table):
        count_later(table)
        return caches["shared"].get(key)  # a worker that runs tasks at once (eager) has it
    return _count(table, key)


def count_later(table: Table) -> None:
    """After a sync of a long log, and when a page finds no count: a worker makes it (once)."""
    if table.last_synced_version is not None and is_long(table):
        jobs.send_once(COUNT_TASK, f"{_key(table)}:sent", 600, table.pk)


def count_in_worker(table_id: int) -> bool:
    """The worker's side: the count made and stored for every process."""
    table = Table.objects.filter(pk=table_id).first()
    if table is None or table.last_synced_version is None:
        return False
    key = _key(table)
    if caches["shared"].get(key) is None:
        _count(table, key)
    return True


def _count(table: Table, key: str) -> dict[str, Any]:
    try:
        # where the one rule reads the version (a pin's kept table once the table lost it),
        # so the footers counted are files that exist
        snap, source = snapshot_and_source(table, table.last_synced_version)
        out: dict[str, Any] = row_count(as_storage(source.location if source else table.location), snap).to_dict()
    except (delta_errors.DeltaError, ServiceError, OSError) as exc:
        # not kept: the next page asks again (the store may answer then)
        return {"error": public_message(str(getattr(exc, "message", exc)), table)}
    caches["shared"].set(key, out, CACHE_SECONDS)
    return out
