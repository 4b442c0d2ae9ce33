"""Who hears about an alert: the subscriptions of its table (or of all tables) at or below
its severity. In-app notifications are written at once; webhooks and e-mails become Delivery
rows, sent by a worker once the transaction commits."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from alerts import queue
from alerts.models import Alert, Channel, Delivery, Notification, Severity, Subscription


def subscribers(alert: Alert):
    return (
        Subscription.objects.filter(Q(table=alert.table_id) | Q(table__isnull=True))
        .filter(min_severity__in=[s for s in Severity.values if Severity.rank(s) <= Severity.rank(alert.severity)])
        .filter(user__is_active=True)
        .select_related("endpoint")
    )


def fan_out(alert: Alert) -> list[Delivery]:
    """Notifications and Delivery rows for every subscription the alert concerns."""
    deliveries = []
    seen: set[tuple[int, str, int | None]] = set()
    for sub in subscribers(alert):
        # one table's subscription and an all-tables one of the same user and channel: one delivery
        target = (sub.user_id, sub.channel, sub.endpoint_id)
        if target in seen:
            continue
        seen.add(target)
        if sub.channel == Channel.IN_APP:
            Notification.objects.get_or_create(user_id=sub.user_id, alert=alert)
            continue
        if sub.channel == Channel.WEBHOOK and (sub.endpoint is None or not sub.endpoint.active):
            continue
        deliveries.append(
            Delivery.objects.create(
                alert=alert, subscription=sub, user_id=sub.user_id, channel=sub.channel, endpoint=sub.endpoint
            )
        )
    for d in deliveries:
        transaction.on_commit(lambda pk=d.pk: queue.send_quietly(queue.DELIVER_TASK, pk))
    return deliveries
