"""A delivery's lifecycle: claimed by one worker (pending/retrying -> sending), sent on its
channel, logged as an attempt, then delivered, or retried with exponential backoff and jitter
until DELTAWEB_ALERT_RETRY_WINDOW_HOURS after it was created, then failed. A manual
redelivery queues it again with the same idempotency key.
"""

from __future__ import annotations

import logging
import random
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from alerts import queue
from alerts.models import Alert, Channel, Delivery, DeliveryAttempt, DeliveryStatus
from alerts.notify.webhook import Outcome, bounded_body, post
from tables.delta.history.timestamps import format_ms
from tables.models import Commit
from tables.services.errors import ServiceError, one_line
from tables.services.jobs import faults

logger = logging.getLogger("alerts")


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def backoff(attempt: int) -> float:
    """Seconds before try `attempt + 1`: base * 2^(attempt-1), capped, with equal jitter (half
    fixed, half random) so receivers that failed together are not retried together."""
    base = _setting("DELTAWEB_ALERT_RETRY_BASE_SECONDS", 30)
    cap = _setting("DELTAWEB_ALERT_RETRY_MAX_SECONDS", 3600)
    delay = min(cap, base * (2 ** max(attempt - 1, 0)))
    return delay / 2 + random.uniform(0, delay / 2)


def retry_deadline(created: datetime) -> datetime:
    return created + timedelta(hours=_setting("DELTAWEB_ALERT_RETRY_WINDOW_HOURS", 24))


def version_link(alert: Alert) -> str:
    base = str(getattr(settings, "DELTAWEB_BASE_URL", "")).rstrip("/")
    return base + reverse("tables:version_detail", args=[alert.table.slug, alert.version])


def payload(delivery: Delivery) -> dict[str, Any]:
    """What a webhook receives (documented in the README)."""
    alert = delivery.alert
    commit: Commit | None = alert.commit
    ts = commit.timestamp if commit is not None else None
    return {
        "idempotencyKey": str(delivery.key),
        "alert": {
            "id": alert.pk,
            "rule": alert.rule,
            "ruleName": alert.rule_name,
            "severity": alert.severity,
            "explanation": alert.explanation,
            "createdAt": alert.created_at.isoformat(),
        },
        "table": {"id": alert.table_id, "name": alert.table.name, "slug": alert.table.slug},
        "version": alert.version,
        "timestamp": ts,
        "timestampIso": format_ms(ts),  # a log may say any number: never an exception here
        "timestampSource": commit.timestamp_source if commit is not None else None,
        "operation": alert.operation,
        "operationParameters": commit.operation_parameters if commit is not None else None,
        "metrics": commit.operation_metrics if commit is not None else None,
        "link": version_link(alert),
    }


def _email(delivery: Delivery) -> Outcome:
    to = (delivery.user.email or "").strip()
    if not to:
        return Outcome(False, None, "the subscriber has no e-mail address")
    alert = delivery.alert
    subject = f"[deltaweb] {alert.severity}: {alert.rule_name} on {alert.table.name} v{alert.version}"
    body = (
        f"{alert.explanation}\n\n"
        f"Table: {alert.table.name}\nVersion: {alert.version}\nOperation: {alert.operation or '-'}\n"
        f"Rule: {alert.rule_name} ({alert.severity})\n\n{version_link(alert)}\n\n"
        f"Delivery {delivery.key}\n"
    )
    try:
        # names and operations come from users and logs: one line, whatever they contain
        send_mail(" ".join(subject.split())[:200], body, None, [to], fail_silently=False)
    except Exception as exc:  # SMTP and socket errors of every kind: retried
        return Outcome(False, None, one_line(f"{type(exc).__name__}: {exc}"))
    return Outcome(True, 250, "")


def _send(delivery: Delivery) -> Outcome:
    if delivery.channel == Channel.EMAIL:
        return _email(delivery)
    endpoint = delivery.endpoint
    if endpoint is None or not endpoint.active:
        return Outcome(False, None, "the webhook endpoint was removed or deactivated")
    limit = int(_setting("DELTAWEB_WEBHOOK_MAX_PAYLOAD_BYTES", 64 * 1024))
    try:
        return post(endpoint.url, endpoint.secret, str(delivery.key), bounded_body(payload(delivery), limit))
    except ServiceError as exc:  # the URL is refused now (its host moved to a private address)
        return Outcome(False, None, exc.message[:500])


