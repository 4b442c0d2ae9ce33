"""Registered tables, their cached history (a cache of the log, rebuildable), background jobs."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.delta.history.columns import Column


class SyncState(models.TextChoices):
    NEVER = "never", "never synced"
    QUEUED = "queued", "queued"
    SYNCING = "syncing", "syncing"
    OK = "ok", "in sync"
    ERROR = "error", "error"


class Table(models.Model):
    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(max_length=200, unique=True)
    location = models.CharField(max_length=2000, help_text="absolute path of the table root")
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    sync_state = models.CharField(max_length=16, choices=SyncState.choices, default=SyncState.NEVER)
    # the change probe (tables.services.sync.probe): when it looks next (spread over the
    # interval), when it last looked, and how many probes or syncs in a row failed (backoff)
    next_check_at = models.DateTimeField(null=True, blank=True, db_index=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    failures = models.PositiveIntegerField(default=0)
    sync_lease_until = models.DateTimeField(null=True, blank=True)
    last_synced_version = models.BigIntegerField(null=True, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    # what the latest sync saw of the ICT configuration and the table's size
    ict_enabled = models.BooleanField(default=False)
    ict_enablement_version = models.BigIntegerField(null=True, blank=True)
    ict_enablement_timestamp = models.BigIntegerField(null=True, blank=True)
    earliest_version = models.BigIntegerField(null=True, blank=True)
    last_commit_ms = models.BigIntegerField(null=True, blank=True, help_text="the newest commit's timestamp")
    log_retention_ms = models.BigIntegerField(null=True, blank=True, help_text="delta.logRetentionDuration")
    # the latest version's schemaString, partitionColumns and configuration, for the Overview
    latest_metadata = models.JSONField(null=True, blank=True)
    num_files = models.BigIntegerField(null=True, blank=True)
    size_bytes = models.BigIntegerField(null=True, blank=True)

    # registered by discovery: the source that found it, and since when that source no longer does
    source = models.ForeignKey(
        "DiscoverySource", null=True, blank=True, on_delete=models.SET_NULL, related_name="tables"
    )
    vanished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        # the tables list's orders (tables.web.table_list.TABLE_SORTS), each with its tie-break
        # by name, so a page of 25 is read off an index instead of sorting every table; the
        # search's covering index is SQLite's only (migration 0028_table_list_indexes)
        indexes = [
            models.Index(fields=["-last_synced_at", "name"], name="table_list_synced_desc"),
            models.Index(fields=["last_synced_at", "name"], name="table_list_synced"),
            models.Index(fields=["-size_bytes", "name"], name="table_list_size_desc"),
            models.Index(fields=["-num_files", "name"], name="table_list_files_desc"),
            models.Index(fields=["-last_synced_version", "name"], name="table_list_version_desc"),
            models.Index(fields=["-last_commit_ms", "name"], name="table_list_commit_desc"),
            models.Index(fields=["last_commit_ms", "name"], name="table_list_commit"),
        ]

    def __str__(self) -> str:
        return self.name


class DiscoverySource(models.Model):
    """A prefix or a Glue database that discovery looks in again on a schedule: new tables are
    registered, tables it no longer finds are marked vanished (their history is kept)."""

    prefix = models.CharField(max_length=2000, blank=True)
    glue_database = models.CharField(max_length=255, blank=True)
    every_hours = models.PositiveIntegerField(default=24)
    next_run_at = models.DateTimeField(db_index=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_result = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.prefix or f"glue:{self.glue_database}"


class Commit(models.Model):
    """One history row (as DESCRIBE HISTORY) cached from the log."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="commits")
    version = models.BigIntegerField()
    timestamp = models.BigIntegerField(null=True, help_text="effective commit timestamp, ms since epoch")
    timestamp_source = models.CharField(max_length=8)  # ict | file
    in_commit_timestamp = models.BigIntegerField(null=True, blank=True)
    commit_info_timestamp = models.BigIntegerField(null=True, blank=True)
    file_modification_time = models.BigIntegerField()
    adjusted = models.BooleanField(default=False)
    # DESCRIBE HISTORY's commitInfo columns (operation, userName, ...) are added below, from
    # their one declaration (tables.delta.history.columns)
    commit_info = models.JSONField(null=True, blank=True)
    num_files = models.BigIntegerField(null=True, blank=True, help_text="active files after the commit")
    size_bytes = models.BigIntegerField(null=True, blank=True, help_text="bytes of active files after the commit")
    # log cleanup deleted the commit file: the row is now the audit record of what was
    log_expired = models.BooleanField(default=False)

    class Meta:
        ordering = ["-version"]
        constraints = [models.UniqueConstraint(fields=["table", "version"], name="unique_commit_version")]
        indexes = [models.Index(fields=["table", "timestamp"])]

    def __str__(self) -> str:
        return f"{self.table_id}@{self.version}"


