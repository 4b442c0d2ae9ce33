"""The workbench's third pass (issue 46) in a real browser under the app's own CSP: each
numbered item checked as a user would check it, with a screenshot named after the item in
test-output/screenshots/ (46-NN-....png). One Chromium for the module; each test opens its own
signed-in context on pytest-django's live server (one server for the session)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from tables.models import FileRemovalEvent, Job, RestoreRequest, SyncState, Table
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.jobs import lifecycle as jobs
from tables.services.restores.requests import request_restore
from tables.services.sync import store as sync
from tests.e2e import csp
from tests.e2e.test_browser import ARGS, CHROMIUM, SHOTS
from tests.web.ui_tables import ict_table

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")
expect = playwright_sync.expect
PASSWORD = "e2e-secret-pass"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Playwright's sync API keeps an event loop on this thread; the tests' own ORM calls are sync
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with playwright_sync.sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            yield chromium
            chromium.close()


@contextmanager
def page_of(
    browser: Any, base: str, username: str | None, *, width: int = 1366, **options: Any
) -> Iterator[tuple[Any, list[str]]]:
    """A page (signed in as `username` unless None) under the app's CSP, and its error list."""
    errors: list[str] = []
    context = csp.new_context(browser, sink=errors, viewport={"width": width, "height": 900}, **options)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        if username:  # signed in as Django's test client signs in (the form is tested elsewhere)
            client = Client()
            client.force_login(get_user_model().objects.get(username=username))
            cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base}])
        yield page, errors
        csp.assert_no_violations(context)
    finally:
        context.close()


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def user(django_user_model, name: str, role: str | None):
    u = django_user_model.objects.create_user(name, password=PASSWORD)
    if role:
        u.groups.add(Group.objects.get_or_create(name=role)[0])
    return u


@pytest.fixture
def clock(live_server, transactional_db, settings, tmp_path, django_user_model):
    """The Clock table (ICT part-way, partitioned by p) synced, and an analyst."""
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("Clock", str(ict_table(tmp_path / "clock")), "ICT enabled part-way")
    sync.sync_table(table.pk)
    user(django_user_model, "ana", roles.ANALYST)
    return live_server.url, table


def test_01_partition_preview_needs_no_reason(browser, clock) -> None:
    base, _table = clock
    with page_of(browser, base, "ana") as (page, errors):
        # the Restores tab's own form lists the partitions, before anything is requested
        page.goto(f"{base}/t/clock/restores/")
        card = page.locator("#request-restore")
        card.get_by_label("Only the partitions where").fill("p = 'a'")
        card.get_by_role("button", name="Show the partitions it selects").click()
        listed = page.locator("#selected-partitions")
        expect(listed).to_contain_text("1 partition of the latest version matches")
        expect(listed).to_contain_text("p=a")
        expect(page.get_by_label("Only the partitions where")).to_have_value("p = 'a'")
        expect(page.locator(".field.invalid")).to_have_count(0)  # no "Reason is required"
        shot(page, "46-01-restore-partition-preview")
        # a column that is not a partition column is refused by name, on the predicate field
        page.get_by_label("Only the partitions where").fill("x = 1")
        page.get_by_role("button", name="Show the partitions it selects").click()
        expect(page.locator(".field.invalid")).to_have_count(1)
        expect(page.locator(".field.invalid")).to_contain_text("not a partition column")
        assert not RestoreRequest.objects.exists()
        assert errors == []


def test_04_sign_in_says_how(browser, live_server, transactional_db, settings) -> None:
    settings.DELTAWEB_DEMO = True
    with page_of(browser, live_server.url, None) as (page, errors):
        page.goto(live_server.url + "/accounts/login/")
        expect(page.locator("#sign-in-help")).to_contain_text("Single sign-on is not set up")
        demo = page.locator("#demo-users")
        expect(demo).to_contain_text("analyst")
        expect(demo).to_contain_text("printed once by make run")
        expect(demo).to_contain_text("DELTAWEB_DEMO_PASSWORD")
        shot(page, "46-04-sign-in")
        settings.DELTAWEB_DEMO = False  # a real deployment names no demo user
        page.reload()
        expect(page.locator("#sign-in-help")).to_be_visible()
        expect(page.locator("#demo-users")).to_have_count(0)
        assert errors == []


