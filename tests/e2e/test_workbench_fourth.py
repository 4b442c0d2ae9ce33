"""The workbench's fourth pass (issue 57) in a real browser under the app's own CSP, at the
laptop sizes the issue was walked at (1,280×800 and 1,366 wide): History as complete as
DESCRIBE HISTORY (item 6) and the tables list with 116 tables (item 4). Screenshots in
test-output/screenshots/ named after the item (57-06-..., 57-04-...)."""

from __future__ import annotations

import re
import time
from typing import Any

import pyarrow as pa
import pytest

from tables.models import Commit, Table
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.e2e.test_browser import CHROMIUM, SHOTS
from tests.e2e.test_workbench_third import browser, page_of, shot, user  # noqa: F401  (the module's Chromium)
from tests.web.history.test_history_fourth import COMMITS, spark_like_table
from tests.web.ui_tables import DESCRIBE_HISTORY_DETAILS

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
deltalake = pytest.importorskip("deltalake")
expect = playwright_sync.expect
LAPTOP = {"width": 1280, "height": 800}


@pytest.fixture
def spark_history(live_server, transactional_db, settings, tmp_path, django_user_model):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.CELERY_TASK_ALWAYS_EAGER = True  # a working task queue: no "background work is paused" banner
    path = spark_like_table(tmp_path / "events")
    table = registration.register_table("Events", str(path), "a Spark-written table")
    sync.sync_table(table.pk)
    user(django_user_model, "ana", roles.ANALYST)
    return live_server.url, Table.objects.get(pk=table.pk)


def visible_rows(page: Any) -> int:
    """History rows wholly inside the viewport (and inside their own scrolling box)."""
    return page.evaluate(
        """() => {
          const h = window.innerHeight, box = document.querySelector('.history-scroll').getBoundingClientRect();
          return [...document.querySelectorAll('table.history tbody tr')].filter(r => {
            const b = r.getBoundingClientRect();
            return b.top >= 0 && b.bottom <= Math.min(h, box.bottom) + 0.5 && b.height > 0;
          }).length;
        }"""
    )


def test_57_06_history_first_screen_sticky_header_and_compact_filters(browser, spark_history) -> None:  # noqa: F811
    base, _table = spark_history
    with page_of(browser, base, "ana", width=LAPTOP["width"]) as (page, errors):
        page.set_viewport_size(LAPTOP)
        page.goto(f"{base}/t/events/history/")
        # the filter bar: operation, user and parameters at hand; the metric range folded
        for label in ("Operation", "User", "Parameters contain"):
            expect(page.get_by_label(label, exact=True)).to_be_visible()
        expect(page.get_by_label("Metric", exact=True)).to_be_hidden()
        bar = page.locator("#history-filter-form").bounding_box()
        assert bar["height"] < 140, bar
        page.screenshot(path=str(SHOTS / "57-06-history-first-screen.png"))  # the first screen, as seen
        shown = visible_rows(page)
        assert shown >= 12, f"{shown} commits on the first screen at 1,280×800"
        # the header row stays in view while the commits scroll
        page.locator(".history-scroll").evaluate("b => b.scrollTop = 1500")
        head = page.locator("table.history thead th").first
        first_row = page.locator("table.history tbody tr").first
        box = page.locator(".history-scroll").bounding_box()
        assert first_row.bounding_box()["y"] < box["y"]  # scrolled past
        top = head.bounding_box()["y"]
        assert box["y"] - 1 <= top <= box["y"] + 2 and 0 <= top < LAPTOP["height"], (top, box)
        assert head.evaluate("e => getComputedStyle(e).position") == "sticky"
        page.screenshot(path=str(SHOTS / "57-06-history-sticky-header.png"))  # the screen, not the page
        assert errors == []


def test_57_06_jump_to_a_time_lands_highlighted_and_says_the_version(browser, spark_history) -> None:  # noqa: F811
    base, table = spark_history
    when = Commit.objects.get(table=table, version=37).timestamp + 30_000  # half a minute after 37
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when / 1000)) + "Z"
    with page_of(browser, base, "ana", width=LAPTOP["width"]) as (page, errors):
        page.set_viewport_size(LAPTOP)
        page.goto(f"{base}/t/events/history/")
        page.get_by_label("Go to time").fill(iso)
        page.locator("#history-jump-time").get_by_role("button", name="Go").click()
        said = page.locator("#history-jumped")
        expect(said).to_contain_text(f"{iso} → version 37")
        row = page.locator("#v37")
        expect(row).to_be_in_viewport()
        assert row.evaluate("r => r.matches(':target')")
        colour = row.locator("td").nth(1).evaluate("c => getComputedStyle(c).backgroundColor")
        other = page.locator("#v38 td").nth(1).evaluate("c => getComputedStyle(c).backgroundColor")
        assert colour != other and colour not in ("rgba(0, 0, 0, 0)", "transparent")
        # the highlighted row is below the sticky header, not under it
        head = page.locator("table.history thead").bounding_box()
        assert row.bounding_box()["y"] >= head["y"] + head["height"] - 1
        shot(page, "57-06-history-jump-to-time")
        # "Go to version" says so too
        page.get_by_label("Go to version").fill("5")
        page.locator("#history-jump").get_by_role("button", name="Go").click()
        expect(page.locator("#history-jumped")).to_contain_text("→ version 5")
        expect(page.locator("#v5")).to_be_in_viewport()
        assert errors == []


