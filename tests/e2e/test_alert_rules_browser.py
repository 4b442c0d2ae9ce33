"""Alert rules and webhooks in a real browser (Debian's Chromium): an administrator adds a rule
by keyboard on the rules page (a refused one comes back with what was typed, the reason beside
its field and the focus on it), edits it and switches it off; a user without a role gets a 403; the
settings page's webhook form keeps its fields after a refused address. axe-core reports no
serious or critical violation. Screenshots: test-output/screenshots/alerts-rules-*.png and
alerts-webhook-refused.png."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group

from alerts.models import CustomRule, WebhookEndpoint
from tables.models import Table
from tables.services.access import roles
from tests.e2e import csp
from tests.e2e.test_browser import ARGS, CHROMIUM, SHOTS
from tests.e2e.test_workbench_browser import axe_source, serious_violations

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")


@pytest.fixture
def signed_in(live_server, transactional_db, django_user_model, monkeypatch):
    """sign_in(username) -> a page of a browser signed in as that user (root: staff; ana: analyst; vic: no role)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    Table.objects.create(name="orders", slug="orders", location="/nowhere/orders")
    django_user_model.objects.create_user("root", password="e2e-secret-pass", is_staff=True)
    ana = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    ana.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    django_user_model.objects.create_user("vic", password="e2e-secret-pass")  # signed in, no role
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        contexts = []

        def sign_in(username: str, width: int = 1280):
            context = csp.new_context(browser, viewport={"width": width, "height": 900})
            contexts.append(context)
            page = context.new_page()
            page.set_default_timeout(20_000)
            page.goto(live_server.url + "/accounts/login/")
            page.get_by_label("Username").fill(username)
            page.get_by_label("Password").fill("e2e-secret-pass")
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(live_server.url + "/")
            return page

        yield sign_in, live_server.url
        for context in contexts:
            csp.assert_no_violations(context)
            context.close()
        browser.close()


def test_an_administrator_adds_edits_and_switches_off_a_rule(signed_in) -> None:
    expect = playwright_sync.expect
    sign_in, base = signed_in
    page = sign_in("root")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    source = axe_source()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Alert rules").click()
    expect(page.get_by_role("heading", name="Alert rules", exact=True)).to_be_visible()

    # a rule without a condition: refused, what was typed kept, the focus on the field at fault
    page.get_by_label("Name", exact=True).fill("big deletes")
    page.get_by_label("Table").select_option("orders")
    page.get_by_label("Severity").select_option("critical")
    page.get_by_role("button", name="Add the rule").click()
    operation = page.get_by_label("Operation")
    expect(operation).to_be_focused()
    expect(operation).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#rule_operation-error")).to_contain_text("needs a condition")
    expect(page.get_by_label("Name", exact=True)).to_have_value("big deletes")
    expect(page.get_by_label("Table")).to_have_value("orders")
    expect(page.get_by_label("Severity")).to_have_value("critical")
    assert serious_violations(page, source) == []
    page.screenshot(path=str(SHOTS / "alerts-rules-refused.png"), full_page=True)
    # typed where the focus is, sent with Enter
    page.keyboard.type("DELETE")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/alerts/rules/#rule-\d+$"))
    rule = CustomRule.objects.get()
    assert page.url == f"{base}/alerts/rules/#rule-{rule.pk}"
    row = page.locator(f"#rule-{rule.pk}")
    expect(row).to_contain_text("operation DELETE")
    expect(row).to_contain_text("orders")

    # edit it: every table, warning
    row.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("Operation")).to_have_value("DELETE")
    page.get_by_label("Table").select_option("")
    page.get_by_label("Severity").select_option("warning")
    assert serious_violations(page, source) == []
    page.screenshot(path=str(SHOTS / "alerts-rules-edit.png"), full_page=True)
    page.get_by_role("button", name="Save the rule").click()
    expect(row).to_contain_text("every table")
    rule.refresh_from_db()
    assert rule.table is None and rule.severity == "warning"

    # switched off by keyboard
    switch = row.get_by_role("button", name="Switch off")
    switch.focus()
    page.keyboard.press("Enter")
    # the page after the switch offers to switch it on again ("off" is in the button before)
    expect(row.get_by_role("button", name="Switch on")).to_be_visible()
    rule.refresh_from_db()
    assert rule.enabled is False
    assert serious_violations(page, source) == []
    page.screenshot(path=str(SHOTS / "alerts-rules-list.png"), full_page=True)
    assert errors == []

    # on a phone: no wider than the screen
    phone = sign_in("root", width=390)
    phone.goto(base + "/alerts/rules/")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    phone.screenshot(path=str(SHOTS / "alerts-rules-phone.png"), full_page=True)


def test_a_user_without_a_role_gets_a_403(signed_in) -> None:
    sign_in, base = signed_in
    page = sign_in("vic")
    response = page.goto(base + "/alerts/rules/")
    assert response.status == 403
    assert page.get_by_role("navigation", name="Main").get_by_role("link", name="Alert rules").count() == 0


def test_a_refused_webhook_keeps_its_fields(signed_in) -> None:
    expect = playwright_sync.expect
    sign_in, base = signed_in
    page = sign_in("ana")
    page.goto(base + "/alerts/settings/")
    form = page.locator("#add-webhook")
    form.get_by_label("Name").fill("ops hook")
    form.get_by_label("URL").fill("http://10.1.2.3/deltaweb")
    form.get_by_role("button", name="Add webhook").click()
    form = page.locator("#add-webhook")
    expect(form.get_by_label("Name")).to_have_value("ops hook")
    url = form.get_by_label("URL")
    expect(url).to_have_value("http://10.1.2.3/deltaweb")
    expect(url).to_be_focused()
    expect(page.locator("#webhook-url-error")).to_contain_text("internal address")
    assert WebhookEndpoint.objects.count() == 0
    assert serious_violations(page, axe_source()) == []
    page.locator("#add-webhook").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "alerts-webhook-refused.png"), full_page=True)