def _history_field(c: Column) -> models.Field:
    """The database column of a declared history column."""
    if c.kind == "text" and c.max_length:
        return models.CharField(max_length=c.max_length, blank=True, db_index=c.indexed)
    if c.kind == "text":
        return models.TextField(blank=True, db_index=c.indexed)
    if c.kind == "json":
        return models.JSONField(null=True, blank=True)
    if c.kind == "int":
        return models.BigIntegerField(null=True, blank=True, db_index=c.indexed)
    return models.BooleanField(null=True, blank=True)


for _column in HISTORY_COLUMNS:
    Commit.add_to_class(_column.field, _history_field(_column))


class Anomaly(models.Model):
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="anomalies")
    version = models.BigIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=64)
    detail = models.TextField()

    class Meta:
        ordering = ["version", "kind"]


class VersionChecksum(models.Model):
    """A version's checksum file (`_delta_log/N.crc`) as the sync found it against the log's
    replay (tables.services.sync.checksums): it agreed, or the fields that differ with both
    values. No row: the version has no checksum file, or it was not checked. A cache like the
    history: the log and its checksum files are the truth."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="checksums")
    version = models.BigIntegerField()
    ok = models.BooleanField()
    # [{field, expected (the checksum's), found (the replay's)}], values bounded (text_bounds)
    mismatches = models.JSONField(default=list)
    error = models.TextField(blank=True, default="", help_text="why the checksum file could not be decoded")
    full = models.BooleanField(default=True, help_text="every field compared (else the counts only)")
    sha256 = models.CharField(max_length=64, blank=True, default="", help_text="of the checksum file's bytes")
    checked_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["table", "version"], name="version_checksum_once")]


class FileLook(models.Model):
    """The sync's last look at the files a table's log still references (tables.services.sync
    .vanished): compact, never the file list itself. The missing files are kept as sorted
    64-bit hashes of their paths while they are few enough (DELTAWEB_VACUUM_MISSING_KEPT)."""

    table = models.OneToOneField(Table, on_delete=models.CASCADE, related_name="file_look")
    version = models.BigIntegerField(help_text="the latest version at the look")
    looked_at = models.DateTimeField()
    listed_at = models.DateTimeField(null=True, blank=True, help_text="the last look that listed the whole table")
    syncs_since = models.PositiveIntegerField(default=0, help_text="syncs since the look (object stores look every N)")
    referenced = models.BigIntegerField(default=0, help_text="files of the versions still in the log")
    missing = models.BigIntegerField(default=0)
    missing_bytes = models.BigIntegerField(default=0)
    missing_digest = models.CharField(max_length=16, blank=True, help_text="the sum of the missing files' hashes")
    missing_hashes = models.BinaryField(null=True, blank=True, help_text="sorted big-endian uint64, 8 bytes a file")
    unreadable = models.JSONField(
        default=list, blank=True, help_text="[[first, last], ...] unreadable for missing files"
    )
    complete = models.BooleanField(default=True, help_text="the missing files come from a listing (else a sample)")

    def __str__(self) -> str:
        return f"{self.table_id}@{self.version}: {self.missing} of {self.referenced} missing"


class FileRemovalEvent(models.Model):
    """Referenced files found gone from storage outside the log (a VACUUM, or anyone), with
    the versions that became unreadable; linked to the VACUUM commits around it."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="file_removals")
    noticed_at = models.DateTimeField()
    version = models.BigIntegerField(help_text="the latest version when noticed")
    previous_version = models.BigIntegerField(null=True, blank=True, help_text="the version of the look before")
    files = models.BigIntegerField()
    bytes = models.BigIntegerField()
    paths = models.JSONField(default=list, blank=True, help_text="the first vanished paths (at most 20)")
    unreadable = models.JSONField(default=list, blank=True, help_text="[[first, last], ...] of versions")
    unreadable_count = models.BigIntegerField(default=0)
    unreadable_from = models.BigIntegerField(null=True, blank=True)
    unreadable_to = models.BigIntegerField(null=True, blank=True)
    vacuum_start_version = models.BigIntegerField(null=True, blank=True)
    vacuum_end_version = models.BigIntegerField(null=True, blank=True)
    vacuum_user = models.CharField(max_length=500, blank=True, help_text="userName (or userId) of the VACUUM commit")
    vacuum_timestamp = models.BigIntegerField(null=True, blank=True, help_text="the VACUUM commit's time, ms")
    vacuum_deleted_files = models.BigIntegerField(null=True, blank=True, help_text="as its operationMetrics say")
    complete = models.BooleanField(default=True, help_text="counted from a listing of the table (else a sample)")
    exact = models.BooleanField(default=True, help_text="files compared one by one (else counts compared)")

    class Meta:
        ordering = ["-version", "-id"]
        indexes = [models.Index(fields=["table", "version"])]

    def __str__(self) -> str:
        return f"{self.table_id}@{self.version}: {self.files} files gone"


