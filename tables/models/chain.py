"""The chain of what was seen: each commit's digest when first read, the rewrites found, and the
looks at the chain."""

from __future__ import annotations

from django.db import models

from tables.models.catalog import Table


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
