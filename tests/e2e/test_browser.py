"""End to end in a real browser (Debian's Chromium via Playwright) against pytest-django's
live server: sign in, register a table, see its history and timeline chart, compare versions,
time-travel, watch a job's progress. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group

from tables.delta.history.timestamps import format_ms
from tables.models import Commit, Job, JobStatus, Table
from tables.services.access import roles
from tests.e2e import csp
from tests.web.ui_tables import ict_table

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")


@contextmanager
def signed_in_page(
    base: str, username: str, password: str, *, width: int = 1400, args: list[str] = ARGS, **context_options: Any
) -> Iterator[tuple[Any, list[str]]]:
    """A Chromium page signed in as `username` on the live server at `base`, and the list that
    collects the page's script errors and CSP violations (tests assert it stays empty; leaving
    fails on a CSP violation the test did not check)."""
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=args)
        errors: list[str] = []
        context = csp.new_context(browser, sink=errors, viewport={"width": width, "height": 1000}, **context_options)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/accounts/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        try:
            yield page, errors
            csp.assert_no_violations(context)
        finally:
            context.close()
            browser.close()


@pytest.fixture
def eager_celery(settings):
    """Run the sync the register form queues inside the request (the real worker is tested elsewhere)."""
    from deltaweb.celery import app

    settings.CELERY_TASK_ALWAYS_EAGER = True
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def browser_page(monkeypatch):
    # Playwright's sync API keeps an event loop on this thread; the test's own ORM calls are plain sync.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        errors: list[str] = []
        context = csp.new_context(browser, sink=errors, viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page, errors
        csp.assert_no_violations(context)
        context.close()
        browser.close()


# where a version's point of the timeline is on the screen (plotly's own axis conversions)
POINT_JS = """(version) => {
  const el = document.getElementById("chart-timeline");
  const fl = el._fullLayout, trace = el._fullData[0];
  const i = trace.x.indexOf(version);
  const r = el.getBoundingClientRect();
  return {
    x: r.left + fl.xaxis._offset + fl.xaxis.l2p(version),
    y: r.top + fl.yaxis._offset + fl.yaxis.l2p(fl.yaxis.d2l(trace.y[i])),
  };
}"""


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_sign_in_register_history_chart_diff_time_travel(
    live_server, transactional_db, settings, tmp_path, django_user_model, eager_celery, browser_page
) -> None:
    expect = playwright_sync.expect
    page, js_errors = browser_page
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = ict_table(tmp_path / "clock")  # v0..v2 delta-rs, ICT enabled at v3, v4..v5 by the core's writer
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    base = live_server.url

    # sign in
    page.goto(base + "/")
    expect(page).to_have_url(f"{base}/accounts/login/?next=/")
    expect(page.get_by_label("Username")).to_be_focused()
    shot(page, "01-sign-in")
    page.get_by_label("Username").fill("ana")
    page.get_by_label("Password").fill("e2e-secret-pass")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Tables")).to_be_visible()
    expect(page.get_by_text("No tables are registered yet.")).to_be_visible()

    # register through the form; the sync runs (eagerly) and the job fragment reports it
    page.get_by_role("link", name="Register a table").first.click()
    page.get_by_label("Name").fill("Clock")
    page.get_by_label("Location").fill(str(path))
    page.get_by_label("Description").fill("ICT enabled part-way")
    shot(page, "02-register")
    page.get_by_role("button", name="Register and sync").click()
    # the sync ran within the request: the table's page, in the state it left, no job to follow
    assert Job.objects.get().status == JobStatus.SUCCEEDED
    expect(page).to_have_url(f"{base}/t/clock/")
    expect(page.locator("#job-progress")).to_have_count(0)
    table = Table.objects.get()
    assert table.last_synced_version == 5 and table.ict_enablement_version == 3

    # the history tab, then the timeline chart with its ICT boundary
    page.goto(f"{base}/t/clock/")
    page.get_by_role("link", name="History", exact=True).click()
    expect(page).to_have_url(f"{base}/t/clock/history/")
    rows = page.locator("table.history tbody tr")
    expect(rows).to_have_count(6)
    # the readable column: v0 (written by delta-rs) is readable; v5 names files the core's writer
    # added without writing them, so the column says they are gone
    expect(rows.last.locator("td").nth(1)).to_contain_text("✓")
    expect(rows.first.locator("td").nth(1)).to_contain_text("2 files vacuumed")
    expect(rows.first.locator("td").nth(2)).to_contain_text("ICT")
    expect(rows.last.locator("td").nth(2)).to_contain_text("file")
    shot(page, "03-table-history")
    page.get_by_role("link", name="Timeline & growth").click()
    expect(page.locator("#chart-timeline.js-plotly-plot")).to_be_visible(timeout=60_000)
    expect(page.locator("#chart-timeline .annotation-text", has_text="ICT enabled at v3")).to_be_visible()
    expect(page.locator("#chart-files.js-plotly-plot")).to_be_visible()
    expect(page.locator("#chart-size.js-plotly-plot")).to_be_visible()
    shot(page, "03b-table-charts")
    # hover a point of the timeline: version, time and source; a click opens that version
    point = page.evaluate(POINT_JS, 4)
    page.mouse.move(point["x"], point["y"])
    hover = page.locator("#chart-timeline .hovertext").first
    expect(hover).to_contain_text("version 4")
    expect(hover).to_contain_text("source: ICT")
    page.mouse.click(point["x"], point["y"])
    expect(page).to_have_url(f"{base}/t/clock/v/4/")

    # history filter
    page.goto(f"{base}/t/clock/history/")
    page.get_by_label("Operation", exact=True).fill("SET TBLPROPERTIES")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(page.locator("#history-count")).to_contain_text("1 matching the filters")

    # time travel: an answer, then an error worded as the service words it
    v4 = Commit.objects.get(table=table, version=4)
    page.goto(f"{base}/t/clock/versions/")
    page.get_by_label("As of").fill(format_ms(v4.timestamp))
    page.get_by_role("button", name="Find version").click()
    answer = page.locator("#tt-answer")
    expect(answer).to_contain_text("version 4")
    expect(answer).to_contain_text("searched")
    shot(page, "04-time-travel")
    page.get_by_label("As of").fill("1970-01-01")
    page.get_by_role("button", name="Find version").click()
    expect(page.locator("#tt-error")).to_contain_text("before the earliest version available")
    page.get_by_label("As of").fill(format_ms(v4.timestamp))
    page.get_by_role("button", name="Find version").click()
    page.locator("#tt-answer").get_by_role("link", name="Open version 4").click()

    # the version page
    expect(page.get_by_role("heading", name="Clock at version 4")).to_be_visible()
    expect(page.locator("#schema")).to_contain_text("x")
    expect(page.locator("#partitioning")).to_contain_text("p")
    expect(page.locator("#commit-info")).to_contain_text('"inCommitTimestamp"')
    shot(page, "05-version")

    # a diff from the Compare tab's form
    page.goto(f"{base}/t/clock/")
    page.get_by_role("link", name="Compare", exact=True).click()
    page.locator("#diff-from").fill("2")
    page.locator("#diff-to").fill("5")
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(f"{base}/t/clock/diff/?from=2&to=5")
    expect(page.locator("#file-stats")).to_contain_text("Files added")
    expect(page.locator(".stat.added .value")).to_have_text("2")
    expect(page.locator("#property-changes")).to_contain_text("delta.enableInCommitTimestamps")
    expect(page.locator("#protocol-changes")).to_contain_text("minWriterVersion")
    expect(page.locator("#diff-commits tbody tr")).to_have_count(3)
    shot(page, "06-diff")

    # the job fragment polls /jobs/<id>.json and follows a running job to its end
    job = Job.objects.create(kind="sync", table=table, stage="queued")
    page.goto(f"{base}/t/clock/?job={job.pk}")
    box = page.locator("#job-progress")
    expect(box).to_have_attribute("data-status", "queued")
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, stage="storing history rows", done=2, total=5)
    expect(box.locator('[data-field="count"]')).to_have_text("2/5")
    expect(box.locator('[data-field="stage"]')).to_have_text("storing history rows")
    shot(page, "07-job-progress")
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, stage="done", done=5)
    # the page loads again by itself, without the job, in the state the sync left
    expect(page).to_have_url(f"{base}/t/clock/")
    expect(box).to_have_count(0)

    # the list shows the sync status
    page.goto(base + "/")
    expect(page.locator("table.grid")).to_contain_text("in sync")
    shot(page, "08-table-list")
    assert js_errors == []
    assert os.path.exists(SHOTS / "03-table-history.png")


def test_restore_requested_in_the_ui_approved_in_the_admin_console_committed_on_spark(
    live_server, settings, tmp_path, django_user_model, celery_worker_factory, browser_page
) -> None:
    """An analyst asks for a restore in the UI, an approver approves it in the admin console, a
    real worker runs it on Spark while the analyst's page follows, and the history shows it."""
    import io
    import re
    import time

    from django.core.management import call_command

    from tables.models import RestoreRequest
    from tables.services.catalog import registration
    from tables.services.sync import store as sync
    from tests.web.restore_tables import restore_table

    expect = playwright_sync.expect
    page, js_errors = browser_page
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("Events", str(restore_table(tmp_path / "events")))
    sync.sync_table(table.pk)
    call_command("create_roles", stdout=io.StringIO())
    ana = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    ana.groups.add(Group.objects.get(name=roles.ANALYST))
    rita = django_user_model.objects.create_user("rita", password="e2e-secret-pass", is_staff=True)
    rita.groups.add(Group.objects.get(name=roles.APPROVER))
    celery_worker_factory("spark", {"DELTAWEB_RESTORE_ENGINE": "spark", "SPARK_MASTER": "local[2]"})
    base = live_server.url

    # the analyst plans a restore from the table's Restores tab
    page.goto(f"{base}/t/events/restores/")
    page.get_by_label("Username").fill("ana")
    page.get_by_label("Password").fill("e2e-secret-pass")
    page.get_by_role("button", name="Sign in").click()
    form = page.locator("#request-restore")
    form.get_by_label("Version", exact=True).fill("2")
    form.get_by_label("Reason").fill("The overwrite at version 3 was a mistake")
    shot(page, "09-restore-form")
    form.get_by_role("button", name="Plan the restore").click()
    req = RestoreRequest.objects.get()
    expect(page).to_have_url(f"{base}/restores/{req.pk}/")
    expect(page.locator("#files-to-add")).to_have_text("3")
    expect(page.locator("#files-to-remove")).to_have_text("2")
    expect(page.locator("#datachange-warning")).to_contain_text("dataChange=true")
    expect(page.locator("#side-by-side")).to_contain_text("Now (version 5)")
    expect(page.locator("#restore-progress")).to_have_attribute("data-status", "pending")
    assert page.locator("#decision").count() == 0  # analysts do not decide
    shot(page, "10-restore-request")

    # the approver approves in the admin console
    console = csp.new_context(page.context.browser, sink=js_errors, viewport={"width": 1400, "height": 1000}).new_page()
    console.set_default_timeout(20_000)
    console.goto(f"{base}/admin/tables/restorerequest/")
    console.locator("#id_username").fill("rita")
    console.locator("#id_password").fill("e2e-secret-pass")
    console.get_by_role("button", name="Log in").click()
    expect(console.locator("#result_list")).to_contain_text("version 2")
    shot(console, "11-admin-restores")
    console.locator("#result_list").get_by_role("link", name=str(req.pk), exact=True).click()
    expect(console.locator(".restore-plan")).to_contain_text("numOfFilesAfterRestore")
    console.locator("#id_comment").fill("Checked with the data owners")
    shot(console, "12-admin-approve")
    console.get_by_role("button", name="Approve and run").click()
    expect(console.locator(".messagelist")).to_contain_text(f"Restore #{req.pk} approved")
    csp.assert_no_violations(console.context)
    console.context.close()

    # the analyst's page follows the run on Spark, then shows the new version
    box = page.locator("#restore-progress")
    expect(box).to_have_attribute("data-status", re.compile("queued|running"), timeout=30_000)
    expect(box).to_have_attribute("data-status", "running", timeout=60_000)
    shot(page, "13-restore-running")
    expect(page.locator("#restore-result")).to_contain_text("version 6", timeout=240_000)
    expect(page.locator("#restore-check")).to_contain_text("equal version 2")
    expect(page.locator("#events")).to_contain_text("rita")
    shot(page, "14-restore-succeeded")

    deadline = time.time() + 60  # the worker syncs the table after the commit
    while not table.commits.filter(version=6).exists() and time.time() < deadline:
        time.sleep(0.2)
    page.locator("#restore-result").get_by_role("link", name="history").click()
    first = page.locator("table.history tbody tr").first
    expect(first.locator("td").first).to_have_text("6")
    expect(first).to_contain_text("RESTORE")
    shot(page, "15-history-restore")
    assert js_errors == []
