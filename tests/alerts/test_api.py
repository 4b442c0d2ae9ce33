"""The alerts API and pages: the feed with conditional requests, subscriptions and webhooks
(the secret shown once, never again), who may do what, bad input answered with a clear 400,
webhook URLs that point inside the network refused, redelivery, the OpenAPI schema."""

from __future__ import annotations

import pyarrow as pa
import pytest
from django.contrib.auth.models import Group

from alerts import services
from alerts.detect import evaluate
from alerts.models import Alert, Delivery, DeliveryStatus, Notification, RuleSetting, Severity, WebhookEndpoint
from alerts.notify.urlcheck import check
from tables.services.access import roles
from tables.services.errors import ServiceError
from tests.alerts.conftest import register_and_sync

deltalake = pytest.importorskip("deltalake")


@pytest.fixture
def analyst(django_user_model):
    u = django_user_model.objects.create_user("ana", email="ana@example.com", password="secret-pass-1")
    u.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    return u


@pytest.fixture
def viewer(django_user_model):
    return django_user_model.objects.create_user("vic", password="secret-pass-1")


@pytest.fixture
def alerted(roots):
    """A table whose second sync stored a DELETE without predicate, evaluated."""
    path = roots / "orders"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2, 3]}))
    table = register_and_sync("orders", path)
    deltalake.DeltaTable(str(path)).delete()
    from tables.services.sync import store as sync

    sync.sync_table(table.pk)
    evaluate.evaluate(table, [1])
    return table


@pytest.mark.django_db
def test_feed_answers_304_until_something_new_arrives(client, analyst, alerted, roots) -> None:
    client.force_login(analyst)
    first = client.get("/api/activity/", {"table": "orders"})
    assert first.status_code == 200
    body = first.json()
    assert [c["version"] for c in body["commits"]] == [1, 0]
    assert {a["rule"] for a in body["alerts"]} >= {"overwrite"}
    tag = first["ETag"]
    again = client.get("/api/activity/", {"table": "orders"}, HTTP_IF_NONE_MATCH=tag)
    assert again.status_code == 304
    # a new commit changes the answer
    deltalake.write_deltalake(str(roots / "orders"), pa.table({"id": [9]}), mode="append")
    from tables.services.sync import store as sync

    sync.sync_table(alerted.pk)
    after = client.get("/api/activity/", {"table": "orders", "afterVersion": "1"}, HTTP_IF_NONE_MATCH=tag)
    assert after.status_code == 200 and [c["version"] for c in after.json()["commits"]] == [2]
    # filters
    only = client.get("/api/activity/", {"kind": "alerts", "severity": "critical"}).json()
    assert only["commits"] == [] and {a["severity"] for a in only["alerts"]} == {"critical"}
    assert client.get("/api/activity/", {"operation": "delete"}).json()["commits"][0]["version"] == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params,code",
    [
        ({"kind": "everything"}, 400),
        ({"severity": "loud"}, 400),
        ({"limit": "0"}, 400),
        ({"limit": "x"}, 400),
        ({"afterVersion": "3x"}, 400),
        ({"table": "orders", "afterVersion": "-1"}, 400),
        ({"table": "nope\n"}, 404),
    ],
)
def test_feed_rejects_bad_parameters(client, analyst, alerted, params, code) -> None:
    client.force_login(analyst)
    r = client.get("/api/activity/", params)
    assert r.status_code == code
    assert "error" in r.json() and "Traceback" not in r.content.decode()


@pytest.mark.django_db
def test_sign_in_required(client) -> None:
    for url in ("/api/activity/", "/api/alerts/", "/api/alerts/webhooks/", "/api/alerts/deliveries/"):
        assert client.get(url).status_code in (401, 403)
    assert client.get("/activity/").status_code == 302


@pytest.mark.django_db
def test_webhook_secret_is_shown_once_and_urls_inside_the_network_are_refused(client, analyst, settings) -> None:
    client.force_login(analyst)
    for url in (
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://10.0.0.5/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/",
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "http://user:pw@example.com/hook",
        "not a url",
    ):
        r = client.post("/api/alerts/webhooks/", {"name": "x", "url": url}, content_type="application/json")
        assert r.status_code == 400, url
        assert r.json()["error"]["code"] in ("webhook_url_refused", "invalid"), url
    assert not WebhookEndpoint.objects.exists()

    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    r = client.post(
        "/api/alerts/webhooks/", {"name": "local", "url": "http://127.0.0.1:9/hook"}, content_type="application/json"
    )
    assert r.status_code == 201
    secret = r.json()["secret"]
    assert len(secret) >= 40 and WebhookEndpoint.objects.get().secret == secret
    listed = client.get("/api/alerts/webhooks/").json()["results"]
    assert [w["name"] for w in listed] == ["local"] and "secret" not in listed[0]
    assert secret not in client.get("/api/alerts/webhooks/").content.decode()
    assert secret not in client.get("/alerts/settings/").content.decode()
    # a list that does not name a host refuses it even when public
    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    with pytest.raises(ServiceError, match="not in DELTAWEB_WEBHOOK_ALLOWED_HOSTS"):
        check("http://127.0.0.2/x")


