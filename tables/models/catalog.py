"""Registered tables and where they were discovered."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
        # the tables list's orders (tables.web.catalog.table_list.TABLE_SORTS), each with its tie-break
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