class SeenCommit(models.Model):
    """The first look at a commit file (tables.services.sync.chain): the SHA-256 of its bytes,
    chained to the previous version's entry (tables.delta.history.chain). The database's own
    record, not a cache: a history rebuilt from the log keeps it, and later looks compare with it."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="seen_commits")
    version = models.BigIntegerField()
    sha256 = models.CharField(max_length=64, help_text="of the commit file's bytes when first seen")
    entry = models.CharField(max_length=64, help_text="the chain entry (previous entry, version, sha256)")
    size = models.BigIntegerField()
    first_seen_at = models.DateTimeField()
    timestamp = models.BigIntegerField(null=True, blank=True, help_text="the commit's time, ms (for its retention)")
    # what the last look found: the listing's size and time (a change is hashed again) and the digest
    listed_size = models.BigIntegerField(null=True, blank=True)
    listed_time = models.BigIntegerField(null=True, blank=True, help_text="the file's modification time, ms")
    last_sha256 = models.CharField(
        max_length=64, blank=True, help_text="the digest the last read found (blank: the first seen)"
    )
    hashed_ms = models.BigIntegerField(null=True, blank=True, help_text="when its bytes were last read and hashed, ms")
    checked_at = models.DateTimeField(null=True, blank=True)
    gone_at = models.DateTimeField(null=True, blank=True, help_text="found gone before its retention allowed")
    expired = models.BooleanField(default=False, help_text="log cleanup removed it after its retention")

    class Meta:
        ordering = ["version"]
        constraints = [models.UniqueConstraint(fields=["table", "version"], name="seen_commit_once")]

    def __str__(self) -> str:
        return f"{self.table_id}@{self.version} {self.sha256[:12]}"


class RewriteKind(models.TextChoices):
    REWRITTEN = "rewritten", "rewritten (other bytes than first seen)"
    VANISHED = "vanished", "vanished before its retention allowed"
    REAPPEARED = "reappeared", "reappeared with new content"


class HistoryRewrite(models.Model):
    """A look at an already-seen version that found it other than first seen: other bytes, gone
    before its log retention allowed, or back with new content."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="history_rewrites")
    version = models.BigIntegerField()
    kind = models.CharField(max_length=16, choices=RewriteKind.choices)
    first_sha256 = models.CharField(max_length=64)
    found_sha256 = models.CharField(max_length=64, blank=True, help_text="blank: the file is gone")
    first_seen_at = models.DateTimeField()
    found_at = models.DateTimeField()
    found_by = models.CharField(max_length=16, help_text="sync or daily (the rolling check)")

    class Meta:
        ordering = ["-found_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["table", "version", "kind", "found_sha256"], name="history_rewrite_once")
        ]

    def __str__(self) -> str:
        return f"{self.table_id}@{self.version} {self.kind}"


