"""RESTORE requests, their events and the objects a request recovered."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from tables.models.catalog import Table


class RestoreStatus(models.TextChoices):
    PENDING = "pending", "pending approval"
    STALE = "stale", "stale: the table moved on, approve the new plan"
    WITHDRAWN = "withdrawn", "withdrawn by the requester"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    CONFLICT = "conflict", "conflict"

    @classmethod
    def terminal(cls) -> set[str]:
        return {cls.REJECTED, cls.WITHDRAWN, cls.SUCCEEDED, cls.FAILED, cls.CONFLICT}

    @classmethod
    def awaiting_approval(cls) -> set[str]:
        return {cls.PENDING, cls.STALE}

    @classmethod
    def in_flight(cls) -> set[str]:
        """Approved and not finished: a worker has it or will."""
        return {cls.APPROVED, cls.QUEUED, cls.RUNNING}


class RestoreRequest(models.Model):
    """An analyst's request to put a table back to an earlier version; the database's own
    record (not a cache): the plan that was approved, who did what, and what landed."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="restores")
    target_version = models.BigIntegerField(null=True, blank=True, help_text="as requested")
    target_timestamp = models.CharField(max_length=64, blank=True, help_text="as requested")
    resolved_version = models.BigIntegerField(null=True, blank=True)
    resolution_rule = models.TextField(blank=True)
    reason = models.TextField()
    ignore_missing_files = models.BooleanField(default=False)
    allow_protocol_downgrade = models.BooleanField(default=False)
    recover_files_first = models.BooleanField(
        default=False, help_text="copy the version's gone objects back from the bucket's noncurrent versions first"
    )
    status = models.CharField(max_length=16, choices=RestoreStatus.choices, default=RestoreStatus.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="restore_requests"
    )
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="restore_decisions"
    )
    approver_comment = models.TextField(blank=True)
    plan = models.JSONField(null=True, blank=True, help_text="the dry-run plan (RestorePlan.to_dict)")
    plan_head_version = models.BigIntegerField(null=True, blank=True, help_text="head version the plan was computed on")
    plan_fingerprint = models.CharField(max_length=128, blank=True)
    stage = models.CharField(max_length=200, blank=True)
    done = models.BigIntegerField(default=0)
    total = models.BigIntegerField(null=True, blank=True)
    result_version = models.BigIntegerField(null=True, blank=True)
    verification = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="what the run reported (commit, metrics, rebase)")
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="how many times a worker claimed the run")
    progress_at = models.DateTimeField(
        null=True, blank=True, help_text="last sign of life: queued, claimed, progress or a worker's heartbeat"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The RESTORE commit's commitInfo.txnId (retries look for it). Random rather than derived
    # from the primary key: ids restart when a database is rebuilt, and a commit of an old
    # request must never be mistaken for a new request's.
    txn_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"restore {self.table} to {self.resolved_version} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in RestoreStatus.terminal()

    @property
    def awaiting_approval(self) -> bool:
        return self.status in RestoreStatus.awaiting_approval()

    @property
    def txn(self) -> str:
        """txn_id as written into the RESTORE commit's commitInfo.txnId."""
        return str(self.txn_id)


class RestoreEvent(models.Model):
    """The audit trail: every transition of a restore request, with who and when."""

    request = models.ForeignKey(RestoreRequest, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.from_status or 'new'} → {self.to_status}"


class RecoveredObject(models.Model):
    """The audit of a recovery: one object a restore request copies back from a noncurrent
    version of a versioned bucket (recorded with the request, marked before the copy, completed
    after it). An audit record: never pruned, and nothing it names is ever deleted."""

    class Outcome(models.TextChoices):
        PLANNED = "planned", "planned"  # with the request: to be copied once approved
        COPYING = "copying", "copying"  # begun; a worker that stopped left it so
        COPIED = "copied", "copied"
        PRESENT = "present", "already present"  # a current object with the same bytes was there
        FAILED = "failed", "failed"

    request = models.ForeignKey(RestoreRequest, on_delete=models.CASCADE, related_name="recovered_objects")
    path = models.TextField(help_text="the key relative to the table")
    source_version_id = models.CharField(max_length=1024, help_text="the noncurrent version copied")
    source_etag = models.CharField(max_length=200, blank=True)
    size = models.BigIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    version_id = models.CharField(max_length=1024, blank=True, help_text="the current version after the copy")
    etag = models.CharField(max_length=200, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, help_text="of the bytes copied")
    checked_by = models.CharField(max_length=200, blank=True, help_text="how the copy was compared with the version")
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.path} from {self.source_version_id} ({self.outcome})"