@pytest.mark.django_db
def test_subscriptions_are_per_user_and_validated(client, analyst, viewer, alerted, settings) -> None:
    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    ep, _ = services.create_endpoint(analyst, "mine", "http://127.0.0.1:9/")
    client.force_login(viewer)
    # another user's endpoint is not yours to subscribe with
    r = client.post(
        "/api/alerts/subscriptions/",
        {"table": "orders", "channel": "webhook", "endpoint": ep.pk},
        content_type="application/json",
    )
    assert r.status_code == 404
    r = client.post("/api/alerts/subscriptions/", {"channel": "email"}, content_type="application/json")
    assert r.status_code == 400 and r.json()["error"]["code"] == "no_email"
    r = client.post("/api/alerts/subscriptions/", {"channel": "pager"}, content_type="application/json")
    assert r.status_code == 400
    r = client.post(
        "/api/alerts/subscriptions/", {"channel": "in_app", "minSeverity": "info"}, content_type="application/json"
    )
    assert r.status_code == 201 and r.json()["table"] is None
    client.force_login(analyst)
    assert client.get("/api/alerts/subscriptions/").json()["results"] == []  # the viewer's is not listed
    assert client.delete(f"/api/alerts/subscriptions/{services.subscriptions_of(viewer).get().pk}/").status_code == 404


@pytest.mark.django_db
def test_rule_settings_need_a_role_and_take_effect(client, analyst, viewer, alerted) -> None:
    client.force_login(viewer)
    r = client.patch(
        "/api/alerts/tables/orders/rules/", {"rule": "overwrite", "enabled": False}, content_type="application/json"
    )
    assert r.status_code == 403 and not RuleSetting.objects.exists()
    client.force_login(analyst)
    for bad in ({"rule": "nope"}, {"rule": "overwrite", "threshold": 5}, {"rule": "large_removal", "threshold": -1}):
        assert client.patch("/api/alerts/tables/orders/rules/", bad, content_type="application/json").status_code == 400
    r = client.patch(
        "/api/alerts/tables/orders/rules/", {"rule": "overwrite", "enabled": False}, content_type="application/json"
    )
    assert r.status_code == 200
    assert next(x for x in r.json() if x["rule"] == "overwrite")["enabled"] is False
    Alert.objects.all().delete()
    evaluate.evaluate(alerted, [1])
    assert not Alert.objects.filter(rule="overwrite").exists()
    # a user's rule through the API
    r = client.post(
        "/api/alerts/rules/",
        {"name": "any delete", "table": "orders", "operation": "DELETE", "severity": "info"},
        content_type="application/json",
    )
    assert r.status_code == 201
    assert client.post("/api/alerts/rules/", {"name": "empty"}, content_type="application/json").status_code == 400
    evaluate.evaluate(alerted, [1])
    assert Alert.objects.get(rule=f"custom:{r.json()['id']}").explanation == "version 1: operation DELETE"


@pytest.mark.django_db
def test_notifications_and_redelivery_are_the_users_own(client, analyst, viewer, alerted, settings) -> None:
    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    ep, _ = services.create_endpoint(analyst, "mine", "http://127.0.0.1:9/")
    services.subscribe(analyst, alerted, "webhook", Severity.INFO, ep.pk)
    services.subscribe(analyst, None, "webhook", Severity.INFO, ep.pk)  # the same hook for all tables
    services.subscribe(analyst, None, "in_app", Severity.INFO)
    Alert.objects.all().delete()
    evaluate.evaluate(alerted, [1])
    n = Alert.objects.count()
    assert Delivery.objects.count() == n  # one delivery per alert, not one per subscription
    assert Notification.objects.filter(user=analyst, read_at__isnull=True).count() == n
    d = Delivery.objects.first()
    client.force_login(viewer)
    assert client.post(f"/api/alerts/deliveries/{d.pk}/redeliver/").status_code == 404
    client.force_login(analyst)
    assert client.post(f"/api/alerts/deliveries/{d.pk}/redeliver/").status_code == 409  # still pending
    Delivery.objects.filter(pk=d.pk).update(status=DeliveryStatus.FAILED)
    r = client.post(f"/api/alerts/deliveries/{d.pk}/redeliver/")
    assert r.status_code == 202 and r.json()["status"] == "pending"
    assert r.json()["idempotencyKey"] == str(d.key)
    assert client.post("/api/alerts/notifications/read/", {}, content_type="application/json").json() == {"marked": n}