def _claim(delivery_id: int) -> bool:
    now = timezone.now()
    # a worker that died mid-send holds the row this long; then the sweep sends it again
    lease = now + timedelta(seconds=_setting("DELTAWEB_DELIVERY_LEASE_SECONDS", 90))
    return (
        Delivery.objects.filter(pk=delivery_id, status__in=(DeliveryStatus.PENDING, DeliveryStatus.RETRYING))
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .update(status=DeliveryStatus.SENDING, next_attempt_at=lease)
        == 1
    )


def deliver(delivery_id: int, manual: bool = False) -> dict[str, Any]:
    """One try of one delivery (the worker's task); a redelivered message is a no-op."""
    if not _claim(delivery_id):
        return {"skipped": True}
    d = Delivery.objects.select_related("alert__table", "alert__commit", "endpoint", "user").get(pk=delivery_id)
    try:
        outcome = _send(d)
    except Exception as exc:  # a bug must not leave the row "sending": it is logged and retried
        logger.exception("delivery %s failed unexpectedly", d.pk)
        outcome = Outcome(False, None, one_line(f"{type(exc).__name__}: {exc}"))
    faults.reached("delivery-sent")
    number = d.attempts + 1
    DeliveryAttempt.objects.create(
        delivery=d, number=number, status_code=outcome.status_code, error=outcome.error, manual=manual
    )
    now = timezone.now()
    fields: dict[str, Any] = {"attempts": number, "last_status_code": outcome.status_code, "last_error": outcome.error}
    if outcome.ok:
        fields.update(status=DeliveryStatus.DELIVERED, delivered_at=now, next_attempt_at=None)
    else:
        delay = backoff(number)
        when = now + timedelta(seconds=delay)
        if when > retry_deadline(d.retry_since):
            fields.update(status=DeliveryStatus.FAILED, next_attempt_at=None)
        else:
            fields.update(status=DeliveryStatus.RETRYING, next_attempt_at=when)
    Delivery.objects.filter(pk=d.pk, status=DeliveryStatus.SENDING).update(**fields)
    if fields["status"] == DeliveryStatus.RETRYING:
        queue.send_quietly(queue.DELIVER_TASK, d.pk, countdown=delay)
    return {"status": fields["status"], "statusCode": outcome.status_code}


def redeliver(delivery: Delivery) -> Delivery:
    """Queue a finished delivery again (same idempotency key); the retry window starts anew."""
    if delivery.status not in (DeliveryStatus.DELIVERED, DeliveryStatus.FAILED):
        raise ServiceError("Only a delivered or failed delivery can be sent again.", "delivery_in_progress", 409)
    n = Delivery.objects.filter(pk=delivery.pk, status=delivery.status).update(
        status=DeliveryStatus.PENDING, next_attempt_at=None, retry_since=timezone.now()
    )
    if n != 1:
        raise ServiceError("The delivery changed meanwhile; reload it.", "delivery_in_progress", 409)
    transaction.on_commit(lambda: queue.send_quietly(queue.DELIVER_TASK, delivery.pk, "manual"))
    delivery.refresh_from_db()
    return delivery


def sweep() -> dict[str, int]:
    """Beat: send deliveries whose retry is due (a lost message, a broker that was down),
    release ones whose worker died mid-send, and send scans left queued (or left running by a
    worker that died: silent beyond DELTAWEB_JOB_SILENT_MINUTES)."""
    from alerts.models import Scan, ScanStatus

    now = timezone.now()
    Delivery.objects.filter(status=DeliveryStatus.SENDING, next_attempt_at__lt=now).update(
        status=DeliveryStatus.RETRYING, next_attempt_at=now
    )
    due = list(
        Delivery.objects.filter(status__in=(DeliveryStatus.PENDING, DeliveryStatus.RETRYING))
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .values_list("pk", flat=True)[:500]
    )
    for pk in due:
        queue.send_quietly(queue.DELIVER_TASK, pk)
    # a scan whose worker died mid-way is evaluated again at once: alerts are stored once
    lease = now - timedelta(minutes=_setting("DELTAWEB_JOB_SILENT_MINUTES", 3))
    running = Scan.objects.filter(status=ScanStatus.RUNNING)
    rescued = list(running.filter(Q(claimed_at__lt=lease) | Q(claimed_at__isnull=True)).values_list("pk", flat=True))
    rescued = [pk for pk in rescued if running.filter(pk=pk).update(status=ScanStatus.QUEUED) == 1]
    stale = now - timedelta(minutes=1)
    queued = Scan.objects.filter(status=ScanStatus.QUEUED, created_at__lt=stale).values_list("pk", flat=True)
    scans = sorted(set(queued) | set(rescued))
    for pk in scans:
        queue.send_quietly(queue.EVALUATE_TASK, pk)
    return {"deliveries": len(due), "scans": len(scans)}
