"""In a real browser (Debian's Chromium via Playwright) against the live server: a table page
shows a commit that lands while it is open, without a reload, and the activity page lists
the alert it fired. The page polls with If-None-Match: the server's 304s are counted."""

from __future__ import annotations

import pyarrow as pa
import pytest
from django.contrib.auth.models import Group

from alerts.detect import evaluate
from alerts.models import Scan
from tables.services.access import roles
from tables.services.sync import store as sync
from tests.alerts.conftest import register_and_sync
from tests.e2e.test_browser import ARGS, CHROMIUM, SHOTS

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
deltalake = pytest.importorskip("deltalake")


def test_table_page_shows_new_commits_without_reload(
    live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch
) -> None:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "orders"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2, 3]}))
    table = register_and_sync("orders", path)
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    expect = playwright_sync.expect
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page()
        page.set_default_timeout(20_000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        statuses: list[int] = []
        page.on("response", lambda r: statuses.append(r.status) if "/api/activity/" in r.url else None)
        page.goto(live_server.url + "/accounts/login/?next=/t/orders/")
        page.get_by_label("Username").fill("ana")
        page.get_by_label("Password").fill("e2e-secret-pass")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="orders")).to_be_visible()
        live = page.locator("#live-commits")
        expect(live).to_be_hidden()
        page.wait_for_timeout(6000)  # at least one poll that found nothing new
        assert 304 in statuses or statuses.count(200) >= 1

        # a commit lands and is synced while the page is open
        deltalake.DeltaTable(str(path)).delete()
        sync.sync_table(table.pk)
        evaluate.run_scan(Scan.objects.get(table=table).pk)
        expect(live).to_be_visible(timeout=20_000)
        expect(live.locator("[data-field=count]")).to_have_text("1")
        expect(live.locator("tbody tr")).to_have_count(1)
        expect(live.locator("tbody tr td").nth(2)).to_have_text("DELETE")
        page.screenshot(path=str(SHOTS / "alerts-01-live-commit.png"), full_page=True)
        assert statuses.count(304) >= 1, statuses

        # the activity page lists the alert, its log string as text
        live.get_by_role("link", name="Activity and alerts of this table").click()
        expect(page.get_by_role("heading", name="Activity")).to_be_visible()
        expect(page.locator("tbody[data-list=alerts]")).to_contain_text("DELETE without a predicate")
        page.screenshot(path=str(SHOTS / "alerts-02-activity.png"), full_page=True)
        assert errors == []
        browser.close()
