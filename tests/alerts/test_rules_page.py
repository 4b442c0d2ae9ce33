"""The rules page (/alerts/rules/) through Django's test client: analysts, approvers and staff
list, add, edit and switch off users' rules; anyone else gets a 403 for every method; CSRF is
checked; a refused rule comes back with what was typed and the reason beside its field. And
the webhook form of the settings page keeps what was typed when the address is refused."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from alerts.models import CustomRule, Severity, WebhookEndpoint
from tables.models import Table

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_user("root", password="secret-pass-1", is_staff=True)


@pytest.fixture
def analyst(django_user_model):
    from django.contrib.auth.models import Group

    from tables.services.access import roles

    user = django_user_model.objects.create_user("ana", password="secret-pass-1")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    return user


@pytest.fixture
def orders():
    return Table.objects.create(name="orders", slug="orders", location="/nowhere/orders")


def field_value(html: str, field_id: str) -> str | None:
    m = re.search(rf'<input[^>]*id="{field_id}"[^>]*>', html)
    if m is None:
        return None
    v = re.search(r'value="([^"]*)"', m.group(0))
    return v.group(1) if v else ""


def test_only_those_who_change_rules_reach_them(client, analyst, admin, orders, django_user_model) -> None:
    rule = CustomRule.objects.create(name="merges", operation="MERGE")
    assert client.get("/alerts/rules/").status_code == 302  # signed out: to the sign-in page
    client.force_login(django_user_model.objects.create_user("vic", password="secret-pass-1"))  # no role
    for method, url, data in (
        ("get", "/alerts/rules/", None),
        ("post", "/alerts/rules/", {"action": "create", "name": "x", "severity": "info", "operation": "WRITE"}),
        ("post", "/alerts/rules/", {"action": "disable", "id": rule.pk}),
        ("get", f"/alerts/rules/{rule.pk}/", None),
        ("post", f"/alerts/rules/{rule.pk}/", {"name": "changed", "severity": "info", "operation": "WRITE"}),
    ):
        r = getattr(client, method)(url, data) if data else getattr(client, method)(url)
        assert r.status_code == 403, (method, url)
    rule.refresh_from_db()
    assert (rule.name, rule.enabled, CustomRule.objects.count()) == ("merges", True, 1)
    assert "Alert rules" not in client.get("/activity/").content.decode()  # not in a viewer's navigation
    for who in (admin, analyst):
        client.force_login(who)
        page = client.get("/alerts/rules/")
        assert page.status_code == 200 and 'href="/alerts/rules/"' in page.content.decode()


def test_add_edit_and_switch_off_a_rule(client, admin, orders) -> None:
    client.force_login(admin)
    r = client.post(
        "/alerts/rules/",
        {"action": "create", "name": "big deletes", "table": "orders", "severity": "critical", "enabled": "on",
         "metric": "numDeletedRows", "metric_op": "gt", "metric_value": "1000"},
    )  # fmt: skip
    rule = CustomRule.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/alerts/rules/#rule-{rule.pk}"
    assert (rule.table, rule.severity, rule.metric, rule.metric_op, rule.metric_value, rule.created_by) == (
        orders, Severity.CRITICAL, "numDeletedRows", "gt", 1000.0, admin
    )  # fmt: skip
    html = client.get("/alerts/rules/").content.decode()
    assert "big deletes" in html and "<code>numDeletedRows</code> &gt; 1000.0" in html

    # the edit form shows the rule as it is, and saves a change (every table now)
    html = client.get(f"/alerts/rules/{rule.pk}/").content.decode()
    assert field_value(html, "rule_name") == "big deletes" and field_value(html, "rule_metric_value") == "1000.0"
    assert '<option value="orders" selected>orders</option>' in html
    r = client.post(
        f"/alerts/rules/{rule.pk}/",
        {"name": "big deletes anywhere", "table": "", "severity": "warning", "enabled": "on", "metric": "numDeletedRows",
         "metric_op": "ge", "metric_value": "500"},
    )  # fmt: skip
    assert r.status_code == 302
    rule.refresh_from_db()
    assert (rule.name, rule.table, rule.severity, rule.metric_op, rule.metric_value) == (
        "big deletes anywhere", None, "warning", "ge", 500.0
    )  # fmt: skip

    # switched off: kept, and no longer among the rules in force
    assert client.post("/alerts/rules/", {"action": "disable", "id": rule.pk}).status_code == 302
    rule.refresh_from_db()
    assert rule.enabled is False
    assert 'class="rule-off"' in client.get("/alerts/rules/").content.decode()
    assert client.post("/alerts/rules/", {"action": "enable", "id": rule.pk}).status_code == 302
    rule.refresh_from_db()
    assert rule.enabled is True
    assert client.post("/alerts/rules/", {"action": "disable", "id": 999}).status_code == 404
    assert client.get("/alerts/rules/99999999999999999999/").status_code == 404


def test_a_refused_rule_keeps_what_was_typed_with_the_reason_beside_it(client, admin, orders) -> None:
    client.force_login(admin)
    evil = '"><script>alert(1)</script>'
    r = client.post("/alerts/rules/", {"action": "create", "name": evil, "table": "orders", "severity": "info"})
    html = r.content.decode()
    assert r.status_code == 400 and CustomRule.objects.count() == 0
    assert field_value(html, "rule_name") == "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"  # kept, escaped
    assert "<script>alert(1)" not in html
    assert '<option value="orders" selected>orders</option>' in html
    # the reason beside the field it is about, which the keyboard lands on
    error = re.search(r'<p class="error" id="rule_operation-error">([^<]*)</p>', html)
    assert error and "needs a condition" in error.group(1)
    operation = re.search(r'<input[^>]*id="rule_operation"[^>]*>', html).group(0)
    assert 'aria-invalid="true"' in operation and "rule_operation-error" in operation and "autofocus" in operation

    r = client.post(
        "/alerts/rules/",
        {"action": "create", "name": "m", "severity": "info", "metric": "numDeletedRows", "metric_value": "x"},
    )
    html = r.content.decode()
    assert (
        r.status_code == 400
        and 'id="rule_metric_value-error"' in html
        and field_value(html, "rule_metric") == "numDeletedRows"
    )
    r = client.post("/alerts/rules/", {"action": "create", "name": "m", "severity": "info", "metric": "numDeletedRows"})
    assert r.status_code == 400 and 'id="rule_metric-error"' in r.content.decode()
    r = client.post("/alerts/rules/", {"action": "create", "name": "p", "severity": "info", "partition": "region"})
    assert r.status_code == 400 and 'id="rule_partition-error"' in r.content.decode()
    # the same on the edit page
    rule = CustomRule.objects.create(name="merges", operation="MERGE")
    r = client.post(f"/alerts/rules/{rule.pk}/", {"name": "", "severity": "info", "operation": "MERGE"})
    assert r.status_code == 400 and 'id="rule_name-error"' in r.content.decode()
    assert field_value(r.content.decode(), "rule_operation") == "MERGE"
    rule.refresh_from_db()
    assert rule.name == "merges"


def test_csrf_is_checked(admin) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    data = {"action": "create", "name": "x", "severity": "info", "operation": "WRITE"}
    assert client.post("/alerts/rules/", data).status_code == 403
    assert CustomRule.objects.count() == 0
    html = client.get("/alerts/rules/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    assert client.post("/alerts/rules/", {**data, "csrfmiddlewaretoken": token}).status_code == 302
    assert CustomRule.objects.count() == 1


def test_a_refused_webhook_keeps_its_fields(client, analyst, settings) -> None:
    client.force_login(analyst)
    r = client.post("/alerts/settings/", {"action": "create_webhook", "name": "ops <hook>", "url": "http://10.1.2.3/x"})
    html = r.content.decode()
    assert r.status_code == 400 and WebhookEndpoint.objects.count() == 0
    assert field_value(html, "webhook-name") == "ops &lt;hook&gt;"
    assert field_value(html, "webhook-url") == "http://10.1.2.3/x"
    error = re.search(r'<p class="error" role="alert" id="webhook-url-error">([^<]*)</p>', html)
    assert error and "internal address" in error.group(1)
    url = re.search(r'<input[^>]*id="webhook-url"[^>]*>', html).group(0)
    assert 'aria-invalid="true"' in url and 'aria-describedby="webhook-url-error"' in url
    assert 'id="webhook-name-error"' not in html
    # no name: the reason beside the name, the address kept
    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    r = client.post("/alerts/settings/", {"action": "create_webhook", "name": " ", "url": "http://127.0.0.1:9/hook"})
    html = r.content.decode()
    assert r.status_code == 400 and 'id="webhook-name-error"' in html
    assert field_value(html, "webhook-url") == "http://127.0.0.1:9/hook"
    # accepted: the secret shown once, the form empty again
    r = client.post("/alerts/settings/", {"action": "create_webhook", "name": "ops", "url": "http://127.0.0.1:9/hook"})
    html = r.content.decode()
    secret = WebhookEndpoint.objects.get().secret
    assert r.status_code == 200 and secret in html and field_value(html, "webhook-url") == ""
