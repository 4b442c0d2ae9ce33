"""When a table's change probe looks next: the interval, and the backoff of a table whose probe or
sync keeps failing (shared by the probe and the sync, which records its own failures)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from tables.models import Table


def interval() -> timedelta:
    return timedelta(seconds=max(1, int(settings.DELTAWEB_SYNC_INTERVAL_SECONDS)))


def backoff(failures: int, now: datetime | None = None) -> datetime:
    """When a table that failed `failures` times in a row is tried next: the interval doubled
    per failure, at most DELTAWEB_SYNC_BACKOFF_MAX_SECONDS, with a tenth of jitter."""
    base = interval().total_seconds() * 2 ** max(0, min(failures - 1, 20))
    wait = min(base, float(settings.DELTAWEB_SYNC_BACKOFF_MAX_SECONDS))
    return (now or timezone.now()) + timedelta(seconds=wait * random.uniform(0.9, 1.0))


def record_sync_failure(pk: int) -> None:
    """A failed sync counts as a failure in a row: the next try waits for the backoff."""
    now = timezone.now()
    failures = (Table.objects.filter(pk=pk).values_list("failures", flat=True).first() or 0) + 1
    Table.objects.filter(pk=pk).update(failures=failures, next_check_at=backoff(failures, now))
