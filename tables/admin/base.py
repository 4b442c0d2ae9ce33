"""What the admin modules share: a read-only admin, the audit trail inline, and the admin actions
that decide several requests at once through their use case (restores, pin removals)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

from tables.services.errors import ServiceError


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


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