def test_05_an_analyst_changes_alert_rules(browser, clock, django_user_model) -> None:
    base, _table = clock
    user(django_user_model, "vic", None)
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(base + "/alerts/settings/")
        page.get_by_role("link", name="Alert rules").first.click()
        expect(page).to_have_url(base + "/alerts/rules/")
        page.get_by_label("Name", exact=True).fill("big merges")
        page.get_by_label("Operation").fill("MERGE")
        page.get_by_role("button", name="Add the rule").click()
        expect(page.locator("#rules")).to_contain_text("big merges")
        shot(page, "46-05-alert-rules-analyst")
        assert errors == []
    with page_of(browser, base, "vic") as (page, errors):
        assert page.goto(base + "/alerts/rules/").status == 403
        expect(page.get_by_text("changed by analysts, approvers and administrators")).to_be_visible()
        assert page.get_by_role("link", name="Alert rules").count() == 0


PLACEHOLDER_FITS = """(el) => {
  const cs = getComputedStyle(el), c = document.createElement("canvas").getContext("2d");
  c.font = cs.font;
  const room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  return c.measureText(el.placeholder).width <= room;
}"""


def test_08_vacuumed_versions_are_marked(browser, clock) -> None:
    """Clock's versions 4 and 5 name files that were never written: unreadable, as vacuumed."""
    base, table = clock
    FileRemovalEvent.objects.create(
        table=table, noticed_at=timezone.now(), version=5, files=2, bytes=2468, unreadable=[[4, 5]],
        unreadable_count=2, unreadable_from=4, unreadable_to=5, vacuum_end_version=5, vacuum_user="ops",
    )  # fmt: skip
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/t/clock/versions/")
        latest = page.locator("#version-list")  # versions 5 and 4, one row: their files are gone
        expect(latest.locator(".badge.unreadable")).to_have_count(1)
        expect(latest.locator("#range-4-5")).to_contain_text("versions 4–5: files removed by VACUUM at version 5")
        expect(latest.get_by_role("link", name="3", exact=True)).to_be_visible()
        field = page.get_by_label("Version", exact=True)
        assert field.evaluate(PLACEHOLDER_FITS), "the version field's placeholder is cut"
        expect(page.locator("#ov-range")).to_have_text("versions 0 to 5")
        shot(page, "46-08-vacuumed-versions")
        # an unreadable version's SQL says it fails
        page.goto(f"{base}/t/clock/v/5/")
        expect(page.locator("#sql-unreadable")).to_contain_text("These queries fail now")
        page.goto(f"{base}/t/clock/v/3/")
        expect(page.locator("#sql-unreadable")).to_have_count(0)
        # the History banner is headed by what removed the files
        page.goto(f"{base}/t/clock/history/")
        banner = page.locator("#file-removals")
        expect(banner).to_contain_text("Files removed by VACUUM.")
        expect(banner.get_by_role("link", name="version 5")).to_be_visible()
        assert errors == []


ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$")
ISO_PARIS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?\+01:00$")  # November: CET


def times_on(page: Any) -> list[str]:
    return page.locator("time").all_inner_texts()


def test_10_one_time_format(browser, clock, django_user_model) -> None:
    base, _table = clock
    django_user_model.objects.create_user("root", password=PASSWORD, is_staff=True, is_superuser=True)
    with page_of(browser, base, "root", timezone_id="Europe/Paris") as (page, errors):
        for url in ("/", "/t/clock/", "/t/clock/history/"):
            page.goto(base + url)
            shown = times_on(page)
            assert shown and all(ISO_UTC.match(t) for t in shown), (url, shown)
        # the History date filter: ISO dates typed as shown, one stop each
        date_from = page.get_by_label("Date from (UTC)")
        assert date_from.get_attribute("type") == "text"
        expect(date_from).to_have_attribute("placeholder", "yyyy-mm-dd")
        date_from.fill("2000-01-01")
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("table.history tbody tr")).to_have_count(6)
        expect(page.get_by_label("Date from (UTC)")).to_have_value("2000-01-01")
        # the viewer's zone, on request, remembered from page to page
        page.get_by_role("button", name="Use my time zone (Europe/Paris)").click()
        shown = times_on(page)
        assert shown and all(ISO_PARIS.match(t) for t in shown), shown
        first = page.locator("table.history time").first
        assert ISO_UTC.match(first.get_attribute("title").removesuffix(" (UTC)"))
        shot(page, "46-10-time-format")
        page.goto(base + "/")
        assert all(ISO_PARIS.match(t) for t in times_on(page))
        page.get_by_role("button", name="Use UTC").click()
        assert all(ISO_UTC.match(t) for t in times_on(page))
        # the admin writes times the same way, not "Nov. 28, 2026, 5:38 p.m."
        page.goto(base + "/admin/tables/table/")
        synced = page.locator("td.field-last_synced_at").first.inner_text()
        assert ISO_UTC.match(synced), synced
        assert errors == []


