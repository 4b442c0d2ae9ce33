"""Managed commits: read-only views of the owner state (changes go through the services)."""

from __future__ import annotations

from django.contrib import admin

from tables.admin.base import ReadOnlyAdmin
from tables.models import (
    ManagedTable,
    OwnerRefusal,
    RatifiedCommit,
)


@admin.register(ManagedTable)
class ManagedTableAdmin(ReadOnlyAdmin):
    list_display = ["table", "state", "latest_version", "backfilled_version", "frozen", "owner_table_id"]
    list_filter = ["state", "frozen"]


@admin.register(RatifiedCommit)
class RatifiedCommitAdmin(ReadOnlyAdmin):
    list_display = ["table", "version", "backfilled", "operation", "txn_id", "created_at"]
    list_filter = ["table", "backfilled"]


@admin.register(OwnerRefusal)
class OwnerRefusalAdmin(ReadOnlyAdmin):
    list_display = ["table", "version", "code", "operation", "reason", "at"]
    list_filter = ["table", "code"]
