"""The alerts app's use cases, for its pages, its API and the admin: webhook endpoints (the
secret shown once), subscriptions, rule settings and users' rules, in-app notifications,
deliveries and redelivery. Each checks who may do it; views only parse and render.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from alerts.detect.rules import BUILTIN
from alerts.models import (
    Channel,
    CustomRule,
    Delivery,
    MetricOp,
    Notification,
    RuleSetting,
    Severity,
    Subscription,
    WebhookEndpoint,
)
from alerts.notify import delivery as deliveries
from alerts.notify.urlcheck import check
from tables.models import Table
from tables.services.access import roles
from tables.services.errors import ServiceError


def _denied(what: str) -> ServiceError:
    return ServiceError(f"{what} needs the analyst or approver role (or staff).", "permission_denied", 403)


def _severity(value: Any, field: str = "minSeverity") -> str:
    if value not in Severity.values:
        raise ServiceError(f"{field} must be one of {', '.join(Severity.values)}.", "invalid_severity")
    return value


# --- webhook endpoints ------------------------------------------------------------------------


def create_endpoint(user, name: str, url: str) -> tuple[WebhookEndpoint, str]:
    """A new endpoint and its signing secret; the secret is returned this once and never shown again."""
    name = (name or "").strip()
    if not name:
        raise ServiceError("Give the webhook a name.", "invalid_name", field="name")
    try:
        check(url)  # scheme, host, allowed hosts, no internal address
    except ServiceError as exc:
        exc.extra.setdefault("field", "url")  # a form says it beside the URL
        raise
    secret = secrets.token_urlsafe(32)
    ep = WebhookEndpoint.objects.create(owner=user, name=name[:200], url=url.strip(), secret=secret)
    return ep, secret


def endpoints_of(user) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(owner=user)


def endpoint_of(user, pk: int) -> WebhookEndpoint:
    ep = WebhookEndpoint.objects.filter(pk=pk, owner=user).first()
    if ep is None:
        raise ServiceError(f"You have no webhook {pk}.", "not_found", 404)
    return ep


def delete_endpoint(user, pk: int) -> None:
    endpoint_of(user, pk).delete()


# --- subscriptions ----------------------------------------------------------------------------


def subscribe(
    user, table: Table | None, channel: str, min_severity: str = Severity.WARNING, endpoint_id: int | None = None
) -> Subscription:
    if channel not in Channel.values:
        raise ServiceError(f"channel must be one of {', '.join(Channel.values)}.", "invalid_channel")
    _severity(min_severity)
    endpoint = None
    if channel == Channel.WEBHOOK:
        if endpoint_id is None:
            raise ServiceError("A webhook subscription names one of your webhooks (endpoint).", "invalid_endpoint")
        endpoint = endpoint_of(user, endpoint_id)
    elif endpoint_id is not None:
        raise ServiceError("Only webhook subscriptions name an endpoint.", "invalid_endpoint")
    if channel == Channel.EMAIL and not (user.email or "").strip():
        raise ServiceError("Your account has no e-mail address to send alerts to.", "no_email")
    return Subscription.objects.create(
        user=user, table=table, channel=channel, endpoint=endpoint, min_severity=min_severity
    )


def subscriptions_of(user) -> QuerySet[Subscription]:
    return Subscription.objects.filter(user=user).select_related("table", "endpoint")


def unsubscribe(user, pk: int) -> None:
    if Subscription.objects.filter(pk=pk, user=user).delete()[0] == 0:
        raise ServiceError(f"You have no subscription {pk}.", "not_found", 404)


# --- rules ------------------------------------------------------------------------------------


def rule_settings(table: Table) -> list[dict[str, Any]]:
    """Every built-in rule with what is in force on `table`."""
    saved = {s.rule: s for s in RuleSetting.objects.filter(table=table)}
    out = []
    for key, rule in BUILTIN.items():
        s = saved.get(key)
        out.append(
            {
                "rule": key,
                "name": rule.name,
                "enabled": s.enabled if s else True,
                "severity": (s.severity if s and s.severity else rule.severity),
                "threshold": (s.threshold if s and s.threshold is not None else rule.threshold),
                "thresholdMeans": rule.threshold_help,
            }
        )
    return out


def set_rule(user, table: Table, rule: str, **changes: Any) -> list[dict[str, Any]]:
    """Switch a built-in rule on or off on `table`, or change its threshold or severity."""
    if not roles.can_register(user):
        raise _denied("Changing a table's alert rules")
    if rule not in BUILTIN:
        raise ServiceError(f"There is no built-in rule {rule!r}.", "invalid_rule")
    s, _ = RuleSetting.objects.get_or_create(table=table, rule=rule)
    if "enabled" in changes and changes["enabled"] is not None:
        s.enabled = bool(changes["enabled"])
    if changes.get("severity"):
        s.severity = _severity(changes["severity"], "severity")
    if "threshold" in changes and changes["threshold"] is not None:
        t = changes["threshold"]
        if BUILTIN[rule].threshold is None:
            raise ServiceError(f"The rule {rule} has no threshold.", "invalid_threshold")
        if not isinstance(t, int | float) or isinstance(t, bool) or not (math.isfinite(t) and 0 < t <= 1_000_000):
            raise ServiceError("threshold must be a positive number.", "invalid_threshold")
        s.threshold = float(t)
    s.save()
    return rule_settings(table)


def create_rule(actor, **fields: Any) -> CustomRule:
    """A user's rule; `fields` are CustomRule's (its `user` is the commit's user to match)."""
    if not roles.can_register(actor):
        raise _denied("Adding an alert rule")
    rule = CustomRule(created_by=actor, **fields)
    _check_rule(rule)
    rule.save()
    return rule


# what a rule may have changed after it was made (not who made it, nor when)
RULE_FIELDS = (
    "name", "table", "severity", "enabled", "operation", "user", "metric", "metric_op", "metric_value", "partition",
)  # fmt: skip


def _check_rule(rule: CustomRule) -> None:
    """A rule as it may be saved, or the ServiceError naming the field at fault (`field`)."""
    rule.name = (rule.name or "").strip()[:200]
    if not rule.name:
        raise ServiceError("Give the rule a name.", "invalid_name", field="name")
    _severity(rule.severity, "severity")
    if not (rule.operation or rule.user or rule.metric or rule.partition):
        raise ServiceError(
            "A rule needs a condition: operation, user, metric or partition.", "invalid_rule", field="operation"
        )
    if rule.metric and (rule.metric_op not in MetricOp.values or rule.metric_value is None):
        raise ServiceError(
            "A metric condition needs metricOp (gt, ge, lt, le, eq) and metricValue.", "invalid_rule", field="metric"
        )
    if rule.metric_value is not None and not math.isfinite(rule.metric_value):
        raise ServiceError("metricValue must be a finite number.", "invalid_rule", field="metric_value")
    if rule.partition and "=" not in rule.partition:
        raise ServiceError("partition is key=value.", "invalid_rule", field="partition")


def can_edit_rules(user: Any) -> bool:
    """Adding, editing, switching off and removing users' rules (the rules page and the API
    alike): analysts, approvers and staff, as adding and removing always were; everyone
    signed in reads them."""
    return bool(user and user.is_active and roles.can_register(user))


def _editable_rule(actor: Any, pk: int, what: str) -> CustomRule:
    if not can_edit_rules(actor):
        raise _denied(what)
    rule = CustomRule.objects.filter(pk=pk).first()
    if rule is None:
        raise ServiceError(f"There is no rule {pk}.", "not_found", 404)
    return rule


def update_rule(actor: Any, pk: int, **fields: Any) -> CustomRule:
    """Change a user's rule (analysts, approvers, staff): `fields` among RULE_FIELDS, checked as a new rule's."""
    rule = _editable_rule(actor, pk, "Changing an alert rule")
    unknown = set(fields) - set(RULE_FIELDS)
    if unknown:
        raise ServiceError(f"A rule has no field {', '.join(sorted(unknown))}.", "invalid_rule")
    for name, value in fields.items():
        setattr(rule, name, value)
    _check_rule(rule)
    rule.save()
    return rule


def set_rule_enabled(actor: Any, pk: int, enabled: bool) -> CustomRule:
    """Switch a user's rule off (it fires no more, and is kept) or on again (analysts, approvers, staff)."""
    rule = _editable_rule(actor, pk, "Switching an alert rule off or on")
    rule.enabled = bool(enabled)
    rule.save(update_fields=["enabled"])
    return rule


def delete_rule(user, pk: int) -> None:
    if not roles.can_register(user):
        raise _denied("Removing an alert rule")
    if CustomRule.objects.filter(pk=pk).delete()[0] == 0:
        raise ServiceError(f"There is no rule {pk}.", "not_found", 404)


# --- notifications and deliveries -------------------------------------------------------------


def notifications_of(user, unread_only: bool = False) -> QuerySet[Notification]:
    qs = Notification.objects.filter(user=user).select_related("alert__table")
    return qs.filter(read_at__isnull=True) if unread_only else qs


def unread_count(user) -> int:
    """How many of `user`'s notifications are unread: the count every page's navigation bar
    shows, written out in SQL (through the ORM, compiling the query cost more than running
    it, a sixth of a page's time)."""
    qn = connection.ops.quote_name
    meta = Notification._meta
    sql = (
        f"SELECT COUNT(*) FROM {qn(meta.db_table)} WHERE {qn(meta.get_field('user').column)} = %s "
        f"AND {qn(meta.get_field('read_at').column)} IS NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [user.pk])
        return cursor.fetchone()[0]


def mark_read(user, pk: int | None = None) -> int:
    """Mark one notification (or all) read; how many changed."""
    qs = Notification.objects.filter(user=user, read_at__isnull=True)
    if pk is not None:
        qs = qs.filter(pk=pk)
    return qs.update(read_at=timezone.now())


def deliveries_of(user) -> QuerySet[Delivery]:
    """Staff see every delivery; others their own."""
    qs = Delivery.objects.select_related("alert__table", "endpoint").prefetch_related("attempts_log")
    return qs if user.is_staff else qs.filter(user=user)


def redeliver(user, pk: int) -> Delivery:
    d = deliveries_of(user).filter(pk=pk).first()
    if d is None:
        raise ServiceError(f"You have no delivery {pk}.", "not_found", 404)
    with transaction.atomic():
        return deliveries.redeliver(d)
