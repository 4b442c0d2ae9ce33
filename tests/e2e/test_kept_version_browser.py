"""A pinned version after delta-rs's zero-retention VACUUM, in headless Chromium under the app's
own CSP (issue 55 item 3, issue 57 item 7): its page says "kept by pin NAME" with Preview,
Compare, a row's history and Restore enabled; an unpinned vacuumed version's page says which pin
could have kept it; Compare warns before a diff whose side cannot be read; the Versions tab
lists every version, the vacuumed ones collapsed into one row. Screenshots in
test-output/screenshots/ (55-..., 57-07-...)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.pins import lifecycle as pins
from tables.services.sync import store as sync
from tests.e2e.test_browser import CHROMIUM
from tests.e2e.test_workbench_third import browser, expect, page_of, shot, user  # noqa: F401 (browser: a fixture)
from tests.web.kept_tables import orders_table, pin_place
from tests.web.versions.test_kept_version_pages import LOST, PIN_NAME, PINNED

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]


@pytest.fixture
def kept(live_server, transactional_db, settings, tmp_path, django_user_model):
    """Orders pinned at PINNED, vacuumed by delta-rs with retention 0, synced; an analyst."""
    path = orders_table(pin_place(settings, tmp_path) / "orders")
    table = registration.register_table("orders", str(path))
    sync.sync_table(table.pk)
    analyst = user(django_user_model, "ana", roles.ANALYST)
    pins.create_pin(table, PINNED, PIN_NAME, "Q3 close", analyst)
    DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    sync.sync_table(table.pk)
    table.refresh_from_db()
    return live_server.url, table


def test_the_kept_version_page_in_a_browser(browser, kept) -> None:  # noqa: F811 (the fixture)
    base, table = kept
    latest = table.last_synced_version
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/t/orders/v/{PINNED}/")
        note = page.locator("#version-kept")
        expect(note).to_contain_text(f"kept by pin {PIN_NAME}")
        expect(page.locator("#version-unreadable")).to_have_count(0)
        expect(page.get_by_role("button", name="Preview rows")).to_be_enabled()
        expect(note.get_by_role("link", name="compare with the latest version")).to_be_visible()
        expect(page.locator("#restore-this")).to_have_attribute("href", f"/t/orders/restore/?version={PINNED}")
        expect(page.locator("#row-history-link")).to_be_visible()
        expect(page.locator("#files")).to_contain_text(f"as pin {PIN_NAME} keeps them")
        shot(page, "55-kept-version-page")

        page.goto(f"{base}/t/orders/v/{LOST}/")
        expect(page.locator("#version-unreadable")).to_contain_text("of its data files were removed")
        expect(page.locator("#version-pin-hint")).to_contain_text("No pin holds it; a pin made before the VACUUM")
        expect(page.get_by_role("button", name="Preview rows")).to_be_disabled()
        shot(page, "55-unpinned-vacuumed-version-page")

        page.goto(f"{base}/t/orders/diff/?from={LOST}&to={latest}")
        expect(page.locator("#compare-unreadable-from")).to_contain_text(f"Version {LOST} of orders cannot be read")
        shot(page, "55-compare-warns-unreadable-side")

        page.goto(f"{base}/t/orders/versions/")
        listed = page.locator("#version-list")
        expect(listed.locator("#range-0-2")).to_contain_text("versions 0–2: files removed by VACUUM at version")
        expect(listed.locator(f"#version-{PINNED}")).to_contain_text(f"kept by pin {PIN_NAME}")
        listed.scroll_into_view_if_needed()
        shot(page, "57-07-versions-tab-ranges")
        assert errors == []