@pytest.mark.django_db
def test_pages_render_and_escape_log_strings(client, analyst, alerted) -> None:
    Alert.objects.filter(table=alerted).update(explanation="<script>alert(1)</script>")
    client.force_login(analyst)
    page = client.get("/activity/?table=orders")
    html = page.content.decode()
    assert page.status_code == 200 and "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert 'data-url="/api/activity/?table=orders"' in html
    assert client.get("/activity/?kind=bad").status_code == 400
    settings_page = client.get("/alerts/settings/")
    assert settings_page.status_code == 200
    r = client.post("/alerts/settings/", {"action": "create_webhook", "name": "x", "url": "http://10.1.2.3/"})
    assert r.status_code == 400 and "internal address" in r.content.decode()


def test_schema_is_clean() -> None:
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_webhook_payloads_are_bounded_and_signed() -> None:
    import json

    from alerts.notify.webhook import bounded_body, signature

    payload = {
        "alert": {"explanation": "x" * 500},
        "operationParameters": {"predicate": "y" * 100_000},
        "metrics": {f"m{i}": str(i) for i in range(5000)},
    }
    body = bounded_body(payload, 64 * 1024)
    assert len(body) <= 64 * 1024
    slim = json.loads(body)
    assert slim["truncated"] is True and slim["operationParameters"] is None and slim["metrics"] is None
    small = bounded_body({"alert": {}, "metrics": {"a": "1"}}, 64 * 1024)
    assert "truncated" not in json.loads(small)
    assert signature("s", "1", small) != signature("s", "2", small) != signature("t", "1", small)


@pytest.mark.django_db
def test_retries_back_off_with_jitter_and_stop_after_the_window(analyst, alerted, settings) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from alerts.notify import delivery

    settings.DELTAWEB_ALERT_RETRY_BASE_SECONDS = 30
    settings.DELTAWEB_ALERT_RETRY_MAX_SECONDS = 3600
    for n, base in ((1, 30), (2, 60), (3, 120), (8, 3600), (20, 3600)):
        delays = {delivery.backoff(n) for _ in range(50)}
        assert all(base / 2 <= d <= base for d in delays) and len(delays) > 1  # jittered, bounded
    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    ep, _ = services.create_endpoint(analyst, "gone", "http://127.0.0.1:9/")  # nothing listens there
    services.subscribe(analyst, alerted, "webhook", Severity.INFO, ep.pk)
    Alert.objects.all().delete()
    evaluate.evaluate(alerted, [1])
    d = Delivery.objects.first()
    out = delivery.deliver(d.pk)
    d.refresh_from_db()
    assert out["status"] == "retrying" and d.status == DeliveryStatus.RETRYING and d.attempts == 1
    assert d.next_attempt_at > timezone.now() and "Connection" in d.last_error
    assert delivery.deliver(d.pk) == {"skipped": True}  # not due yet: a duplicate message does nothing
    # 24 h later, still failing: given up
    Delivery.objects.filter(pk=d.pk).update(
        retry_since=timezone.now() - timedelta(hours=24), next_attempt_at=timezone.now()
    )
    assert delivery.deliver(d.pk)["status"] == "failed"
    d.refresh_from_db()
    assert d.status == DeliveryStatus.FAILED and d.attempts == 2 and d.attempts_log.count() == 2


@pytest.mark.django_db
def test_rules_switched_on_the_activity_page(client, analyst, viewer, alerted) -> None:
    client.force_login(analyst)
    page = client.get("/activity/?table=orders").content.decode()
    assert "Rules on orders" in page and 'value="large_removal"' in page
    r = client.post(
        "/alerts/settings/", {"action": "set_rule", "table": "orders", "rule": "large_removal", "threshold": "20"}
    )
    assert r.status_code == 302 and r["Location"] == "/activity/?table=orders"
    s = RuleSetting.objects.get(table=alerted, rule="large_removal")
    assert s.enabled is False and s.threshold == 20.0  # the unchecked box switched it off
    bad = client.post(
        "/alerts/settings/", {"action": "set_rule", "table": "orders", "rule": "large_removal", "threshold": "x"}
    )
    assert bad.status_code == 400 and "threshold is a number" in bad.content.decode()
    client.force_login(viewer)
    denied = client.post("/alerts/settings/", {"action": "set_rule", "table": "orders", "rule": "overwrite"})
    assert denied.status_code == 403
    assert not RuleSetting.objects.filter(rule="overwrite").exists()
