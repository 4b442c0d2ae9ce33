"""Pins: removals before expiry, decided by an approver."""

from __future__ import annotations

from django.contrib import admin

from tables.admin.base import AuditTrailInline, BulkDecision
from tables.models import (
    Pin,
    PinEvent,
    PinState,
)
from tables.services.pins import approve_unpin, reject_unpin


class PinEventInline(AuditTrailInline):
    model = PinEvent
    fields = readonly_fields = ["at", "who", "from_state", "to_state", "note"]
    nobody = "expiry"
    view_permission = "tables.view_pin"


class PinStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return PinState.choices

    def queryset(self, request, queryset):
        return queryset.filter(state=self.value()) if self.value() in PinState.values else queryset


@admin.register(Pin)
class PinAdmin(BulkDecision, admin.ModelAdmin):
    """Pins, their removals awaiting an approver (the same service as the pages and the API:
    approvers or staff, never on a removal they asked for), and each pin's audit trail."""

    decide = (approve_unpin, reject_unpin)
    done_words = ("removed", "kept")
    titles = ("Approve pin removals", "Reject pin removals")
    action_names = ("approve_removal", "reject_removal")
    bulk_related = ("table", "removal_requested_by")
    bulk_template = "admin/tables/pin/bulk_decision.html"

    list_display = ["id", "name", "table", "version", "state", "expires_at", "protection", "created_at"]
    list_filter = [PinStateFilter, "table"]
    list_select_related = ["table"]
    search_fields = ["name", "reason", "table__name"]
    inlines = [PinEventInline]
    actions = ["approve_removal", "reject_removal"]
    fields = readonly_fields = [
        "table", "version", "name", "reason", "expires_at", "state", "protection", "files", "bytes",
        "bytes_copied", "removal_reason", "created_at", "decided_at", "error",
    ]  # fmt: skip

    def has_add_permission(self, request) -> bool:
        return False  # pins are made from the version page, the API or `manage.py pin`

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # the audit trail stays

    def save_model(self, request, obj, form, change) -> None:
        """Nothing is edited here ("change" permission is for the decisions)."""

    @admin.action(description="Approve the removal of the selected pins…", permissions=["change"])
    def approve_removal(self, request, queryset):
        return self._bulk(request, queryset, approve=True)

    @admin.action(description="Reject the removal of the selected pins…", permissions=["change"])
    def reject_removal(self, request, queryset):
        return self._bulk(request, queryset, approve=False)
