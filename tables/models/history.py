"""The cached history of a table's log (rebuildable): its commits with the declared History
columns, anomalies, version checksums, the looks at its files and the file-removal events."""

from __future__ import annotations

from django.db import models

from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.delta.history.columns import Column
from tables.models.catalog import Table


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
        verbose_name_plural = "anomalies"
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
