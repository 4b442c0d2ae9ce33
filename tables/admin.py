"""Admin console: restore approvals, pin removals and table management.

Approvals go through the same use cases as the UI and the API (approve_restore /
reject_restore of tables.services.restores.requests), so the server's rules hold here too: approvers (or staff) only, never on
their own request, only pending or stale requests. Restore requests are never added, edited
or deleted here; their events are the audit trail.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from tables.delta.restore.rules import protocol_outcome_words
from tables.models import (
    Anomaly,
    Commit,
    Job,
    ManagedTable,
    OwnerRefusal,
    Pin,
    PinEvent,
    PinState,
    RatifiedCommit,
    Recipient,
    RecipientQuery,
    RestoreEvent,
    RestoreRequest,
    RestoreStatus,
    Share,
    SharedTable,
    SsoIdentity,
    Table,
)
from tables.services.access import roles
from tables.services.errors import ServiceError
from tables.services.pins import approve_unpin, reject_unpin
from tables.services.registration import validate_location
from tables.services.restores.requests import RESTORE_WARNING, approve_restore, reject_restore
from tables.services.sharing import recipients as sharing_recipients
from tables.services.sync.store import start_sync
from tables.web import pages


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


# --- managed commits: read-only views of the owner state (changes go through the services) ---


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ManagedTable)
class ManagedTableAdmin(_ReadOnly):
    list_display = ["table", "state", "latest_version", "backfilled_version", "frozen", "owner_table_id"]
    list_filter = ["state", "frozen"]


@admin.register(RatifiedCommit)
class RatifiedCommitAdmin(_ReadOnly):
    list_display = ["table", "version", "backfilled", "operation", "txn_id", "created_at"]
    list_filter = ["table", "backfilled"]


@admin.register(OwnerRefusal)
class OwnerRefusalAdmin(_ReadOnly):
    list_display = ["table", "version", "code", "operation", "reason", "at"]
    list_filter = ["table", "code"]


# --- single sign-on identities: linking one to a local account is an administrator's act ---


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """Where an administrator links a provider identity (issuer + subject, as the provider's
    ID tokens name them) to an existing local account, or unlinks one. Superusers only: a
    link is a way into the account, and approvers work in this console too."""

    list_display = ["user", "subject", "issuer", "created", "linked_at"]
    search_fields = ["user__username", "subject"]
    raw_id_fields = ["user"]
    readonly_fields = ["created", "linked_at"]

    def _superuser(self, request) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_module_permission(self, request) -> bool:
        return self._superuser(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return self._superuser(request)

    def has_add_permission(self, request) -> bool:
        return self._superuser(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return self._superuser(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._superuser(request)

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            obj.created = False  # linked by hand: the account stays the local one it was
        obj.issuer = obj.issuer.strip().rstrip("/")
        super().save_model(request, obj, form, change)


# --- restore approvals -------------------------------------------------------------------


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


class AuditTrailInline(admin.TabularInline):
    """A request's audit trail (restores, pin removals), read-only: who moved it from which
    state to which, when, and why. A subclass names its model, its fields, what an event
    without a user was done by, and the permission that lets one view it."""

    extra = 0
    can_delete = False
    verbose_name = "event"
    verbose_name_plural = "audit trail"
    nobody = "worker"  # an event without a user: done by the app itself
    view_permission = ""

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("actor")

    @admin.display(description="actor")
    def who(self, obj) -> str:
        # plain text: the user's admin page is a 403 for approvers (no permission on users)
        return obj.actor.get_username() if obj.actor else self.nobody

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm(self.view_permission) or super().has_view_permission(request, obj)


class RestoreEventInline(AuditTrailInline):
    model = RestoreEvent
    fields = readonly_fields = ["at", "who", "from_status", "to_status", "note"]
    view_permission = "tables.view_restorerequest"


class DecisionForm(forms.Form):
    comment = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}))


class BulkDecision:
    """The admin actions that decide several requests at once (restores, pin removals): an
    intermediate page asks for the comment; then each goes through the service, and the ones
    it refuses are listed with why. A subclass names its service calls, words and page."""

    decide: tuple[Any, Any]  # (approve, reject): service functions (obj, user, comment)
    done_words: tuple[str, str]  # what the approved and the rejected ones became
    titles: tuple[str, str]
    action_names: tuple[str, str]
    bulk_related: tuple[str, ...]  # what the page lists of each
    bulk_template: str

    def bulk_context(self) -> dict[str, Any]:
        return {}

    def _bulk(self, request, queryset, approve: bool):
        form = DecisionForm(request.POST if "apply" in request.POST else None)
        which = 0 if approve else 1
        if form.is_bound and form.is_valid():
            done, refused = [], []
            for obj in queryset.select_related("table"):
                try:
                    self.decide[which](obj, request.user, form.cleaned_data["comment"])
                    done.append(f"#{obj.pk}")
                except ServiceError as exc:
                    refused.append(f"#{obj.pk}: {exc.message}")
            if done:
                messages.success(request, f"{', '.join(done)} {self.done_words[which]}.")
            for text in refused:
                messages.error(request, text)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": self.titles[which],
            "approve": approve,
            "queryset": queryset.select_related(*self.bulk_related),
            "form": form,
            "action": self.action_names[which],
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "opts": self.model._meta,
            "media": self.media,
            **self.bulk_context(),
        }
        return TemplateResponse(request, self.bulk_template, context)


@admin.register(RestoreRequest)
class RestoreRequestAdmin(BulkDecision, admin.ModelAdmin):
    decide = (approve_restore, reject_restore)
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
        view = pages.restore_view(obj.plan)
        return render_to_string("admin/tables/restorerequest/plan.html", {"plan": view, "req": obj})

    # --- approve / reject: buttons on the change page and bulk actions ---------------------

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/approve/", view(self.approve_view), name="tables_restorerequest_approve"),
            path("<path:object_id>/reject/", view(self.reject_view), name="tables_restorerequest_reject"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        extra = {
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            "show_delete": False,
            "decision_form": DecisionForm(),
            "restore_warning": RESTORE_WARNING,
        }
        if obj is not None:
            own = obj.requested_by_id == request.user.pk
            extra["can_decide"] = obj.awaiting_approval and roles.can_approve(request.user) and not own
            extra["own_request"] = obj.awaiting_approval and own
            extra["fingerprint"] = obj.plan_fingerprint
            extra["ui_url"] = reverse("tables:restore_detail", args=[obj.pk])
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})

    def _decide(self, request, object_id: str, approve: bool):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404(f"There is no restore request {object_id}.")
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        form = DecisionForm(request.POST)
        comment = form.cleaned_data["comment"] if form.is_valid() else ""
        try:
            if approve:
                approve_restore(obj, request.user, comment, request.POST.get("fingerprint") or None)
                messages.success(request, f"Restore #{obj.pk} approved; it is queued for a worker.")
            else:
                reject_restore(obj, request.user, comment)
                messages.success(request, f"Restore #{obj.pk} rejected.")
        except ServiceError as exc:
            messages.error(request, exc.message)
        return HttpResponseRedirect(reverse("admin:tables_restorerequest_change", args=[obj.pk]))

    def approve_view(self, request, object_id: str):
        return self._decide(request, object_id, approve=True)

    def reject_view(self, request, object_id: str):
        return self._decide(request, object_id, approve=False)

    @admin.action(description="Approve the selected restore requests…", permissions=["change"])
    def approve_selected(self, request, queryset):
        return self._bulk(request, queryset, approve=True)

    @admin.action(description="Reject the selected restore requests…", permissions=["change"])
    def reject_selected(self, request, queryset):
        return self._bulk(request, queryset, approve=False)

    def bulk_context(self) -> dict[str, Any]:
        return {"restore_warning": RESTORE_WARNING}


# --- pins: removals before expiry, decided by an approver --------------------------------------


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


# --- Delta Sharing: shares, their tables' windows, recipients and their tokens ----------------


class SharedTableInline(admin.TabularInline):
    model = SharedTable
    extra = 1
    fields = ["schema", "name", "table", "first_version", "last_version", "change_data"]
    autocomplete_fields = ["table"]


@admin.register(Share)
class ShareAdmin(admin.ModelAdmin):
    list_display = ["name", "comment", "created_at"]
    search_fields = ["name"]
    inlines = [SharedTableInline]


@admin.register(Recipient)
class RecipientAdmin(admin.ModelAdmin):
    """A recipient's token is issued here (shown once, with its profile file) and revoked here;
    the form edits only its name, shares and expiry."""

    list_display = ["name", "token_hint", "expires_at", "revoked_at", "created_at"]
    fields = ["name", "shares", "expires_at", "token_hint", "revoked_at"]
    readonly_fields = ["token_hint", "revoked_at"]
    filter_horizontal = ["shares"]
    actions = ["issue_token", "revoke_tokens"]

    @admin.action(description="Issue a new token (shown once) and its profile file")
    def issue_token(self, request, queryset) -> TemplateResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Choose exactly one recipient to issue a token for.", messages.ERROR)
            return None
        import base64
        import json

        recipient = queryset.get()
        token = sharing_recipients.issue_token(recipient)
        endpoint = getattr(settings, "DELTAWEB_SHARING_URL", "") or request.build_absolute_uri("/delta-sharing/")
        profile = json.dumps(sharing_recipients.profile(recipient, token, endpoint), indent=2)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "recipient": recipient,
            "title": f"Token for {recipient.name}",
            "profile_json": profile,
            "profile_b64": base64.b64encode(profile.encode()).decode(),
            "filename": f"{recipient.name}.share",
        }
        response = TemplateResponse(request, "admin/tables/recipient/token.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke the selected recipients' tokens")
    def revoke_tokens(self, request, queryset) -> None:
        for recipient in queryset:
            sharing_recipients.revoke(recipient)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")


@admin.register(RecipientQuery)
class RecipientQueryAdmin(_ReadOnly):
    list_display = [
        "at",
        "recipient",
        "shared_as",
        "kind",
        "version",
        "start_version",
        "end_version",
        "files",
        "refused",
    ]
    list_filter = ["kind"]
