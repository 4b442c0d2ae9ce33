"""Issue 57, items 9 and 10, in a real browser under the app's own CSP: the table page links to
the shares it is in, the schema is a tab of its own, the Overview has no promotional card, and
discovery ticks nothing by itself ("Tick all" / "tick none" through discover.js) and lists the
tables it cannot read apart, with why. Screenshots in test-output/screenshots/ (57-09-...,
57-10-...)."""

from __future__ import annotations

from typing import Any

import pytest

from tables.models import Share, SharedTable, Table
from tests.e2e import test_workbench_third as third
from tests.e2e.test_browser import CHROMIUM
from tests.e2e.test_workbench_third import PASSWORD, page_of, shot
from tests.web.ui_tables import ict_table

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")
expect = playwright_sync.expect
browser, clock = third.browser, third.clock  # the third pass's fixtures: one Chromium, the Clock table


def test_57_09_the_table_page_links_to_its_shares(browser: Any, clock, django_user_model) -> None:
    base, table = clock
    share = Share.objects.create(name="finance")
    SharedTable.objects.create(share=share, schema="q4", name="clock", table=table, first_version=1)
    django_user_model.objects.create_superuser("root", password=PASSWORD)
    with page_of(browser, base, "ana") as (page, errors):  # an analyst: the names, no admin link
        page.goto(f"{base}/t/clock/history/")
        expect(page.locator("#table-shares")).to_contain_text("finance as finance.q4.clock (versions from 1)")
        expect(page.locator("#table-shares a")).to_have_count(0)
        assert errors == []
    with page_of(browser, base, "root") as (page, errors):
        page.goto(f"{base}/t/clock/")
        link = page.locator("#table-shares").get_by_role("link", name="finance")
        expect(link).to_be_visible()
        shot(page, "57-09-shares-link")
        link.click()
        expect(page).to_have_url(f"{base}/admin/tables/share/{share.pk}/change/")
        expect(page.locator("#content")).to_contain_text("finance")
        assert errors == []


def test_57_10_no_promotional_card_and_the_schema_tab(browser: Any, clock) -> None:
    base, _table = clock
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/t/clock/")
        expect(page.get_by_text("Answers no other Delta tool gives")).to_have_count(0)
        expect(page.locator("#schema-timeline-link")).to_be_visible()
        shot(page, "57-10-overview-no-promo")
        tabs = page.get_by_role("navigation", name="Table sections")
        tabs.get_by_role("link", name="Schema").click()
        expect(page).to_have_url(f"{base}/t/clock/schema/")
        expect(tabs.locator('[aria-current="page"]')).to_have_text("Schema")
        expect(page.locator("#schema-as-of")).to_be_visible()
        shot(page, "57-10-schema-tab")
        assert errors == []


def test_57_10_discovery_ticks_nothing_and_lists_unreadable_tables_apart(browser: Any, clock, tmp_path) -> None:
    base, _table = clock
    ict_table(tmp_path / "fresh")
    ict_table(tmp_path / "second")
    ict_table(tmp_path / "broken")
    for f in (tmp_path / "broken" / "_delta_log").glob("*.json"):
        f.write_text("not JSON at all\n")
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/tables/discover/?prefix={tmp_path}")
        boxes = page.locator('#discover-form input[type="checkbox"][name="location"]')
        expect(boxes).to_have_count(2)
        for i in range(2):
            expect(boxes.nth(i)).not_to_be_checked()
        expect(page.locator("#discover-counts")).to_contain_text("2 new, 1 registered already")
        expect(page.locator("#discover-counts")).to_contain_text("1 unreadable")
        apart = page.locator("#discover-unreadable")
        expect(apart.locator("tbody tr")).to_have_count(1)
        expect(apart).to_contain_text("broken")
        expect(apart).to_contain_text("not valid JSON")
        expect(page.locator("#discover-form")).not_to_contain_text(str(tmp_path / "broken"))
        url = page.url
        page.get_by_role("link", name="Tick all").click()  # discover.js: no reload
        expect(page).to_have_url(url)
        for i in range(2):
            expect(boxes.nth(i)).to_be_checked()
        expect(page.locator("#discover-ticked")).to_have_text("2 ticked")
        shot(page, "57-10-discovery")
        page.get_by_role("link", name="tick none").click()
        for i in range(2):
            expect(boxes.nth(i)).not_to_be_checked()
        page.get_by_role("checkbox", name="register fresh").check()
        page.get_by_role("button", name="Register the ticked tables").click()
        expect(page.get_by_text("Registered 1 table")).to_be_visible()
        assert sorted(Table.objects.values_list("name", flat=True)) == ["Clock", "fresh"]
        assert errors == []
