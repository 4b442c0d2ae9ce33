"""The chain of what was seen: each commit's digest when first read (packed per block of commits),
the commits found other than first seen, the rewrites found, and the looks at the chain."""

from __future__ import annotations

import struct

from django.db import models

from tables.models.catalog import Table


class SeenBlock(models.Model):
    """The first look at a block of commit files (tables.services.chain.look), packed in one
    row: each commit's SHA-256 (32 bytes), size, listed time and commit time, when first seen,
    and the chain entry before the block and at its last version (tables.delta.history.chain;
    the entries between follow from the digests). The database's own record, not a cache: a
    history rebuilt from the log keeps it, and later looks compare with it.

    Each packed column holds `count` values in version order: 8-byte little-endian signed
    integers (NONE for a value not known), or 32-byte digests. A look that reads a commit again
    and finds its first bytes updates its listed time and hashing time here in place; a commit
    found other than first seen (gone, other bytes) has a SeenChange row besides."""

    NONE = -(1 << 63)  # a packed integer not known (no listed time, no commit time)

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="seen_blocks")
    first_version = models.BigIntegerField()
    last_version = models.BigIntegerField()
    count = models.IntegerField()
    versions = models.BinaryField(
        default=b"", blank=True, help_text="blank: first_version..last_version, each; else each version, packed"
    )
    digests = models.BinaryField(help_text="each commit file's SHA-256 when first seen, 32 bytes each")
    previous = models.CharField(
        max_length=64,
        blank=True,
        help_text="the chain entry before the first version (blank: `entry` given, one commit)",
    )
    entry = models.CharField(max_length=64, help_text="the chain entry of the last version")
    sizes = models.BinaryField(help_text="each commit file's size when first seen")
    timestamps = models.BinaryField(help_text="each commit's time, ms (for its retention)")
    first_seen_at = models.DateTimeField()
    seen_after = models.BinaryField(
        default=b"", blank=True, help_text="blank: all first seen at first_seen_at; else each one's µs after it"
    )
    # the last look's, updated in place: a change of the listing's size or time is hashed again
    listed_times = models.BinaryField(help_text="each file's modification time as listed when last hashed, ms")
    hashed = models.BinaryField(
        default=b"", blank=True, help_text="blank: each hashed when first seen; else when last hashed, ms"
    )
    expired = models.BinaryField(
        default=b"",
        blank=True,
        help_text="blank: none; else one byte each, 1: log cleanup removed it after its retention",
    )

    class Meta:
        ordering = ["first_version"]
        constraints = [models.UniqueConstraint(fields=["table", "first_version"], name="seen_block_once")]
        indexes = [models.Index(fields=["table", "last_version"], name="seen_block_last")]

    def __str__(self) -> str:
        return f"{self.table_id}@{self.first_version}..{self.last_version} ({self.count})"


class SeenChange(models.Model):
    """A seen commit a look found other than first seen, while it is: gone before its retention
    allowed, or read with other bytes (each finding is a HistoryRewrite too). Sparse: a commit
    read again with its first bytes has none."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="seen_changes")
    version = models.BigIntegerField()
    last_sha256 = models.CharField(max_length=64, blank=True, help_text="the digest the last read found (blank: none)")
    listed_size = models.BigIntegerField(null=True, blank=True)
    listed_time = models.BigIntegerField(null=True, blank=True, help_text="the file's modification time, ms")
    hashed_ms = models.BigIntegerField(null=True, blank=True, help_text="when its bytes were last read and hashed, ms")
    checked_at = models.DateTimeField(null=True, blank=True)
    gone_at = models.DateTimeField(null=True, blank=True, help_text="found gone before its retention allowed")

    class Meta:
        ordering = ["version"]
        constraints = [models.UniqueConstraint(fields=["table", "version"], name="seen_change_once")]

    def __str__(self) -> str:
        return f"{self.table_id}@{self.version} {'gone' if self.gone_at else self.last_sha256[:12]}"


def pack_ints(values: list[int | None]) -> bytes:
    """`values` as 8-byte little-endian signed integers, None as SeenBlock.NONE."""
    try:
        return struct.pack(f"<{len(values)}q", *values)
    except struct.error:  # a None among them
        none = SeenBlock.NONE
        return struct.pack(f"<{len(values)}q", *(none if v is None else v for v in values))


def unpack_ints(data: bytes | memoryview, count: int) -> list[int | None]:
    """pack_ints' values back (SeenBlock.NONE as None); `count` Nones from an empty column."""
    if not data:
        return [None] * count
    none = SeenBlock.NONE
    return [None if v == none else v for v in struct.unpack(f"<{count}q", bytes(data))]


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