def test_57_06_filters_columns_and_compare_two(browser, spark_history) -> None:  # noqa: F811
    base, _table = spark_history
    with page_of(browser, base, "ana", width=LAPTOP["width"]) as (page, errors):
        page.set_viewport_size(LAPTOP)
        page.goto(f"{base}/t/events/history/")
        # user, parameters, and a metric's range behind "More filters"
        page.get_by_label("User", exact=True).fill("bob@")
        page.get_by_label("Parameters contain", exact=True).fill("region")
        page.locator("#more-filters > summary").click()
        page.get_by_label("Metric", exact=True).fill("numOutputRows")
        page.get_by_label("at least", exact=True).fill("100")
        page.get_by_label("at most", exact=True).fill("700")
        page.get_by_role("button", name="Filter").click()
        expected = sorted(
            (v for v in range(1, COMMITS) if v % 4 == 1 and v % 3 == 2 and 100 <= v * 10 <= 700), reverse=True
        )
        assert expected  # 5, 17, 29, 41, 53, 65 within the bounds: 17, 29, 41, 53, 65
        got = [
            int(x)
            for x in page.locator("table.history tbody tr[id^=v]").evaluate_all("rs => rs.map(r => r.id.slice(1))")
        ]
        assert got == expected
        expect(page.locator("#more-filters")).to_have_attribute("open", "")
        shot(page, "57-06-history-filters")
        # every DESCRIBE HISTORY column in the chooser
        page.goto(f"{base}/t/events/history/")
        page.locator("#column-chooser summary").click()
        offered = page.locator('#column-chooser input[name="cols"]').evaluate_all("bs => bs.map(b => b.value)")
        for name in DESCRIBE_HISTORY_DETAILS:
            assert name in offered, name
        for name in ("userId", "clusterId", "notebook"):
            page.locator(f'#column-chooser input[value="{name}"]').check()
        page.get_by_role("button", name="Filter").click()
        head = page.locator("table.history thead")
        for name in ("userId", "clusterId", "notebook"):
            expect(head).to_contain_text(name)
        expect(page.locator("#v117")).to_contain_text("0601-cluster-0")
        expect(page.locator("#v117")).to_contain_text("nb-1")
        # pick two rows → compare
        link = page.get_by_role("link", name="Compare these two")
        page.get_by_label("Pick version 110 to compare").check()
        page.get_by_label("Pick version 101 to compare").check()
        expect(page.locator("#compare-picked")).to_have_text("Versions 101 and 110 picked.")
        assert link.get_attribute("href") == "/t/events/diff/?from=101&to=110"
        shot(page, "57-06-history-compare-two")
        link.click()
        expect(page).to_have_url(f"{base}/t/events/diff/?from=101&to=110")
        expect(page.get_by_role("heading", name="From version 101 to version 110")).to_be_visible()
        assert errors == []


def test_57_06_effective_retention_on_the_overview(browser, spark_history) -> None:  # noqa: F811
    base, _table = spark_history
    with page_of(browser, base, "ana", width=LAPTOP["width"]) as (page, errors):
        page.set_viewport_size(LAPTOP)
        page.goto(f"{base}/t/events/")
        said = page.locator("#retention")
        expect(said).to_contain_text("commits kept by log cleanup 30 days (default)")
        expect(said).to_contain_text("removed files kept by VACUUM 7 days (default)")
        said.scroll_into_view_if_needed()
        shot(page, "57-06-overview-retention")
        assert errors == []


# --- item 4: the tables list at 1,280–1,366 px, 116 tables -----------------------------------


@pytest.fixture
def fleet_116(live_server, transactional_db, settings, tmp_path, django_user_model):
    """116 tables: most synced, a few whose location lost its log (a sync error naming the cause)."""
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.CELERY_TASK_ALWAYS_EAGER = True  # a working task queue: no "background work is paused" banner
    for i in range(116):
        path = tmp_path / f"warehouse_sales_region_{i:03d}"
        deltalake.write_deltalake(str(path), pa.table({"x": [i]}))
        t = registration.register_table(f"warehouse_sales_region_{i:03d}", str(path))
        if i % 29 == 0:  # its log gone before the sync: the error says why
            for f in (path / "_delta_log").iterdir():
                f.unlink()
            (path / "_delta_log").rmdir()
        sync.sync_table(t.pk)
    user(django_user_model, "ana", roles.ANALYST)
    return live_server.url


