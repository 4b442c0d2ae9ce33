"""Alerts: rule settings per table, user rules, the alerts they fire, who hears about them
(subscriptions, webhook endpoints) and how each delivery went.

Alerts, deliveries and subscriptions are the database's own records (not a cache of the log):
an alert stays when its commit row is rebuilt, so it keeps the version and operation it fired on.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tables.models import Commit, Table


class Severity(models.TextChoices):
    INFO = "info", "info"
    WARNING = "warning", "warning"
    CRITICAL = "critical", "critical"

    @classmethod
    def rank(cls, value: str) -> int:
        return {cls.INFO: 0, cls.WARNING: 1, cls.CRITICAL: 2}.get(value, 0)

    @classmethod
    def at_least(cls, value: str) -> list[str]:
        """The severities as high as `value` or higher."""
        return [s for s in cls.values if cls.rank(s) >= cls.rank(value)]


class RuleSetting(models.Model):
    """A built-in rule switched off, or given another threshold or severity, on one table.
    Without a row a built-in rule runs with its defaults (alerts.detect.rules.BUILTIN)."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="alert_rule_settings")
    rule = models.CharField(max_length=64)
    enabled = models.BooleanField(default=True)
    threshold = models.FloatField(null=True, blank=True, help_text="percent, or a factor of the usual interval")
    severity = models.CharField(max_length=16, choices=Severity.choices, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["table", "rule"], name="alerts_unique_rule_setting")]


class MetricOp(models.TextChoices):
    GT = "gt", ">"
    GE = "ge", ">="
    LT = "lt", "<"
    LE = "le", "<="
    EQ = "eq", "="


class CustomRule(models.Model):
    """A user's rule: every condition given must hold (operation, user, one metric against a
    threshold, a partition touched). On one table, or on every table when `table` is empty."""

    name = models.CharField(max_length=200)
    table = models.ForeignKey(Table, null=True, blank=True, on_delete=models.CASCADE, related_name="alert_rules")
    severity = models.CharField(max_length=16, choices=Severity.choices, default=Severity.WARNING)
    enabled = models.BooleanField(default=True)
    operation = models.CharField(max_length=200, blank=True, help_text="e.g. MERGE (case-insensitive)")
    user = models.CharField(max_length=500, blank=True, help_text="commitInfo userName or userId")
    metric = models.CharField(max_length=200, blank=True, help_text="an operationMetrics key, e.g. numDeletedRows")
    metric_op = models.CharField(max_length=2, choices=MetricOp.choices, blank=True)
    metric_value = models.FloatField(null=True, blank=True)
    partition = models.CharField(max_length=500, blank=True, help_text="key=value; a file of it added or removed")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class Alert(models.Model):
    """One firing of one rule on one commit."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="alerts")
    commit = models.ForeignKey(Commit, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts")
    version = models.BigIntegerField()
    operation = models.CharField(max_length=200, blank=True)
    rule = models.CharField(max_length=64, help_text="a built-in rule's key, or custom:<id>")
    rule_name = models.CharField(max_length=200)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    explanation = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["table", "version", "rule"], name="alerts_unique_alert_per_commit_rule")
        ]

    def __str__(self) -> str:
        return f"{self.table_id}@{self.version} {self.rule}"


class ScanStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class Scan(models.Model):
    """Rules to evaluate on a run of newly stored commits: a row first, enqueued on commit."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="alert_scans")
    first_version = models.BigIntegerField()
    last_version = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=ScanStatus.choices, default=ScanStatus.QUEUED)
    alerts = models.IntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="when a worker took it")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]


class WebhookEndpoint(models.Model):
    """Where a user's webhook deliveries go; the secret signs them and is shown once, at creation."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_endpoints")
    name = models.CharField(max_length=200)
    url = models.URLField(max_length=2000)
    secret = models.CharField(max_length=200, editable=False)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class Channel(models.TextChoices):
    WEBHOOK = "webhook", "webhook"
    EMAIL = "email", "e-mail"
    IN_APP = "in_app", "in-app"


class Subscription(models.Model):
    """A user hears about alerts of one table (or all) at or above a severity, on one channel."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alert_subscriptions")
    table = models.ForeignKey(Table, null=True, blank=True, on_delete=models.CASCADE, related_name="subscriptions")
    channel = models.CharField(max_length=16, choices=Channel.choices)
    endpoint = models.ForeignKey(
        WebhookEndpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="subscriptions"
    )
    min_severity = models.CharField(max_length=16, choices=Severity.choices, default=Severity.WARNING)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "pending"
    SENDING = "sending", "sending"
    RETRYING = "retrying", "waiting to retry"
    DELIVERED = "delivered", "delivered"
    FAILED = "failed", "failed"


class Delivery(models.Model):
    """One alert to one subscriber on one channel: a row first, sent by a worker, retried with
    backoff; its attempts are the delivery log. `key` is the idempotency key receivers see."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    subscription = models.ForeignKey(Subscription, null=True, on_delete=models.SET_NULL, related_name="deliveries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alert_deliveries")
    channel = models.CharField(max_length=16, choices=Channel.choices)
    endpoint = models.ForeignKey(
        WebhookEndpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_status_code = models.IntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    retry_since = models.DateTimeField(default=timezone.now, help_text="the retry window starts here")
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["alert", "subscription"], name="alerts_unique_delivery_per_subscription")
        ]


class DeliveryAttempt(models.Model):
    """The delivery log: one row per try, with the receiver's status code or the error."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempts_log")
    number = models.IntegerField()
    at = models.DateTimeField(auto_now_add=True)
    status_code = models.IntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    manual = models.BooleanField(default=False, help_text="a redelivery someone asked for")

    class Meta:
        ordering = ["delivery", "number"]


class Notification(models.Model):
    """An in-app notification: the alert, for one user, until read."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="notifications")
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["user", "alert"], name="alerts_unique_notification")]
