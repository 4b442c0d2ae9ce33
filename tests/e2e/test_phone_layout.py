"""The workbench on a phone (a 390 px wide viewport in Debian's Chromium): no page is wider than
the screen (wide data tables scroll inside their own box), the navigation folds behind a
keyboard-operable "Menu" button (and, without JavaScript, wraps so "Sign out" stays on
screen), and the History tab's filters are folded behind a "Filters" disclosure. axe-core
reports no serious or critical violation on these pages. Screenshots:
test-output/screenshots/phones-390-*.png."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tables.models import Commit
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.restores.requests import request_restore
from tables.services.sync import store as sync
from tests.e2e import csp
from tests.e2e.test_browser import ARGS, CHROMIUM, SHOTS
from tests.e2e.test_workbench_browser import axe_source, serious_violations
from tests.web.ui_tables import ict_table

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")

WIDTH, HEIGHT = 390, 844
SCROLL_WIDTH = "document.documentElement.scrollWidth"


@pytest.fixture
def phone(live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch):
    """A signed-in analyst's browser, 390 px wide; start(js=True) opens a page."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("Clock", str(ict_table(tmp_path / "clock")), "ICT enabled part-way")
    sync.sync_table(table.pk)
    for i in range(2):
        registration.register_table(f"Other table with a long name {i}", str(ict_table(tmp_path / f"other{i}")))
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    restore = request_restore(table, user, version=2, reason="checked on a phone")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        contexts = []

        def start(js: bool = True):
            context = csp.new_context(
                browser, viewport={"width": WIDTH, "height": HEIGHT}, java_script_enabled=js, is_mobile=True
            )
            contexts.append(context)
            page = context.new_page()
            page.set_default_timeout(20_000)
            page.goto(live_server.url + "/accounts/login/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill("e2e-secret-pass")
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(live_server.url + "/")
            return page

        yield start, live_server.url, restore
        for context in contexts:
            csp.assert_no_violations(context)
            context.close()
        browser.close()


def fits(page) -> None:
    """Nothing makes the page wider than the screen."""
    assert page.evaluate(SCROLL_WIDTH) <= WIDTH, page.url


def test_pages_fit_a_phone_screen_and_pass_axe(phone) -> None:
    start, base, restore = phone
    page = start()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    source = axe_source()
    urls = {
        "list": "/",
        "overview": "/t/clock/",
        "history": "/t/clock/history/",
        "restores-tab": "/t/clock/restores/",
        "restore-form": "/t/clock/restore/?version=2",
        "restore-request": f"/restores/{restore.pk}/",
    }
    report = {}
    for name, url in urls.items():
        page.goto(base + url)
        fits(page)
        report[url] = serious_violations(page, source)
        page.screenshot(path=str(SHOTS / f"phones-390-{name}.png"), full_page=True)
    assert report == {url: [] for url in urls.values()}
    # a wide data table scrolls inside its own box, not the page
    page.goto(base + "/")
    box = page.locator("table.grid").evaluate("t => t.closest('.scroll').getBoundingClientRect().width")
    assert box <= WIDTH and page.locator("table.grid").evaluate("t => t.scrollWidth") > box
    assert errors == []


def test_history_filters_are_folded_on_a_phone(phone) -> None:
    expect = playwright_sync.expect
    start, base, _restore = phone
    page = start()
    page.goto(base + "/t/clock/history/")
    disclosure = page.locator("#history-filters")
    operation = page.get_by_label("Operation", exact=True)
    expect(operation).to_be_hidden()
    # the history itself starts on the first screen
    first_row = page.locator("table.history tbody tr").first
    assert first_row.bounding_box()["y"] < HEIGHT
    # opened by keyboard: the summary is focusable and Enter toggles it
    disclosure.locator("> summary").focus()
    page.keyboard.press("Enter")
    expect(operation).to_be_visible()
    fits(page)
    page.screenshot(path=str(SHOTS / "phones-390-history-filters-open.png"), full_page=True)
    operation.fill("WRITE")
    page.get_by_role("button", name="Filter").click()
    expect(disclosure.locator("> summary")).to_have_text("Filters (on)")
    writes = Commit.objects.filter(table__slug="clock", operation="WRITE").count()
    expect(page.locator("table.history tbody tr")).to_have_count(writes)


def test_menu_button_opens_the_navigation_by_keyboard(phone) -> None:
    expect = playwright_sync.expect
    start, base, _restore = phone
    page = start()
    page.goto(base + "/t/clock/")
    menu = page.get_by_role("button", name="Menu")
    sign_out = page.get_by_role("button", name="Sign out")
    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(sign_out).to_be_hidden()
    page.screenshot(path=str(SHOTS / "phones-390-menu-closed.png"))
    # Tab from the top of the page: the skip link, the brand, then the menu button
    for _ in range(5):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "menu-toggle":
            break
    expect(menu).to_be_focused()
    page.keyboard.press("Enter")
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(sign_out).to_be_visible()
    box = sign_out.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH  # on screen, not past its right edge
    fits(page)
    assert serious_violations(page, axe_source()) == []
    page.screenshot(path=str(SHOTS / "phones-390-menu-open.png"))
    page.keyboard.press("Escape")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(menu).to_be_focused()
    expect(sign_out).to_be_hidden()
    # the sign-out link is reachable and works
    menu.click()
    sign_out.click()
    expect(page.get_by_label("Username")).to_be_visible()


def test_without_javascript_the_navigation_wraps(phone) -> None:
    expect = playwright_sync.expect
    start, base, _restore = phone
    page = start(js=False)
    for url in ("/", "/t/clock/history/"):
        page.goto(base + url)
        expect(page.get_by_role("button", name="Menu")).to_be_hidden()
        sign_out = page.get_by_role("button", name="Sign out")
        expect(sign_out).to_be_visible()
        box = sign_out.bounding_box()
        assert box["x"] + box["width"] <= WIDTH
        fits(page)
    page.screenshot(path=str(SHOTS / "phones-390-no-js.png"))


def test_a_wide_screen_keeps_the_bar_and_the_filters_open(live_server, phone) -> None:
    expect = playwright_sync.expect
    start, base, _restore = phone
    page = start()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(base + "/t/clock/history/")
    expect(page.get_by_role("button", name="Menu")).to_be_hidden()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_label("Operation", exact=True)).to_be_visible()
    expect(page.locator("#history-filters > summary")).to_be_hidden()
