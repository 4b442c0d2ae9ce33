"""Background jobs: a row first, with its kind, parameters, progress and result; finished jobs'
durations."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.conf import settings
from django.db import models

from tables.models.catalog import Table


class JobStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    SKIPPED = "skipped", "skipped"

    @classmethod
    def terminal(cls) -> set[str]:
        return {cls.SUCCEEDED, cls.FAILED, cls.SKIPPED}

    @classmethod
    def active(cls) -> tuple[str, ...]:
        """Not finished: an identical job in one of these states is joined, not duplicated."""
        return (cls.QUEUED, cls.RUNNING)


def params_hash(params: dict[str, Any] | None) -> str:
    """A stable digest of a job's parameters (key order and spacing do not matter)."""
    text = json.dumps(params or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class JobKind(models.TextChoices):
    SYNC = "sync", "sync"
    PREVIEW = "preview", "preview"
    CHANGES = "changes", "change data"
    ROWDIFF = "rowdiff", "row diff"
    ROWHISTORY = "rowhistory", "row history"
    QUERY = "query", "query"

    @classmethod
    def data_kinds(cls) -> tuple[str, ...]:
        """The kinds run on Spark whose results are rows (tables.services.data.jobs)."""
        return (cls.PREVIEW, cls.CHANGES, cls.ROWDIFF, cls.ROWHISTORY, cls.QUERY)


class Job(models.Model):
    """A background job is a row first: created, then enqueued on commit; progress lives here."""

    kind = models.CharField(max_length=32, choices=JobKind.choices)
    params = models.JSONField(default=dict, blank=True, help_text="what the job was asked to do")
    # set from params on save; with kind and table it names "the same job" for the rule below
    params_hash = models.CharField(max_length=64, blank=True, default="", editable=False)
    table = models.ForeignKey(Table, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    stage = models.CharField(max_length=200, blank=True)
    done = models.BigIntegerField(default=0)
    total = models.BigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    result = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    progress_at = models.DateTimeField(
        null=True, blank=True, help_text="last sign of life: sent, claimed, progress or the worker's heartbeat"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # at most one queued or running job per (kind, table, parameters): a second request
            # joins it (tables.services.jobs.lifecycle.create_or_join), also when two requests race
            models.UniqueConstraint(
                fields=["kind", "table", "params_hash"],
                condition=models.Q(status__in=["queued", "running"]) & ~models.Q(params_hash=""),
                name="job_active_unique",
            ),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.params_hash = params_hash(self.params)
        super().save(*args, **kwargs)

    @property
    def is_terminal(self) -> bool:
        return self.status in JobStatus.terminal()

    @property
    def is_cancellable(self) -> bool:
        """A data job not ended yet (its page offers to cancel it; the service decides who may)."""
        return self.kind in JobKind.data_kinds() and not self.is_terminal


class JobDuration(models.Model):
    """Cumulative histograms of finished jobs' durations, by kind: one row per bucket (`le`
    seconds; null: +Inf, whose row also holds the sum). Incremented as each job ends, never
    rebuilt from the jobs kept, so a scrape's counts never go down (Prometheus' rate() and
    histogram_quantile need that)."""

    kind = models.CharField(max_length=20)
    le = models.FloatField(null=True)
    count = models.BigIntegerField(default=0)
    total_seconds = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "le"], name="job_duration_bucket_once"),
            models.UniqueConstraint(fields=["kind"], condition=models.Q(le__isnull=True), name="job_duration_inf_once"),
        ]
