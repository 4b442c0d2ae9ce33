"""Registered tables: adding one checks its location as registering does; a sync started from the
list."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from tables.models import (
    Table,
)
from tables.services.catalog.registration import validate_location
from tables.services.errors import ServiceError
from tables.services.sync.store import start_sync


class TableAdminForm(forms.ModelForm):
    class Meta:
        model = Table
        fields = ["name", "location", "description"]

    def clean_location(self) -> str:
        try:
            return validate_location(self.cleaned_data["location"])
        except ServiceError as exc:
            raise forms.ValidationError(exc.message) from exc


@admin.register(Table)
class TableAdmin(admin.ModelAdmin):
    form = TableAdminForm
    list_display = ["name", "location", "sync_state", "last_synced_version", "last_synced_at", "num_files"]
    search_fields = ["name", "location"]
    readonly_fields = ["sync_state", "last_synced_version", "last_synced_at", "last_error"]
    actions = ["sync_now"]

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        """A registered table's location is read-only: changing it here would bypass the
        registration checks and keep the old location's cached history; register the table
        again instead (the add form checks the location as registration does)."""
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "location"] if obj is not None else fields

    def save_model(self, request, obj, form, change) -> None:
        from django.utils.text import slugify

        obj.slug = obj.slug or slugify(obj.name)[:200]
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    @admin.action(description="Sync selected tables now")
    def sync_now(self, request, queryset) -> None:
        for table in queryset:
            start_sync(table, request.user)
        messages.info(request, f"Queued a sync of {queryset.count()} table(s).")
