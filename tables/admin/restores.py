"""Restore approvals: through the same use cases as the UI and the API (approve_restore /
reject_restore of tables.services.restores.requests), so the server's rules hold here too:
approvers (or staff) only, never on their own request, only pending or stale requests. Restore
requests are never added, edited or deleted here; their events are the audit trail."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.template.defaultfilters import filesizeformat
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from tables.admin.approvals import ApprovalAdmin
from tables.admin.base import AuditTrailInline
from tables.delta.restore.rules import protocol_outcome_words
from tables.models import (
    RestoreEvent,
    RestoreRequest,
    RestoreStatus,
)
from tables.services.restores.requests import RESTORE_WARNING, approve_restore, reject_restore
from tables.web.approvals.restore_plan import restore_view


class DecisionFilter(admin.SimpleListFilter):
    """Status, defaulting to the requests that wait for a decision (pending or stale)."""

    title = "status"
    parameter_name = "status"
    DEFAULT = "awaiting"

    def lookups(self, request, model_admin):
        return [(self.DEFAULT, "Awaiting approval (pending or stale)"), *RestoreStatus.choices, ("all", "All")]

    def choices(self, changelist):
        current = self.value() or self.DEFAULT
        for value, title in self.lookup_choices:
            yield {
                "selected": current == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": title,
            }

    def queryset(self, request, queryset):
        value = self.value() or self.DEFAULT
        if value == self.DEFAULT:
            return queryset.filter(status__in=RestoreStatus.awaiting_approval())
        if value in RestoreStatus.values:
            return queryset.filter(status=value)
        return queryset


class RestoreEventInline(AuditTrailInline):
    model = RestoreEvent
    fields = readonly_fields = ["at", "who", "from_status", "to_status", "note"]
    view_permission = "tables.view_restorerequest"


@admin.register(RestoreRequest)
class RestoreRequestAdmin(ApprovalAdmin, admin.ModelAdmin):
    decide = (approve_restore, reject_restore)
    missing = "restore request"
    decided = ("Restore #{pk} approved; it is queued for a worker.", "Restore #{pk} rejected.")
    done_words = ("approved and queued", "rejected")
    titles = ("Approve restore requests", "Reject restore requests")
    action_names = ("approve_selected", "reject_selected")
    bulk_related = ("table", "requested_by")
    bulk_template = "admin/tables/restorerequest/bulk_decision.html"
    list_display = ["id", "table", "target", "requested_by", "status", "files_summary", "protocol", "created_at"]
    list_display_links = ["id", "table"]
    list_filter = [DecisionFilter, "table"]
    list_select_related = ["table", "requested_by"]
    search_fields = ["reason", "table__name", "requested_by__username"]
    ordering = ["-created_at"]
    inlines = [RestoreEventInline]
    actions = ["approve_selected", "reject_selected"]
    change_form_template = "admin/tables/restorerequest/change_form.html"
    fieldsets = [
        (None, {"fields": ["table_link", "target", "reason", "options", "requester", "created_at", "status"]}),
        ("Plan", {"fields": ["plan_summary", "plan_head_version", "plan_fingerprint"]}),
        ("Decision", {"fields": ["decided_by", "approver_comment", "decided_at"]}),
        ("Run", {"fields": ["stage", "progress", "attempts", "started_at", "finished_at", "result_version", "error"]}),
    ]
    readonly_fields = [f for _name, opts in fieldsets for f in opts["fields"]]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("result", "verification")

    def has_add_permission(self, request) -> bool:
        return False  # requests are made with their plan, by the UI or the API

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # the audit trail stays

    def save_model(self, request, obj, form, change) -> None:
        """Nothing is edited here ("change" permission is for the decisions): never write a
        whole row loaded earlier over what a worker wrote meanwhile."""

    # --- columns and read-only fields ---------------------------------------------------
    # The table and the users are not shown as the admin's own links: approvers have no
    # permission on tables' or users' admin pages, and would land on a 403. The table links to
    # the app's table page (every approver may browse it); the users are plain text.

    @admin.display(description="table", ordering="table__name")
    def table_link(self, obj: RestoreRequest) -> str:
        return format_html('<a href="{}">{}</a>', reverse("tables:table_detail", args=[obj.table.slug]), obj.table)

    @admin.display(description="requested by", ordering="requested_by__username")
    def requester(self, obj: RestoreRequest) -> str:
        return obj.requested_by.get_username() if obj.requested_by else "—"

    @admin.display(description="approver")
    def decided_by(self, obj: RestoreRequest) -> str:
        return obj.approver.get_username() if obj.approver else "—"

    @admin.display(description="target", ordering="resolved_version")
    def target(self, obj: RestoreRequest) -> str:
        text = f"version {obj.resolved_version}"
        return f"{text} (as of {obj.target_timestamp})" if obj.target_timestamp else text

    @admin.display(description="files to add / remove")
    def files_summary(self, obj: RestoreRequest) -> str:
        plan, metrics = obj.plan or {}, (obj.plan or {}).get("metrics") or {}
        return (
            f"+{plan.get('numFilesToAdd', '?')} ({filesizeformat(int(metrics.get('restoredFilesSize', 0)))}) / "
            f"−{plan.get('numFilesToRemove', '?')} ({filesizeformat(int(metrics.get('removedFilesSize', 0)))})"
        )

    @admin.display(description="protocol")
    def protocol(self, obj: RestoreRequest) -> str:
        return protocol_outcome_words((obj.plan or {}).get("protocolOutcome"))

    @admin.display(description="options")
    def options(self, obj: RestoreRequest) -> str:
        chosen = [
            label
            for on, label in (
                (obj.ignore_missing_files, "ignore missing files"),
                (obj.allow_protocol_downgrade, "allow a protocol downgrade"),
            )
            if on
        ]
        return ", ".join(chosen) or "none"

    @admin.display(description="progress")
    def progress(self, obj: RestoreRequest) -> str:
        return f"{obj.done}/{obj.total}" if obj.total else "—"

    @admin.display(description="plan")
    def plan_summary(self, obj: RestoreRequest) -> str:
        view = restore_view(obj.plan)
        return render_to_string("admin/tables/restorerequest/plan.html", {"plan": view, "req": obj})

    # --- approve / reject: buttons on the change page (ApprovalAdmin) and bulk actions -------

    def awaiting(self, obj: RestoreRequest) -> bool:
        return obj.awaiting_approval

    def requester_id(self, obj: RestoreRequest) -> int | None:
        return obj.requested_by_id

    def ui_url(self, obj: RestoreRequest) -> str:
        return reverse("tables:restore_detail", args=[obj.pk])

    def decision_context(self, obj: RestoreRequest | None) -> dict[str, Any]:
        extra: dict[str, Any] = {"restore_warning": RESTORE_WARNING}
        if obj is not None:
            extra["fingerprint"] = obj.plan_fingerprint
        return extra

    def decision_kwargs(self, request, approve: bool) -> dict[str, Any]:
        # the approver approves the plan they saw: a plan changed since is refused
        return {"fingerprint": request.POST.get("fingerprint") or None} if approve else {}

    @admin.action(description="Approve the selected restore requests…", permissions=["change"])
    def approve_selected(self, request, queryset):
        return self._bulk(request, queryset, approve=True)

    @admin.action(description="Reject the selected restore requests…", permissions=["change"])
    def reject_selected(self, request, queryset):
        return self._bulk(request, queryset, approve=False)

    def bulk_context(self) -> dict[str, Any]:
        return {"restore_warning": RESTORE_WARNING}
