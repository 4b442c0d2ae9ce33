"""API shapes of the alerts app (camelCase, as the rest of the API): what the views return
and what they accept. Secrets are write-never: an endpoint's secret appears only in the
answer to its creation (WebhookCreatedSerializer)."""

from __future__ import annotations

from rest_framework import serializers

from alerts.models import (
    Alert,
    Channel,
    CustomRule,
    Delivery,
    DeliveryAttempt,
    MetricOp,
    Notification,
    Severity,
    Subscription,
    WebhookEndpoint,
)
from tables.services.catalog.lookup import INT64_MAX


class AlertSerializer(serializers.ModelSerializer):
    table = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    ruleName = serializers.CharField(source="rule_name")
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = Alert
        fields = ["id", "table", "version", "operation", "rule", "ruleName", "severity", "explanation", "createdAt"]


class WebhookSerializer(serializers.ModelSerializer):
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "name", "url", "active", "createdAt"]


class WebhookCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    url = serializers.CharField(max_length=2000, help_text="http:// or https://; internal addresses are refused.")


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(
        read_only=True, help_text="The HMAC-SHA256 signing secret. Shown in this answer only: store it now."
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class SubscriptionSerializer(serializers.ModelSerializer):
    table = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    endpoint = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    minSeverity = serializers.CharField(source="min_severity")

    class Meta:
        model = Subscription
        fields = ["id", "table", "channel", "endpoint", "minSeverity"]


class SubscriptionCreateSerializer(serializers.Serializer):
    table = serializers.CharField(required=False, allow_blank=True, help_text="id or slug; empty = every table")
    channel = serializers.ChoiceField(choices=Channel.choices)
    endpoint = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=INT64_MAX, help_text="your webhook's id (webhook only)"
    )
    minSeverity = serializers.ChoiceField(choices=Severity.choices, default=Severity.WARNING)


class CustomRuleSerializer(serializers.ModelSerializer):
    table = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    metricOp = serializers.ChoiceField(source="metric_op", choices=MetricOp.choices, required=False, allow_blank=True)
    metricValue = serializers.FloatField(source="metric_value", required=False, allow_null=True)

    class Meta:
        model = CustomRule
        fields = [
            "id", "name", "table", "severity", "enabled", "operation", "user", "metric", "metricOp", "metricValue",
            "partition",
        ]  # fmt: skip


class CustomRuleCreateSerializer(CustomRuleSerializer):
    table = serializers.CharField(required=False, allow_blank=True, help_text="id or slug; empty = every table")

    class Meta(CustomRuleSerializer.Meta):
        pass


class RuleSettingSerializer(serializers.Serializer):
    rule = serializers.CharField()
    name = serializers.CharField(read_only=True)
    enabled = serializers.BooleanField()
    severity = serializers.ChoiceField(choices=Severity.choices)
    threshold = serializers.FloatField(allow_null=True)
    thresholdMeans = serializers.CharField(read_only=True)


class RuleSettingUpdateSerializer(serializers.Serializer):
    rule = serializers.CharField()
    enabled = serializers.BooleanField(required=False, allow_null=True)
    severity = serializers.ChoiceField(choices=Severity.choices, required=False)
    threshold = serializers.FloatField(required=False, allow_null=True)


class AttemptSerializer(serializers.ModelSerializer):
    statusCode = serializers.IntegerField(source="status_code", allow_null=True)

    class Meta:
        model = DeliveryAttempt
        fields = ["number", "at", "statusCode", "error", "manual"]


class DeliverySerializer(serializers.ModelSerializer):
    alert = AlertSerializer(read_only=True)
    idempotencyKey = serializers.UUIDField(source="key")
    lastStatusCode = serializers.IntegerField(source="last_status_code", allow_null=True)
    lastError = serializers.CharField(source="last_error")
    nextAttemptAt = serializers.DateTimeField(source="next_attempt_at", allow_null=True)
    deliveredAt = serializers.DateTimeField(source="delivered_at", allow_null=True)
    log = AttemptSerializer(source="attempts_log", many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id", "alert", "channel", "endpoint", "idempotencyKey", "status", "attempts", "lastStatusCode", "lastError",
            "nextAttemptAt", "deliveredAt", "log",
        ]  # fmt: skip


class NotificationSerializer(serializers.ModelSerializer):
    alert = AlertSerializer(read_only=True)
    createdAt = serializers.DateTimeField(source="created_at")
    readAt = serializers.DateTimeField(source="read_at", allow_null=True)

    class Meta:
        model = Notification
        fields = ["id", "alert", "createdAt", "readAt"]


class MarkReadSerializer(serializers.Serializer):
    id = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=INT64_MAX, help_text="one notification; absent = all"
    )


class MarkedSerializer(serializers.Serializer):
    marked = serializers.IntegerField()


class FeedCommitSerializer(serializers.Serializer):
    table = serializers.CharField()
    tableName = serializers.CharField()
    version = serializers.IntegerField()
    timestamp = serializers.IntegerField(allow_null=True, help_text="ms since the epoch (UTC)")
    timestampIso = serializers.CharField(allow_null=True, help_text="the same, as ISO-8601 UTC")
    timestampSource = serializers.CharField()
    operation = serializers.CharField()
    userName = serializers.CharField()
    numFiles = serializers.IntegerField(allow_null=True)
    sizeBytes = serializers.IntegerField(allow_null=True)


class FeedAlertSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    table = serializers.CharField()
    tableName = serializers.CharField()
    version = serializers.IntegerField()
    timestamp = serializers.IntegerField(allow_null=True)
    operation = serializers.CharField()
    rule = serializers.CharField()
    ruleName = serializers.CharField()
    severity = serializers.ChoiceField(choices=Severity.choices)
    explanation = serializers.CharField()
    createdAt = serializers.CharField()


class FeedSerializer(serializers.Serializer):
    commits = FeedCommitSerializer(many=True)
    alerts = FeedAlertSerializer(many=True)
    syncedVersion = serializers.IntegerField(
        allow_null=True,
        required=False,
        help_text="with table: the version the table's last finished sync reached (null before its first sync)",
    )
