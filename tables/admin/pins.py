"""Pins: removals before expiry, decided by an approver, on the pin's own page (Approve and
Reject buttons with a comment) or several at once (list actions), through the same use cases
as the pages and the API (approve_unpin / reject_unpin): approvers or staff, never on a removal
they asked for. Pins are never added, edited or deleted here; their events are the audit trail."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from tables.admin.approvals import ApprovalAdmin
from tables.admin.base import AuditTrailInline
from tables.models import (
    Pin,
    PinEvent,
    PinState,
)
from tables.services.pins import lifecycle as pin_services
from tables.services.pins.lifecycle import approve_unpin, reject_unpin


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
class PinAdmin(ApprovalAdmin, admin.ModelAdmin):
    """Pins, their removals awaiting an approver, and each pin's audit trail."""

    decide = (approve_unpin, reject_unpin)
    missing = "pin"
    decided = ("Pin #{pk} removed; its kept files are deleted.", "Pin #{pk} kept; the removal is rejected.")
    done_words = ("removed", "kept")
    titles = ("Approve pin removals", "Reject pin removals")
    action_names = ("approve_removal", "reject_removal")
    bulk_related = ("table", "removal_requested_by")
    bulk_template = "admin/tables/pin/bulk_decision.html"
    change_form_template = "admin/tables/pin/change_form.html"

    list_display = ["id", "name", "table", "version", "state", "expires_at", "held", "created_at"]
    list_filter = [PinStateFilter, "table"]
    list_select_related = ["table"]
    search_fields = ["name", "reason", "table__name"]
    inlines = [PinEventInline]
    actions = ["approve_removal", "reject_removal"]
    fields = readonly_fields = [
        "table_link", "version", "name", "reason", "expires_at", "state", "held", "files", "bytes",
        "bytes_copied", "requester", "removal_reason", "decision", "created_at", "decided_at", "error",
    ]  # fmt: skip

    def has_add_permission(self, request) -> bool:
        return False  # pins are made from the version page, the API or `manage.py pin`

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # the audit trail stays

    def save_model(self, request, obj, form, change) -> None:
        """Nothing is edited here ("change" permission is for the decisions)."""

    # the table links to the app's page and users are plain text: approvers have no
    # permission on tables' or users' admin pages

    @admin.display(description="table", ordering="table__name")
    def table_link(self, obj: Pin) -> str:
        url = reverse("tables:version_detail", args=[obj.table.slug, obj.version])
        return format_html('<a href="{}">{} at version {}</a>', url, obj.table, obj.version)

    @admin.display(description="held by")
    def held(self, obj: Pin) -> str:
        return pin_services.held_by(obj)

    @admin.display(description="removal asked by")
    def requester(self, obj: Pin) -> str:
        return obj.removal_requested_by.get_username() if obj.removal_requested_by else "—"

    @admin.display(description="approver's decision")
    def decision(self, obj: Pin) -> str:
        last = pin_services.decisions([obj.pk]).get(obj.pk)
        return f"{last['by']}: {last['note']}" if last else "—"

    # --- approve / reject: buttons on the change page (ApprovalAdmin) and bulk actions -------

    def awaiting(self, obj: Pin) -> bool:
        return obj.state == PinState.UNPIN_REQUESTED

    def requester_id(self, obj: Pin) -> int | None:
        return obj.removal_requested_by_id

    def ui_url(self, obj: Pin) -> str:
        return reverse("tables:version_detail", args=[obj.table.slug, obj.version]) + "#pins"

    @admin.action(description="Approve the removal of the selected pins…", permissions=["change"])
    def approve_removal(self, request, queryset):
        return self._bulk(request, queryset, approve=True)

    @admin.action(description="Reject the removal of the selected pins…", permissions=["change"])
    def reject_removal(self, request, queryset):
        return self._bulk(request, queryset, approve=False)
