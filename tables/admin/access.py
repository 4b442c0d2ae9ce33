"""Single sign-on identities: linking one to a local account is an administrator's act."""

from __future__ import annotations

from django.contrib import admin

from tables.models import (
    SsoIdentity,
)


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