def test_14_a_restore_plan_speaks_plainly(browser, clock, django_user_model) -> None:
    base, table = clock
    ana = django_user_model.objects.get(username="ana")
    req = request_restore(table, ana, reason="bad load", version=2)  # v3 enabled ICT: the latest protocol is kept
    assert req.plan["protocolOutcome"] == "merged"
    django_user_model.objects.create_user("root", password=PASSWORD, is_staff=True, is_superuser=True)
    with page_of(browser, base, "root") as (page, errors):
        page.goto(f"{base}/restores/{req.pk}/")
        expect(page.locator("#plan-protocol-outcome")).to_have_text("unchanged (latest kept)")
        expect(page.locator("#plan-stats")).not_to_contain_text("merged")
        shot(page, "46-14-restore-plan-protocol")
        page.goto(f"{base}/admin/tables/restorerequest/")
        expect(page.locator("td.field-protocol").first).to_have_text("unchanged (latest kept)")
        assert errors == []


def test_02_register_checks_as_typed_and_follows_its_sync(browser, clock, tmp_path, monkeypatch) -> None:
    base, _table = clock
    monkeypatch.setattr(jobs, "send", lambda *args, **_kw: None)  # queued, as before a worker takes it; run below
    fresh = ict_table(tmp_path / "fresh")
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(base + "/tables/register/")
        location, said = page.get_by_label("Location"), page.locator("#location-check")
        for typed, words in (
            ("/etc/passwd", "outside the allowed roots"),
            (str(tmp_path / "missing"), "does not exist"),
            (str(tmp_path / "clock"), "registered already as 'Clock'"),
        ):
            location.fill(typed)
            expect(said).to_contain_text(words)  # before any submit
            expect(location).to_have_attribute("aria-invalid", "true")
        expect(said.get_by_role("link", name="Open Clock")).to_be_visible()
        shot(page, "46-02-register-inline-check")
        location.fill(str(fresh))
        expect(said).to_contain_text("A Delta table")
        expect(location).to_have_attribute("aria-invalid", "false")
        page.get_by_label("Name").fill("Fresh")
        page.get_by_role("button", name="Register and sync").click()
        job = Job.objects.get(table__slug="fresh")
        expect(page).to_have_url(f"{base}/t/fresh/?job={job.pk}")
        expect(page.locator("#job-progress")).to_be_visible()
        sync.sync_table(job.table_id, job.pk)  # the worker's part
        # the page shows the state the sync left by itself: no card, no "queued", no "reload"
        expect(page).to_have_url(f"{base}/t/fresh/")
        expect(page.locator("#job-progress")).to_have_count(0)
        expect(page.get_by_text("Sync of Fresh queued")).to_have_count(0)
        expect(page.get_by_text("reload the page")).to_have_count(0)
        expect(page.locator("dt", has_text="Versions").locator("xpath=..")).to_contain_text("0 … 5")  # not "—"
        shot(page, "46-02-register-synced")
        page.reload()
        expect(page.locator("#job-progress")).to_have_count(0)
        assert errors == []


FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) { return ""; }
  const head = el.closest("table.history thead") ? "HEAD:" : "";
  return head + el.tagName + " " + (el.id || "") + " " + (el.getAttribute("href") || el.getAttribute("name") || "")
    + " " + (el.textContent || "").trim().slice(0, 20);
}"""


def tabs_to_first_header(page: Any, limit: int = 80) -> tuple[int, list[str]]:
    seen = []
    for n in range(1, limit + 1):
        page.keyboard.press("Tab")
        now = page.evaluate(FOCUSED)
        seen.append(now)
        if now.startswith("HEAD:"):
            return n, seen
    return limit + 1, seen


def test_06_history_by_keyboard(browser, clock) -> None:
    base, table = clock
    FileRemovalEvent.objects.create(
        table=table, noticed_at=timezone.now(), version=5, files=2, bytes=2468, unreadable=[[4, 5]],
        unreadable_count=2, unreadable_from=4, unreadable_to=5, vacuum_end_version=5, vacuum_user="ops",
    )  # fmt: skip
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/t/clock/history/")
        # the second stop skips to the commits; one more reaches the first sortable header
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        expect(page.locator(":focus")).to_have_text("Skip to the commits")
        page.keyboard.press("Enter")
        count, seen = tabs_to_first_header(page)
        assert count == 1, seen
        shot(page, "46-06-history-keyboard")
        # the whole walk without the skip link: each date field is one stop with a visible ring
        page.goto(f"{base}/t/clock/history/")
        count, seen = tabs_to_first_header(page)
        dates = [s for s in seen if "date_from" in s or "date_to" in s]
        assert dates == ["INPUT id_date_from date_from ", "INPUT id_date_to date_to "], seen
        page.get_by_label("to", exact=True).nth(1).focus()
        assert page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle") not in ("", "none")
        # the two pairs of downloads say what each gives
        names = [
            a.evaluate("(a) => a.getAttribute('aria-label') || a.textContent")
            for a in page.locator("a[download]").all()
        ]
        assert sorted(names) == [
            "History as CSV",
            "History as Parquet",
            "Removed files as CSV",
            "Removed files as Parquet",
        ]
        assert errors == []


def test_03_table_list_fits_1366(browser, clock) -> None:
    base, _table = clock
    deep = "/data/lake/warehouse/analytics/prod/region=europe-west/department=finance/"
    Table.objects.bulk_create(
        Table(
            name=f"Ledger {i:02d}", slug=f"ledger-{i:02d}", location=f"{deep}ledger_{i:02d}_daily_snapshot",
            sync_state=SyncState.ERROR if i % 3 == 0 else SyncState.NEVER,
            last_error="the log has a gap: 00000000000000000007.json is missing while 8 and 9 are there; "
            "a cleanup removed it, or the listing is eventually consistent" if i % 3 == 0 else "",
        )
        for i in range(77)
    )  # fmt: skip
    with page_of(browser, base, "ana", width=1366) as (page, errors):
        page.goto(base + "/")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1366  # no sideways scroll
        for name in ("Error", "Actions"):  # the last columns are on the screen, not in a sideways scroll
            box = page.locator("table.fleet thead th").filter(has_text=name).bounding_box()
            assert box and box["x"] + box["width"] <= 1366, (name, box)
        assert page.evaluate(
            "() => { const t = document.querySelector('table.fleet'); return t.scrollWidth <= t.parentElement.clientWidth; }"
        )
        rows = page.locator("table.grid tbody tr")
        shot(page, "46-03-table-list-1366")
        heights = [r.bounding_box()["height"] for r in rows.all()[:20]]
        # one line of text (Clock: its description); a failed table's Error cell says its cause
        # in up to three lines (Ledger 00, 03, ...: every third)
        plain = [h for i, h in enumerate(heights[1:]) if i % 3 != 0]
        assert max(plain) < 60 and max(heights[1:]) < 100 and heights[0] < 100, heights
        location = rows.nth(1).locator("code.path")
        full = f"{deep}ledger_00_daily_snapshot"
        expect(location).to_have_attribute("title", full)  # the whole value on hover
        assert location.evaluate("(el) => el.scrollWidth > el.clientWidth")  # cut, with an ellipsis
        assert location.evaluate("(el) => getComputedStyle(el).textOverflow") == "ellipsis"
        rows.nth(1).get_by_role("link").first.focus()  # and on focus: the row shows it whole
        assert location.evaluate("(el) => el.scrollWidth <= el.clientWidth")
        shot(page, "46-03-table-list-1366")
        assert errors == []


SLACK = """(tr) => {  // a row's height less the height its visible cells' content takes
  const cells = Array.from(tr.cells).filter(td => td.offsetParent !== null && td.getClientRects().length);
  const top = Math.min(...cells.map(td => td.getBoundingClientRect().top));
  const bottom = Math.max(...cells.map(td => td.getBoundingClientRect().bottom));
  return tr.getBoundingClientRect().height - (bottom - top);
}"""


def test_07_phones_show_whole_rows(browser, clock, django_user_model) -> None:
    base, table = clock
    req = request_restore(table, django_user_model.objects.get(username="ana"), reason="bad load " * 20, version=2)
    with page_of(browser, base, "ana", width=390) as (page, errors):
        page.goto(f"{base}/t/clock/history/")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        rows = page.locator("table.history tbody tr")
        for i in range(rows.count()):
            row = rows.nth(i)
            operation = row.locator("td strong").first  # the operation
            box = operation.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box  # on the screen, not off to the right
            assert row.evaluate(SLACK) < 24  # no blank height from cells off the screen
        shot(page, "46-07-phone-history")
        page.goto(f"{base}/restores/{req.pk}/")
        for row in page.locator("#audit-trail tbody tr").all():
            assert row.evaluate(SLACK) < 24
            box = row.bounding_box()
            assert box["x"] + box["width"] <= 390, box
        page.locator("#audit-trail").scroll_into_view_if_needed()
        shot(page, "46-07-phone-restore-audit")
        assert errors == []


def test_09_compare_counts_rows_and_writes_partitions_plainly(browser, clock, tmp_path) -> None:
    """A file added without stats (as some writers do) is counted from its Parquet footer."""
    import deltalake
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tables.delta.write.commit import commit
    from tests.web.ui_tables import add_action

    base, _table = clock
    path = tmp_path / "sales"
    deltalake.write_deltalake(str(path), pa.table({"x": [1], "region": ["emea"]}), partition_by=["region"])
    (path / "region=apac").mkdir()
    pq.write_table(pa.table({"x": [1, 2, 3]}), path / "region=apac" / "no-stats.parquet")
    size = (path / "region=apac" / "no-stats.parquet").stat().st_size
    now = int(time.time() * 1000)
    commit(str(path), [add_action("region=apac/no-stats.parquet", {"region": "apac"}, now, size)], "WRITE", {})
    sales = registration.register_table("Sales", str(path))
    sync.sync_table(sales.pk)
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/t/sales/diff/?from=0&to=1")
        added = page.locator("table#files-added")
        row = added.locator("tbody tr").first
        expect(row.locator("td").nth(1)).to_have_text("region=apac")  # not {"region": "apac"}
        expect(row.locator("td").nth(3)).to_have_text("3")  # from the footer, not "unknown"
        expect(page.get_by_text('{"region"')).to_have_count(0)
        shot(page, "46-09-compare-rows-and-partitions")
        assert errors == []


def test_11_discovery_offers_what_can_be_registered(browser, clock, tmp_path) -> None:
    base, _table = clock
    ict_table(tmp_path / "fresh")
    (tmp_path / "writing" / "_delta_log").mkdir(parents=True)  # a writer is creating it
    (tmp_path / "writing" / "_delta_log" / "00000000000000000000.json.tmp").write_text("{}")
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/tables/discover/?prefix={tmp_path}")
        rows = page.locator("table.grid tbody tr")
        registered = rows.filter(has_text="registered")
        expect(registered.locator("td").nth(1)).to_have_text("Clock")  # its registered name, not "clock"
        expect(registered.get_by_role("checkbox")).to_have_count(0)
        writing = rows.filter(has_text="being written")
        expect(writing.get_by_role("checkbox")).to_have_count(0)  # not ticked, not offered
        fresh = rows.filter(has_text="fresh")
        expect(fresh.get_by_role("checkbox")).not_to_be_checked()  # nothing ticked by itself (issue 57)
        fresh.get_by_role("checkbox").check()
        expect(page.locator("#discover-counts")).to_contain_text("1 new, 1 registered already, 1 still being written")
        shot(page, "46-11-discovery")
        page.get_by_role("button", name="Register the ticked tables").click()
        expect(page.get_by_text("Registered 1 table")).to_be_visible()
        assert sorted(Table.objects.values_list("name", flat=True)) == ["Clock", "fresh"]
        assert errors == []


def test_13_history_marks_versions_it_never_saw(browser, clock, tmp_path) -> None:
    """The log cleaned between two syncs: versions 4 and 5 were never read by deltaweb."""
    import deltalake
    import pyarrow as pa

    base, _table = clock
    path = tmp_path / "events"
    for i in range(4):
        deltalake.write_deltalake(str(path), pa.table({"id": [i]}), mode="append")  # versions 0..3
    events = registration.register_table("Events", str(path))
    sync.sync_table(events.pk)
    for i in range(3):
        deltalake.write_deltalake(str(path), pa.table({"id": [i]}), mode="append")  # 4..6
    deltalake.DeltaTable(str(path)).create_checkpoint()  # at 6
    for f in (path / "_delta_log").glob("*.json"):
        if int(f.name[:20]) < 6:
            f.unlink()  # cleanup, before deltaweb read 4 and 5
    sync.sync_table(events.pk)
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/t/events/history/")
        rows = page.locator("table.history tbody tr")
        expect(rows.nth(0)).to_contain_text("6")
        expect(rows.nth(1)).to_have_class("log-gap")
        expect(rows.nth(1)).to_contain_text("Versions 4 to 5 (2) are not in the history")
        expect(rows.nth(2).locator("td").first).to_contain_text("3")
        shot(page, "46-13-history-log-gap")
        page.goto(f"{base}/t/events/history/?sort=version")  # oldest first: the gap below 3
        expect(page.locator("tr.log-gap")).to_have_count(1)
        expect(page.locator("table.history tbody tr").nth(4)).to_have_class("log-gap")
        assert errors == []


def test_12_a_rows_history_suggests_its_key(browser, clock, tmp_path) -> None:
    """The demo's shape: order_id is the only column the schema says is never null."""
    import deltalake
    import pyarrow as pa

    base, _table = clock
    schema = pa.schema(
        [pa.field("order_id", pa.int64(), nullable=False), ("region", pa.string()), ("amount", pa.float64())]
    )
    for i in range(2):
        rows = pa.table({"order_id": [i * 2 + 1, i * 2], "region": ["eu", "us"], "amount": [1.0, 2.0]}, schema=schema)
        deltalake.write_deltalake(str(tmp_path / "orders"), rows, mode="append")
    orders = registration.register_table("Orders", str(tmp_path / "orders"))
    sync.sync_table(orders.pk)
    with page_of(browser, base, "ana") as (page, errors):
        # from a version page, one step: the form with the key column filled in for its value
        page.goto(f"{base}/t/orders/v/1/")
        page.locator("#row-history-link").click()
        expect(page).to_have_url(f"{base}/t/orders/row/?to=1")
        expect(page.get_by_label("order_id")).to_be_visible()
        expect(page.get_by_label("order_id")).to_have_value("")
        shot(page, "46-12-row-history-key")
        # the Overview's link opens the same form, the key suggested
        page.goto(f"{base}/t/orders/")
        page.get_by_role("link", name="The history of one row").click()
        expect(page.get_by_label("order_id")).to_be_visible()
        assert errors == []


def test_a_page_updates_itself_when_its_worker_is_done(browser, clock, settings, tmp_path, monkeypatch) -> None:
    """The site's one look: no "reload the page" — a long log's Readable column, computed by a
    worker, fills itself in."""
    from tables.services.versions import reachability

    base, _table = clock
    monkeypatch.setattr(jobs, "send", lambda *args, **_kw: None)  # the worker's part is run below
    settings.DELTAWEB_REACHABILITY_INLINE_VERSIONS = 3  # a 6-version log is "long" here
    long = registration.register_table("Long", str(ict_table(tmp_path / "long")))
    sync.sync_table(long.pk)
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/t/long/history/")
        note = page.locator("#reach-pending")
        expect(note).to_contain_text("filled in here when done")
        expect(page.get_by_text("reload", exact=False)).to_have_count(0)
        assert reachability.compute_in_worker(long.pk)
        expect(note).to_have_count(0, timeout=20_000)  # the page loaded its answer by itself
        expect(page.locator("table.history tbody tr").first.locator("td").nth(1)).to_contain_text("vacuumed")
        shot(page, "46-00-page-updates-itself")
        assert errors == []