def test_57_04_table_list_fits_1280_and_1366_and_errors_say_why(browser, fleet_116) -> None:  # noqa: F811
    base = fleet_116
    failed = Table.objects.exclude(last_error="").order_by("name").first()
    assert failed is not None and failed.last_error.startswith(failed.name + ": ")
    cause = failed.last_error.removeprefix(failed.name + ": ")
    for width in (1366, 1280):
        with page_of(browser, base, "ana", width=width) as (page, errors):
            page.set_viewport_size({"width": width, "height": 800})
            page.goto(f"{base}/?sort=name")
            shot(page, f"57-04-table-list-{width}")
            buttons = page.get_by_role("button", name="Sync now")
            assert buttons.count() >= 20
            for b in buttons.all():
                box = b.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (width, box)
                # not clipped by the table's scrolling box either
                clip = b.evaluate("b => b.closest('.scroll').getBoundingClientRect().right")
                assert box["x"] + box["width"] <= clip + 0.5, (width, box, clip)
            assert page.evaluate("() => document.documentElement.scrollWidth") <= width
            # every column on the screen: the list does not scroll sideways, nothing under the sticky column
            assert (
                page.locator("table.fleet").evaluate(
                    "t => t.closest('.scroll').scrollWidth - t.closest('.scroll').clientWidth"
                )
                <= 1
            )
            cell = page.locator("tr", has=page.get_by_role("link", name=failed.name, exact=True)).locator("td.error")
            shown = cell.locator(".cause")
            expect(shown).to_be_visible()
            text = shown.inner_text()
            assert not text.startswith(failed.name) and text.split("…")[0][:20] in cause, text
            assert errors == []


# --- item 3: one time format, converted everywhere when the viewer chose their zone ------------

ISO_NEW_YORK = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?-0[45]:00$")
UTC_TEXT = re.compile(r"\d\d:\d\d(:\d\d)?(\.\d+)?Z\b|\d\d:\d\d(:\d\d)? UTC\b")


def test_57_03_one_time_format_in_new_york(browser, spark_history, django_user_model) -> None:  # noqa: F811
    from tables.models import Recipient, RecipientQuery, Share, SharedTable

    base, table = spark_history
    share = Share.objects.create(name="s1")
    SharedTable.objects.create(share=share, table=table, schema="sc", name="events")
    recipient = Recipient.objects.create(name="acme")
    RecipientQuery.objects.create(recipient=recipient, table=table, shared_as="s1.sc.events", kind="query", files=1)
    django_user_model.objects.create_user("root", password="pw-root-1", is_staff=True, is_superuser=True)
    with page_of(browser, base, "root", width=LAPTOP["width"], timezone_id="America/New_York") as (page, errors):
        page.set_viewport_size(LAPTOP)
        page.goto(f"{base}/t/events/v/5/")
        page.get_by_role("button", name="Use my time zone (America/New_York)").click()
        for url in ("/t/events/v/5/", "/t/events/", "/t/events/history/"):
            page.goto(base + url)
            shown = page.locator("main time").all_inner_texts()
            assert shown and all(ISO_NEW_YORK.match(t) for t in shown), (url, shown)
            # no time written another way beside them (the commit's bytes "first seen", sharing queries)
            text = page.locator("main").evaluate(
                "m => { const c = m.cloneNode(true); c.querySelectorAll('pre, code').forEach(e => e.remove());"
                " document.body.appendChild(c); const t = c.innerText; c.remove(); return t; }"
            )  # SQL to copy keeps its UTC literal: it is code, not a time shown
            assert not UTC_TEXT.search(text), (url, UTC_TEXT.search(text))
            if url == "/t/events/v/5/":
                expect(page.locator("main")).to_contain_text("first seen on")
                shot(page, "57-03-version-page-new-york")
            if url == "/t/events/":
                expect(page.locator("#recipient-queries thead")).to_contain_text("When")
        # the admin's token page: the same format, converted too
        page.goto(f"{base}/admin/tables/recipient/")
        page.locator(f'input[name="_selected_action"][value="{recipient.pk}"]').check()
        page.locator('select[name="action"]').select_option("issue_token")
        page.locator('button[title="Run the selected action"]').click()
        until = page.locator("#content time")
        expect(until).to_have_count(1)
        expect(until).to_have_text(ISO_NEW_YORK)  # converted by the page once it has loaded
        shot(page, "57-03-token-valid-until-new-york")
        assert errors == []
