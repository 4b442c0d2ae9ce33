"""Admin console: table management (restore approvals arrive with the RESTORE work)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from . import services
from .models import Anomaly, Commit, Job, Table


class TableAdminForm(forms.ModelForm):
    class Meta:
        model = Table
        fields = ["name", "location", "description"]

    def clean_location(self) -> str:
        try:
            return services.validate_location(self.cleaned_data["location"])
        except services.ServiceError as exc:
            raise forms.ValidationError(exc.message) from exc


@admin.register(Table)
class TableAdmin(admin.ModelAdmin):
    form = TableAdminForm
    list_display = ["name", "location", "sync_state", "last_synced_version", "last_synced_at", "num_files"]
    search_fields = ["name", "location"]
    readonly_fields = ["sync_state", "last_synced_version", "last_synced_at", "last_error"]
    actions = ["sync_now"]

    def save_model(self, request, obj, form, change) -> None:
        from django.utils.text import slugify

        obj.slug = obj.slug or slugify(obj.name)[:200]
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    @admin.action(description="Sync selected tables now")
    def sync_now(self, request, queryset) -> None:
        for table in queryset:
            services.start_sync(table, request.user)
        messages.info(request, f"Queued a sync of {queryset.count()} table(s).")


@admin.register(Commit)
class CommitAdmin(admin.ModelAdmin):
    list_display = ["table", "version", "timestamp", "timestamp_source", "operation"]
    list_filter = ["table", "operation", "timestamp_source"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "table", "status", "stage", "done", "total", "created_at"]
    list_filter = ["kind", "status"]


@admin.register(Anomaly)
class AnomalyAdmin(admin.ModelAdmin):
    list_display = ["table", "version", "kind", "detail"]
    list_filter = ["kind"]