class ChainLook(models.Model):
    """The last chain check of a table (at a sync or the rolling schedule): when, and what it cost."""

    table = models.OneToOneField(Table, on_delete=models.CASCADE, related_name="chain_look")
    looked_at = models.DateTimeField()
    next_at = models.DateTimeField(db_index=True, help_text="when the rolling schedule looks again")
    requests = models.BigIntegerField(default=0, help_text="storage requests of the last look (listings and reads)")
    hashed = models.BigIntegerField(default=0, help_text="commit files read and hashed by the last look")
    findings = models.BigIntegerField(default=0)


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
        """The kinds run on Spark whose results are rows (tables.services.data_jobs)."""
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
            # joins it (tables.services.jobs.create_or_join), also when two requests race
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


# --- managed commits: deltaweb as a table's commit-owner (the database's own state) -------------


class OwnerState(models.TextChoices):
    PROPOSED = "proposed", "take-over proposed (waiting for the ownership commit)"
    ACTIVE = "active", "active: deltaweb ratifies every commit"
    RELEASING = "releasing", "being handed back to the filesystem"
    RELEASED = "released", "handed back: a filesystem table again"


class ManagedTable(models.Model):
    """deltaweb as the commit-owner of a table: the owner state (tables.services.owner.db.DatabaseOwner).

    `owner_table_id` is the `tableId` of the owner conf in the table's metadata and the id in
    /api/owner/tables/{id}/. `latest_version` is the newest ratified version (or the one the
    ownership commit installed), `backfilled_version` the newest in `_delta_log/`.
    """

    table = models.OneToOneField(Table, on_delete=models.CASCADE, related_name="managed")
    owner_table_id = models.CharField(max_length=64, unique=True, help_text="tableId of the owner conf")
    feature = models.CharField(max_length=64, default="managedCommit")
    state = models.CharField(max_length=16, choices=OwnerState.choices, default=OwnerState.PROPOSED)
    proposed_version = models.BigIntegerField(null=True, blank=True, help_text="take-over: the ownership commit")
    latest_version = models.BigIntegerField(default=-1)
    backfilled_version = models.BigIntegerField(default=-1)
    latest_ict = models.BigIntegerField(null=True, blank=True)
    releasing_version = models.BigIntegerField(null=True, blank=True)
    releasing_path = models.CharField(max_length=500, blank=True)
    released_version = models.BigIntegerField(null=True, blank=True)
    frozen = models.BooleanField(default=False)
    frozen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    frozen_reason = models.TextField(blank=True)
    frozen_at = models.DateTimeField(null=True, blank=True)
    # the Unity Catalog name a catalogManaged table is served under (tables.api.catalog.views), and the
    # last version that changed its metadata or protocol (the etag moves only then)
    uc_catalog = models.CharField(max_length=255, blank=True)
    uc_schema = models.CharField(max_length=255, blank=True)
    uc_name = models.CharField(max_length=255, blank=True)
    metadata_version = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["uc_catalog", "uc_schema", "uc_name"],
                condition=~models.Q(uc_name=""),
                name="unique_uc_table_name",
            )
        ]

    def __str__(self) -> str:
        return f"{self.table} ({self.state})"

    @property
    def backfill_lag(self) -> int:
        return max(0, self.latest_version - self.backfilled_version) if self.state != OwnerState.PROPOSED else 0


