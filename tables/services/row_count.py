"""The row count of a registered table's latest synced version, as the Overview shows it:
the core's `row_count` (numRecords of the adds' stats, else the Parquet footers, less the
deletion vectors' cardinality), cached until the next sync.

Pages do not wait for a long log: above `inline_versions()` versions (the reachability's
bound) a page asks with `wait=False`, gets None, and the count is made in a background thread
for the next request; reading the adds of every active file means reading the commits that
added them, which a long log without checkpoints makes many.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core.cache import cache
from django.db import connection

from tables.delta import errors as delta_errors
from tables.delta.snapshot.row_count import row_count
from tables.delta.storage.boundary import as_storage
from tables.models import Table
from tables.services.errors import ServiceError, public_message
from tables.services.history.query import synced_key
from tables.services.reachability import inline_versions
from tables.services.versions import snapshot_at

CACHE_SECONDS = 24 * 3600  # keyed by the synced state: the next sync asks anew

logger = logging.getLogger(__name__)
_background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="row-count")
_queued: set[str] = set()
_queued_lock = threading.Lock()


def _key(table: Table) -> str:
    return f"rowcount:{synced_key(table)}"


def latest_row_count(table: Table, *, wait: bool = True) -> dict[str, Any] | None:
    """The latest synced version's rows: `{version, files, rows, fromStats, fromFooters,
    unknownFiles, complete}`, or `{error}` when its log or files cannot be read now. None for a
    table never synced, and (with wait=False) while a long log's count is being made."""
    if table.last_synced_version is None:
        return None
    key = _key(table)
    found = cache.get(key)
    if found is not None:
        return found
    if not wait and table.last_synced_version >= inline_versions():
        _count_later(table, key)
        return None
    return _count(table, key)


def _count(table: Table, key: str) -> dict[str, Any]:
    try:
        snap = snapshot_at(table, table.last_synced_version)
        out: dict[str, Any] = row_count(as_storage(table.location), snap).to_dict()
    except (delta_errors.DeltaError, ServiceError, OSError) as exc:
        # not cached: the next page asks again (the store may answer then)
        return {"error": public_message(str(getattr(exc, "message", exc)), table)}
    cache.set(key, out, CACHE_SECONDS)
    return out


def _count_later(table: Table, key: str) -> None:
    with _queued_lock:
        if key in _queued:
            return
        _queued.add(key)

    def run() -> None:
        try:
            _count(table, key)
        except Exception:  # the next page asks again; its own path reports errors
            logger.warning("the row count of table %s failed in the background", table.pk, exc_info=True)
        finally:
            with _queued_lock:
                _queued.discard(key)
            connection.close()  # this thread's own database connection (a managed table's owner)

    _background.submit(run)
