"""What the tables list shows of each table on a page, beyond its row: commits in the last
day, versions past log retention (log cleanup may delete them), and the sync's lag (the
plug-ins' columns are counted by them, tables.plugins).
Asked for the page's tables only (a few grouped queries on indexed columns), so the list
costs the same at 10,000 tables as at 10."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_

from django.db.models import Count, Q
from django.utils import timezone

from tables.delta.history.reachability.compute import DEFAULT_LOG_RETENTION, interval_ms
from tables.delta.history.timestamps import format_ms
from tables.models import Commit, Table

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Figures:
    commits_last_day: int
    beyond_retention: int
    lag_seconds: int | None  # since the probe or a sync last found the table as it is
    last_commit: str  # the newest commit's time, as the history shows times ("" before a sync)


def page_figures(tables: Sequence[Table], now_ms: int | None = None) -> dict[int, Figures]:
    ids = [t.pk for t in tables]
    if not ids:
        return {}
    now_ms = now_ms or int(time.time() * 1000)
    recent = dict(
        Commit.objects.filter(table_id__in=ids, timestamp__gte=now_ms - DAY_MS)
        .values_list("table_id")
        .annotate(n=Count("id"))
    )
    default_retention = interval_ms(None, DEFAULT_LOG_RETENTION)
    old = reduce(
        or_,
        (Q(table_id=t.pk, timestamp__lt=now_ms - (t.log_retention_ms or default_retention)) for t in tables),
    )
    beyond = dict(Commit.objects.filter(old, log_expired=False).values_list("table_id").annotate(n=Count("id")))
    now = timezone.now()
    out = {}
    for t in tables:
        seen = max((d for d in (t.checked_at, t.last_synced_at) if d is not None), default=None)
        out[t.pk] = Figures(
            recent.get(t.pk, 0),
            beyond.get(t.pk, 0),
            None if seen is None else max(0, int((now - seen).total_seconds())),
            format_ms(t.last_commit_ms) or "",
        )
    return out
