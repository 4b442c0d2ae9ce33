"""Delta Sharing: shares of tables (each with a window of its history), recipients and what they
asked. The protocol is served under /delta-sharing/ (tables.api.sharing)."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models

from tables.models.catalog import Table

# -- Delta Sharing: shares of tables (each with a window of its history), recipients and what
# they asked. The protocol is served under /delta-sharing/ (tables.api.sharing).

SHARING_NAME = RegexValidator(
    r"^[^\s/.\x00-\x1f\x7f]{1,255}$",
    "a sharing name: at most 255 characters, no space, '/', '.' or control character",
)


class Share(models.Model):
    """A named set of tables a recipient may read (the protocol's share)."""

    name = models.CharField(max_length=255, unique=True, validators=[SHARING_NAME])
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SharedTable(models.Model):
    """A registered table in a share, under a schema and a name of its own, with the window of
    its history recipients may read (first..last version; none: all) and whether its change data
    is shared."""

    share = models.ForeignKey(Share, on_delete=models.CASCADE, related_name="tables")
    schema = models.CharField(max_length=255, default="default", validators=[SHARING_NAME])
    name = models.CharField(max_length=255, validators=[SHARING_NAME])
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="shared_as")
    first_version = models.BigIntegerField(null=True, blank=True, help_text="the earliest version shared")
    last_version = models.BigIntegerField(
        null=True, blank=True, help_text="the latest version shared (recipients see it as the table's latest)"
    )
    change_data = models.BooleanField(default=False, help_text="recipients may read the change data feed")

    class Meta:
        ordering = ["share", "schema", "name"]
        constraints = [models.UniqueConstraint(fields=["share", "schema", "name"], name="shared_table_once")]

    def __str__(self) -> str:
        return f"{self.share.name}.{self.schema}.{self.name}"


class Recipient(models.Model):
    """Who reads shares, by a bearer token: only its SHA-256 is stored, the token is shown once."""

    name = models.CharField(max_length=200, unique=True)
    shares = models.ManyToManyField(Share, related_name="recipients", blank=True)
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False)
    token_hint = models.CharField(max_length=8, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RecipientQuery(models.Model):
    """One request of a recipient on a shared table: what it asked, which versions it was
    answered and how many files (and bytes) it was served."""

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="queries")
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="recipient_queries")
    shared_as = models.CharField(max_length=800)
    kind = models.CharField(max_length=16)  # version | metadata | query | changes
    version = models.BigIntegerField(null=True, blank=True, help_text="the version read (a query's)")
    start_version = models.BigIntegerField(null=True, blank=True)
    end_version = models.BigIntegerField(null=True, blank=True)
    files = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    refused = models.CharField(max_length=64, blank=True, help_text="the error code when refused")
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name_plural = "recipient queries"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["table", "-at"])]
