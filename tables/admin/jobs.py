"""Background jobs (read-only list)."""

from __future__ import annotations

from django.contrib import admin

from tables.models import (
    Job,
)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "table", "status", "stage", "done", "total", "created_at"]
    list_filter = ["kind", "status"]
