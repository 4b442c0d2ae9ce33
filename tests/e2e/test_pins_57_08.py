"""Issue 57 item 8, pins and approvals, in a real browser under the app's own CSP: the pin form
comes first in the version page's pins section; the analyst asks to remove their pin and
withdraws the request; the approver approves a removal on the pin's own admin page, with a
comment; the version page then shows the comment, and the removed pin no longer says it is
held by hard links. Screenshots: test-output/screenshots/57-08-*.png."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tables.models import Pin, PinState
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.core.builders import writable
from tests.e2e.test_workbench_third import (
    browser,  # noqa: F401 (a fixture)
    expect,
    page_of,
    pytestmark,  # noqa: F401 (Chromium, slow)
    shot,
    user,
)

VERSION = 5


@pytest.fixture
def events(live_server, transactional_db, settings, tmp_path, golden_copy, django_user_model):
    src = tmp_path / "tables"
    src.mkdir()
    settings.DELTAWEB_ALLOWED_ROOTS = [str(src)]
    settings.DELTAWEB_PIN_STORE = str(tmp_path / "pins")
    path = writable(golden_copy("basic-with-inserts-deletes-checkpoint")).rename(src / "events")
    table = registration.register_table("events", str(path))
    sync.sync_table(table.pk)
    call_command("create_roles")
    user(django_user_model, "ana", roles.ANALYST)
    appro = user(django_user_model, "appro", roles.APPROVER)
    appro.is_staff = True
    appro.save()
    return live_server.url, table


def test_57_08_pins_and_approvals(browser, events) -> None:  # noqa: F811
    base, table = events
    with page_of(browser, base, "ana", width=1280) as (page, errors):
        page.goto(f"{base}/t/{table.slug}/v/{VERSION}/")
        link = page.locator("#pin-this")  # in the page's heading, beside "Restore to this version"
        assert link.bounding_box()["y"] < 200
        link.click()
        expect(page.locator("#pin-form")).to_be_in_viewport()
        section, form = page.locator("#pins"), page.locator("#pin-form")
        top, at = section.bounding_box()["y"], form.bounding_box()["y"]
        assert at - top < 120, (top, at)  # the form opens the section, before any list
        form.get_by_label("Name").fill("quarter end")
        form.get_by_label("Reason").fill("Q4 close: finance reads this version")
        form.get_by_role("button", name=f"Pin version {VERSION}").click()
        expect(page.locator(".msg", has_text="is pinned as 'quarter end'")).to_be_visible()
        pin = Pin.objects.get(table=table, name="quarter end")
        row = page.locator(f"#pin-{pin.pk}")
        expect(row).to_contain_text("hard links")
        shot(page, "57-08-pin-form-first")

        # asked, then withdrawn by the same analyst
        row.get_by_label("Why remove pin quarter end").fill("the close is done")
        row.get_by_role("button", name="Ask to remove").click()
        expect(page.locator(f"#pin-{pin.pk}")).to_contain_text("removal requested")
        page.locator(f"#withdraw-{pin.pk}").click()
        expect(page.locator(".msg", has_text="your removal request is withdrawn")).to_be_visible()
        expect(page.locator(f"#pin-{pin.pk}")).to_contain_text("active")
        shot(page, "57-08-removal-withdrawn")
        pin.refresh_from_db()
        assert pin.state == PinState.ACTIVE and pin.events.last().note == "removal request withdrawn by its requester"

        # asked again, for the approver to decide
        page.locator(f"#pin-{pin.pk}").get_by_label("Why remove pin quarter end").fill("really done now")
        page.locator(f"#pin-{pin.pk}").get_by_role("button", name="Ask to remove").click()
        expect(page.locator(f"#pin-{pin.pk}")).to_contain_text("removal requested")
        assert errors == []

    with page_of(browser, base, "appro", width=1280) as (page, errors):
        page.goto(f"{base}/admin/tables/pin/{pin.pk}/change/")
        decision = page.locator("#pin-decision")
        expect(decision).to_contain_text("really done now")
        decision.get_by_label("Comment").fill("confirmed with finance")
        shot(page, "57-08-admin-pin-page-buttons")
        decision.get_by_role("button", name="Approve removal").click()
        expect(page.locator(".messagelist")).to_contain_text(f"Pin #{pin.pk} removed")
        expect(page.locator(".field-decision")).to_contain_text("confirmed with finance")
        expect(page.locator("#pin-approve")).to_have_count(0)
        shot(page, "57-08-admin-approved")
        assert errors == []

    with page_of(browser, base, "ana", width=1280) as (page, errors):
        page.goto(f"{base}/t/{table.slug}/v/{VERSION}/")
        row = page.locator(f"#pin-{pin.pk}")
        expect(row).to_contain_text("removal approved: confirmed with finance")
        expect(row.locator(".pin-held")).to_have_text("nothing: released, its kept files deleted")
        expect(row).not_to_contain_text("hard links")
        row.scroll_into_view_if_needed()
        shot(page, "57-08-removed-pin-and-comment")
        assert errors == []
