"""Sign-in state of the database's own: API tokens' expiry and single sign-on identities."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TokenExpiry(models.Model):
    """When an API token (DRF's, one per user) stops working; None: never (tokens made before
    expiry existed). Issued, rotated and revoked by tables.services.access.api_tokens."""

    token = models.OneToOneField(
        "authtoken.Token", primary_key=True, on_delete=models.CASCADE, related_name="expiry", db_column="token_key"
    )
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "token expiries"


class SsoIdentity(models.Model):
    """A single sign-on identity (the provider's issuer and its `sub`, OpenID Connect's only
    stable key for a person) and the account it signs in to. Names and e-mails are the
    provider's to change, so none of them ever picks an account: an identity reaches an
    account that sign-on created itself (`created`), or one an administrator linked here on
    purpose (`created` false: a local account whose flags and password the provider never
    touches)."""

    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities")
    created = models.BooleanField(default=True, help_text="the account was made by single sign-on")
    linked_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_once")]
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer} -> {self.user}"
