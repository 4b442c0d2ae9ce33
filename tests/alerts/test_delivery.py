"""Deliveries end to end, on real pieces: redis-server and Celery worker processes, a webhook
receiver and an SMTP server (aiosmtpd) on loopback. A user subscribes, a risky commit lands,
one sync later the receiver has exactly one accepted, signed delivery, the mail arrived and
the feed shows the alert."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from alerts import services
from alerts.models import Alert, Delivery, DeliveryStatus, Notification, Severity
from tables.delta.history.timestamps import format_ms
from tables.services.sync import store as sync
from tests.alerts.conftest import register_and_sync
from tests.alerts.receivers import HANG, MailSink, verify, wait_until
from tests.conftest import free_port

deltalake = pytest.importorskip("deltalake")
aiosmtpd = pytest.importorskip("aiosmtpd.controller")


@pytest.fixture
def smtp():
    sink = MailSink()
    sink.port = free_port()
    controller = aiosmtpd.Controller(sink, hostname="127.0.0.1", port=sink.port)
    controller.start()
    yield sink
    controller.stop()


@pytest.fixture
def worker_env(settings, smtp):
    """The worker's settings: webhooks may go to loopback (listed explicitly), fast retries,
    a short timeout, the local SMTP server."""
    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    return {
        "DELTAWEB_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "DELTAWEB_ALERT_RETRY_BASE_SECONDS": "0.3",
        "DELTAWEB_WEBHOOK_TIMEOUT_SECONDS": "1",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp.port),
        "DELTAWEB_BASE_URL": "https://deltaweb.example",
    }


@pytest.fixture
def user(django_user_model):
    from django.contrib.auth.models import Group

    from tables.services.access import roles

    u = django_user_model.objects.create_user("ops", email="ops@example.com", password="secret-pass-1")
    u.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    return u


def wait_job(job):
    job = wait_until(lambda: (job.refresh_from_db(), job)[1] if job.is_terminal or job.refresh_from_db() else None)
    assert job is not None and job.is_terminal


def test_subscribed_user_gets_one_signed_delivery_a_mail_and_the_feed(
    roots, receiver, smtp, worker_env, user, celery_worker_factory, client
) -> None:
    path = roots / "orders"
    deltalake.write_deltalake(str(path), pa.table({"id": list(range(100)), "kind": ["a"] * 100}))
    table = register_and_sync("orders", path)
    celery_worker_factory(env=worker_env)

    endpoint, secret = services.create_endpoint(user, "ops hook", receiver.url)
    services.subscribe(user, table, "webhook", Severity.WARNING, endpoint.pk)
    services.subscribe(user, table, "email", Severity.CRITICAL)
    services.subscribe(user, None, "in_app", Severity.INFO)
    receiver.fail_per_key = 2  # every delivery fails twice with 503, then is accepted

    deltalake.write_deltalake(str(path), pa.table({"id": [100], "kind": ["b"]}), mode="append")  # no alert
    deltalake.DeltaTable(str(path)).delete()  # every row: the risky commit (v2)
    wait_job(sync.start_sync(table))

    d = wait_until(
        lambda: Delivery.objects.filter(channel="webhook", status=DeliveryStatus.DELIVERED).first(), timeout=90
    )
    assert d is not None, list(Delivery.objects.values("channel", "status", "last_error"))
    assert Alert.objects.filter(table=table, version=1).count() == 0
    rules = set(Alert.objects.filter(table=table, version=2).values_list("rule", flat=True))
    assert {"overwrite", "large_removal"} <= rules

    # the webhook: 503, 503, then exactly one accepted request per delivery, signed with the secret
    webhooks = list(Delivery.objects.filter(channel="webhook"))
    assert len(webhooks) == Alert.objects.filter(table=table).count()
    assert wait_until(
        lambda: (
            len(receiver.accepted()) == len(webhooks)
            and all(d.status == DeliveryStatus.DELIVERED for d in Delivery.objects.filter(channel="webhook"))
        ),
        timeout=90,
    )
    by_key: dict[str, list] = {}
    for r in receiver.requests:
        by_key.setdefault(r.headers["idempotency-key"], []).append(r)
    assert set(by_key) == {str(d.key) for d in webhooks}
    for requests in by_key.values():
        assert [r.answered for r in requests] == [503, 503, 200]  # retries carry the same key
        assert verify(secret, requests[-1]) and not verify("another secret", requests[-1])
    one_key = str(Delivery.objects.get(channel="webhook", alert__rule="overwrite").key)
    accepted = receiver.accepted()
    body = json.loads(next(r for r in accepted if r.headers["idempotency-key"] == one_key).body)
    assert body["table"]["slug"] == "orders" and body["version"] == 2 and body["operation"] == "DELETE"
    assert body["timestampSource"] == "file" and isinstance(body["timestamp"], int)
    assert body["timestampIso"] == format_ms(body["timestamp"])
    assert body["link"] == "https://deltaweb.example/t/orders/v/2/"
    assert body["alert"]["rule"] == "overwrite" and body["alert"]["severity"] == "critical"
    log = Delivery.objects.get(key=one_key).attempts_log.all()
    assert [a.status_code for a in log] == [503, 503, 200]

    # the mail: critical alerts only (the e-mail subscription's filter)
    critical = Alert.objects.filter(table=table, severity=Severity.CRITICAL).count()
    assert wait_until(lambda: len(smtp.messages) >= critical)
    assert len(smtp.messages) == critical
    rcpt, msg = smtp.messages[0]
    assert rcpt == ["ops@example.com"] and "orders v2" in msg["Subject"]
    assert "https://deltaweb.example/t/orders/v/2/" in msg.get_payload()

    # in-app notifications, and the feed shows the alert
    assert Notification.objects.filter(user=user).count() == Alert.objects.filter(table=table).count()
    client.force_login(user)
    feed = client.get("/api/activity/?table=orders").json()
    assert {a["rule"] for a in feed["alerts"]} == rules
    assert [c["version"] for c in feed["commits"]][:1] == [2]


def test_hanging_receiver_times_out_and_is_retried(roots, receiver, worker_env, user, celery_worker_factory) -> None:
    path = roots / "t"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2]}))
    table = register_and_sync("t", path)
    celery_worker_factory(env=worker_env)
    endpoint, secret = services.create_endpoint(user, "slow", receiver.url)
    services.subscribe(user, table, "webhook", Severity.CRITICAL, endpoint.pk)
    receiver.script = [HANG]
    receiver.hang_seconds = 4  # the worker's timeout is 1 s
    deltalake.DeltaTable(str(path)).delete()
    wait_job(sync.start_sync(table))
    assert wait_until(
        lambda: Delivery.objects.exists() and not Delivery.objects.exclude(status=DeliveryStatus.DELIVERED).exists(),
        timeout=90,
    )
    # the one that met the hanging receiver timed out, was retried, and was accepted once
    hung = [d for d in Delivery.objects.all() if d.attempts > 1]
    assert len(hung) == 1
    log = list(hung[0].attempts_log.all())
    assert log[0].status_code is None and "no answer within 1 s" in log[0].error
    assert [a.status_code for a in log[1:]] == [200]
    assert len(receiver.accepted()) == Delivery.objects.count()
    assert all(verify(secret, r) for r in receiver.requests)
