"""The cached history (read-only lists): commits and anomalies."""

from __future__ import annotations

from django.contrib import admin

from tables.models import (
    Anomaly,
    Commit,
)


@admin.register(Commit)
class CommitAdmin(admin.ModelAdmin):
    list_display = ["table", "version", "timestamp", "timestamp_source", "operation"]
    list_filter = ["table", "operation", "timestamp_source"]


@admin.register(Anomaly)
class AnomalyAdmin(admin.ModelAdmin):
    list_display = ["table", "version", "kind", "detail"]
    list_filter = ["kind"]
