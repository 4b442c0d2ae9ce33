"""Finished jobs' durations as cumulative histograms in the database (JobDuration rows), counted
as each job ends: every web process's scrape reads the same counts, and they never go down."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F
from prometheus_client.utils import floatToGoString

from tables.models import JobDuration

BUCKETS = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800)  # seconds


def record(kind: str, seconds: float) -> None:
    """One finished job of `kind` that ran `seconds`: its buckets, count and sum go up."""
    seconds = max(0.0, float(seconds))
    rows = JobDuration.objects.filter(kind=kind)
    if not rows.filter(le__isnull=True).update(count=F("count") + 1, total_seconds=F("total_seconds") + seconds):
        _create(kind)  # the kind's first job: its rows, then the count
        rows.filter(le__isnull=True).update(count=F("count") + 1, total_seconds=F("total_seconds") + seconds)
    rows.filter(le__gte=seconds).update(count=F("count") + 1)


def _create(kind: str) -> None:
    try:
        with transaction.atomic():
            JobDuration.objects.bulk_create([JobDuration(kind=kind, le=le) for le in (*BUCKETS, None)])
    except IntegrityError:
        pass  # another process made them first


def histograms() -> dict[str, tuple[list[tuple[str, int]], float]]:
    """kind -> (cumulative buckets as (le, count) with +Inf last, sum of seconds)."""
    out: dict[str, tuple[list[tuple[str, int]], float]] = {}
    for kind, le, count, total in JobDuration.objects.order_by("kind", F("le").asc(nulls_last=True)).values_list(
        "kind", "le", "count", "total_seconds"
    ):
        buckets, seconds = out.get(kind, ([], 0.0))
        buckets.append(("+Inf" if le is None else floatToGoString(le), count))  # le="5.0", as Histogram
        out[kind] = (buckets, total if le is None else seconds)
    return out
