"""A storage credential: the options of one object-store location prefix. Plain options
(region, endpoint, account name) are stored as they are; secret ones (keys, tokens, service
account JSON) only encrypted, with their names beside them so that the admin can say which are
set without decrypting anything."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from credentials import crypto


class StorageCredential(models.Model):
    prefix = models.CharField(
        max_length=1024,
        unique=True,
        help_text="an object-store location prefix: s3://bucket/prefix, abfss://container@account/prefix, gs://bucket",
    )
    description = models.CharField(max_length=200, blank=True)
    options = models.JSONField(default=dict, blank=True, help_text="options that are not secrets")
    secret_names = models.JSONField(default=list, blank=True, editable=False)
    secrets_token = models.TextField(blank=True, default="", editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, editable=False, related_name="+"
    )

    class Meta:
        ordering = ["prefix"]

    def __str__(self) -> str:
        return self.prefix

    def __repr__(self) -> str:  # the secrets never appear, not even encrypted
        return f"StorageCredential({self.prefix!r})"

    def secrets(self) -> dict[str, str]:
        """The decrypted secret options (CredentialsKeyError when the key does not open them)."""
        return crypto.decrypt(self.secrets_token)

    def set_secrets(self, secrets: dict[str, str]) -> None:
        """Replace the secret options (encrypted now; CredentialsKeyError without a usable key)."""
        clean = {k: v for k, v in secrets.items() if v}
        self.secrets_token = crypto.encrypt(clean)
        self.secret_names = sorted(clean)

    def storage_options(self) -> dict[str, str]:
        """Plain and secret options together, as the storage layer takes them."""
        return {**{k: str(v) for k, v in self.options.items()}, **self.secrets()}