class RatifiedCommit(models.Model):
    """A version the owner ratified: its staged file until it is backfilled to `_delta_log/`.
    The unique (table, version) makes two winners of one version impossible."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="ratified_commits")
    version = models.BigIntegerField()
    path = models.CharField(max_length=500, help_text="staged file, relative to the table root")
    size = models.BigIntegerField()
    modification_time = models.BigIntegerField()
    in_commit_timestamp = models.BigIntegerField(null=True, blank=True)
    txn_id = models.CharField(max_length=200, blank=True)
    operation = models.CharField(max_length=200, blank=True)
    engine_info = models.CharField(max_length=200, blank=True, help_text="commitInfo.engineInfo")
    committed_by = models.CharField(max_length=150, blank=True, help_text="the API user who proposed it")
    backfilled = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["version"]
        constraints = [models.UniqueConstraint(fields=["table", "version"], name="unique_ratified_version")]

    def __str__(self) -> str:
        return f"{self.table_id}@{self.version}{'' if self.backfilled else ' (not backfilled)'}"


class OwnerRefusal(models.Model):
    """A commit the owner refused (policy, frozen, writer requirements), for the UI."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="owner_refusals")
    version = models.BigIntegerField()
    code = models.CharField(max_length=64)
    reason = models.TextField()
    operation = models.CharField(max_length=200, blank=True)
    txn_id = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]


class UcStagingTable(models.Model):
    """A Unity Catalog staging table: a table id and a location allocated by createStagingTable,
    finalized at most once by its creator's createTable (tables.uc_catalog)."""

    table_uuid = models.UUIDField(unique=True)
    catalog = models.CharField(max_length=255)
    schema = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    location = models.CharField(max_length=2000, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finalized = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.name} (staging {self.table_uuid})"


class TokenExpiry(models.Model):
    """When an API token (DRF's, one per user) stops working; None: never (tokens made before
    expiry existed). Issued, rotated and revoked by tables.services.access.api_tokens."""

    token = models.OneToOneField(
        "authtoken.Token", primary_key=True, on_delete=models.CASCADE, related_name="expiry", db_column="token_key"
    )
    expires_at = models.DateTimeField(null=True, blank=True)


class SsoIdentity(models.Model):
    """A single sign-on identity (the provider's issuer and its `sub`, OpenID Connect's only
    stable key for a person) and the account it signs in to. Names and e-mails are the
    provider's to change, so none of them ever picks an account: an identity reaches an
    account that sign-on created itself (`created`), or one an administrator linked here on
    purpose (`created` false: a local account whose flags and password the provider never
    touches)."""

    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities")
    created = models.BooleanField(default=True, help_text="the account was made by single sign-on")
    linked_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_once")]
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer} -> {self.user}"


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


# --- pins: versions kept through any VACUUM and log cleanup (the database's own state) ----------


class PinState(models.TextChoices):
    WRITING = "writing", "writing: the version is being kept"
    ACTIVE = "active", "active"
    UNPIN_REQUESTED = "unpin_requested", "removal requested: awaiting an approver"
    REMOVED = "removed", "removed"
    EXPIRED = "expired", "expired"
    FAILED = "failed", "failed: the version could not be kept"

    @classmethod
    def holding(cls) -> set[str]:
        """States in which the pin store holds the version (a removal not yet approved too)."""
        return {cls.ACTIVE, cls.UNPIN_REQUESTED}


