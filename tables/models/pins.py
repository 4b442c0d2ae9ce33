"""Pins: versions kept through any VACUUM and log cleanup (the database's own state)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tables.models.catalog import Table

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
