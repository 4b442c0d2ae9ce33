"""Delta Sharing: shares, their tables' windows, recipients and their tokens."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from tables.admin.base import ReadOnlyAdmin
from tables.models import (
    Recipient,
    RecipientQuery,
    Share,
    SharedTable,
)
from tables.services.sharing import recipients as sharing_recipients


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
class RecipientQueryAdmin(ReadOnlyAdmin):
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
