"""The Compare tab over a wide range in a real browser (Debian's Chromium): a delta-rs table of
a few hundred versions compared across its history is a page of bounded height (the long
lists a page at a time), the rows read on Spark are near its top, and axe-core reports no
serious or critical violation; on a phone it is no wider than the screen. Screenshots:
test-output/screenshots/compare-wide-range*.png."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.e2e.test_browser import CHROMIUM, SHOTS, signed_in_page
from tests.e2e.test_workbench_browser import axe_source, serious_violations
from tests.web.versions.test_compare_bounded import APPENDS, write_wide_table

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")

MAX_HEIGHT = 8000  # px at 1400 px wide (the report had 20,683 for 700 versions); about 6,900 now


def test_a_wide_range_is_a_page_of_bounded_height(
    live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch
) -> None:
    expect = playwright_sync.expect
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("Wide", str(write_wide_table(tmp_path / "wide")))
    sync.sync_table(table.pk)
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    SHOTS.mkdir(parents=True, exist_ok=True)
    with signed_in_page(live_server.url, "ana", "e2e-secret-pass") as (page, errors):
        page.goto(f"{live_server.url}/t/wide/diff/?from=0&to={APPENDS - 1}")
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height < MAX_HEIGHT, height
        assert page.locator("#rows").bounding_box()["y"] < 1000  # on the first screen
        expect(page.locator("#changes-meaning")).to_contain_text("the changes made by versions 0 through 299")
        expect(page.locator("#rowdiff-meaning")).to_contain_text("version 0's rows compared with version 299's")
        assert serious_violations(page, axe_source()) == []
        page.screenshot(path=str(SHOTS / "compare-wide-range.png"), full_page=True)
        # the table of contents leads to the commits; their next page keeps the place
        page.get_by_role("navigation", name="On this page").get_by_role("link", name="Commits in between").click()
        page.get_by_role("navigation", name="Pages of commits in between").get_by_role("link", name="next 50").click()
        expect(page).to_have_url(f"{live_server.url}/t/wide/diff/?from=0&to={APPENDS - 1}&commits_page=2#commits-title")
        expect(page.locator("#diff-commits tbody tr").first.locator("td").first).to_have_text("51")
        # folded partitions open by keyboard
        summary = page.locator("#files-added-partitions > summary")
        summary.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#files-added-partitions li").last).to_be_visible()
        # on a phone: no wider than the screen
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{live_server.url}/t/wide/diff/?from=0&to={APPENDS - 1}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.screenshot(path=str(SHOTS / "compare-wide-range-phone.png"))
        assert errors == []
