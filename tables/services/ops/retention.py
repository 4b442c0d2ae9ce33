"""Retention of operational rows: finished jobs (and their result files) older than
DELTAWEB_RETENTION_DAYS are deleted, so a fleet's database stays bounded. The audit trail is
kept: restore requests, their events and approvals, managed-commit records and refusals, and
the history itself. Apps that plug in prune their own operational rows on the `prune` signal
(tables.signals)."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from tables.models import Job, JobStatus
from tables.services.data.jobs import results_dir
from tables.signals import prune

BATCH = 1000  # rows per DELETE: a long backlog is removed in short transactions


def cutoff(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(days=float(settings.DELTAWEB_RETENTION_DAYS))


def prune_jobs(before: datetime) -> int:
    """Delete finished jobs that ended before `before`, with their result directories (restore
    requests keep their own record: no job is part of it)."""
    deleted = 0
    while True:
        qs = Job.objects.filter(status__in=JobStatus.terminal(), finished_at__lt=before)
        ids = list(qs.values_list("pk", flat=True)[:BATCH])
        if not ids:
            return deleted
        Job.objects.filter(pk__in=ids).delete()
        for pk in ids:
            shutil.rmtree(results_dir(pk), ignore_errors=True)
        deleted += len(ids)


def prune_operational(now: datetime | None = None) -> dict[str, int]:
    """The beat's daily pruning: tables' jobs, then whatever the plugged-in apps prune."""
    before = cutoff(now)
    counts = {"jobs": prune_jobs(before)}
    for _receiver, answer in prune.send(sender=None, before=before):
        counts.update(answer or {})
    return counts
