"""Managed commits: deltaweb as a table's commit owner and as a Unity Catalog (the database's own
state)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tables.models.catalog import Table

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
