"""The admin console for alerts: rules, alerts, deliveries with their log (redeliver as an
action), subscriptions and webhooks (the secret is never displayed)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import transaction

from alerts.models import Alert, CustomRule, Delivery, DeliveryAttempt, RuleSetting, Scan, Subscription, WebhookEndpoint
from alerts.notify import delivery
from tables.services.errors import ServiceError


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("created_at", "table", "version", "severity", "rule_name", "explanation")
    list_filter = ("severity", "rule")
    search_fields = ("table__name", "explanation")
    readonly_fields = [f.name for f in Alert._meta.fields]


@admin.register(RuleSetting)
class RuleSettingAdmin(admin.ModelAdmin):
    list_display = ("table", "rule", "enabled", "threshold", "severity")
    list_filter = ("rule", "enabled")


@admin.register(CustomRule)
class CustomRuleAdmin(admin.ModelAdmin):
    list_display = ("name", "table", "severity", "enabled", "operation", "user", "metric", "partition")
    list_filter = ("enabled", "severity")


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "at", "status_code", "error", "manual")


@admin.action(description="Deliver again (same idempotency key)")
def redeliver(modeladmin, request, queryset) -> None:
    done = 0
    for d in queryset:
        try:
            with transaction.atomic():
                delivery.redeliver(d)
            done += 1
        except ServiceError as exc:
            messages.warning(request, f"Delivery {d.pk}: {exc.message}")
    messages.info(request, f"{done} deliveries queued again.")


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "alert", "user", "channel", "status", "attempts", "last_status_code", "last_error")
    list_filter = ("status", "channel")
    readonly_fields = [f.name for f in Delivery._meta.fields]
    inlines = [AttemptInline]
    actions = [redeliver]


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("user", "table", "channel", "endpoint", "min_severity")
    list_filter = ("channel", "min_severity")


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "url", "active", "created_at")
    fields = ("owner", "name", "url", "active")  # never the secret
    readonly_fields = ("owner", "url")

    def has_add_permission(self, request) -> bool:
        return False  # created by their owner, who sees the secret once


@admin.register(Scan)
class ScanAdmin(admin.ModelAdmin):
    list_display = ("created_at", "table", "first_version", "last_version", "status", "alerts", "error")
    list_filter = ("status",)
    readonly_fields = [f.name for f in Scan._meta.fields]