class Pin(models.Model):
    """A named, reasoned, optionally expiring promise that a version of a table stays readable:
    the version written as a table of its own into the pin store deltaweb owns (files hard
    linked or copied, its log and a checkpoint), so no VACUUM or log cleanup of the table by any
    engine takes it away. Removing one before it expires is a request an approver accepts."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="pins")
    version = models.BigIntegerField()
    name = models.CharField(max_length=200)
    reason = models.TextField()
    expires_at = models.DateTimeField(null=True, blank=True, help_text="none: kept until removed")
    state = models.CharField(max_length=20, choices=PinState.choices, default=PinState.ACTIVE)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="pins_created"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    store_location = models.TextField(blank=True, help_text="the kept table in the pin store")
    protection = models.CharField(max_length=40, blank=True, help_text="how the store holds the files")
    files = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0, help_text="the version's data bytes")
    bytes_copied = models.BigIntegerField(default=0, help_text="bytes written anew (0 with hard links)")
    removal_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="unpin_requests"
    )
    removal_reason = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="unpin_decisions"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["table", "name"], name="pin_name_once_per_table")]

    def __str__(self) -> str:
        return f"pin {self.name!r} of {self.table} at version {self.version} ({self.state})"


class PinEvent(models.Model):
    """The audit trail of a pin: created, removal requested, approved or rejected, expired."""

    pin = models.ForeignKey(Pin, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.from_state or 'new'} → {self.to_state}"


# -- Delta Sharing: shares of tables (each with a window of its history), recipients and what
# they asked. The protocol is served under /delta-sharing/ (tables.api.sharing).

SHARING_NAME = RegexValidator(
    r"^[^\s/.\x00-\x1f\x7f]{1,255}$",
    "a sharing name: at most 255 characters, no space, '/', '.' or control character",
)


class Share(models.Model):
    """A named set of tables a recipient may read (the protocol's share)."""

    name = models.CharField(max_length=255, unique=True, validators=[SHARING_NAME])
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SharedTable(models.Model):
    """A registered table in a share, under a schema and a name of its own, with the window of
    its history recipients may read (first..last version; none: all) and whether its change data
    is shared."""

    share = models.ForeignKey(Share, on_delete=models.CASCADE, related_name="tables")
    schema = models.CharField(max_length=255, default="default", validators=[SHARING_NAME])
    name = models.CharField(max_length=255, validators=[SHARING_NAME])
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="shared_as")
    first_version = models.BigIntegerField(null=True, blank=True, help_text="the earliest version shared")
    last_version = models.BigIntegerField(
        null=True, blank=True, help_text="the latest version shared (recipients see it as the table's latest)"
    )
    change_data = models.BooleanField(default=False, help_text="recipients may read the change data feed")

    class Meta:
        ordering = ["share", "schema", "name"]
        constraints = [models.UniqueConstraint(fields=["share", "schema", "name"], name="shared_table_once")]

    def __str__(self) -> str:
        return f"{self.share.name}.{self.schema}.{self.name}"


class Recipient(models.Model):
    """Who reads shares, by a bearer token: only its SHA-256 is stored, the token is shown once."""

    name = models.CharField(max_length=200, unique=True)
    shares = models.ManyToManyField(Share, related_name="recipients", blank=True)
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False)
    token_hint = models.CharField(max_length=8, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RecipientQuery(models.Model):
    """One request of a recipient on a shared table: what it asked, which versions it was
    answered and how many files (and bytes) it was served."""

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="queries")
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="recipient_queries")
    shared_as = models.CharField(max_length=800)
    kind = models.CharField(max_length=16)  # version | metadata | query | changes
    version = models.BigIntegerField(null=True, blank=True, help_text="the version read (a query's)")
    start_version = models.BigIntegerField(null=True, blank=True)
    end_version = models.BigIntegerField(null=True, blank=True)
    files = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    refused = models.CharField(max_length=64, blank=True, help_text="the error code when refused")
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["table", "-at"])]
