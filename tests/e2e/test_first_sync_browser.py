"""Registering a table in a real browser (Debian's Chromium) while its first sync runs after
the page has loaded, as with a real worker: the live list of new commits takes the first
sync's end as its baseline (the history it stores is not news), and the Overview's sync state
follows the job's end instead of saying "queued" beside a finished job. The sync runs in a
thread of the test, held after its first batch until the page has polled the activity feed,
so the page sees a half-stored history. Screenshots: test-output/screenshots/first-sync-*.png."""

from __future__ import annotations

import re
import threading
import time

import pyarrow as pa
import pytest
from django.contrib.auth.models import Group
from django.db import connection

from tables.models import Job, JobStatus, Table
from tables.services.access import roles
from tables.services.jobs import faults
from tables.services.jobs import lifecycle as jobs
from tables.services.sync import store as sync
from tests.e2e import csp
from tests.e2e.test_browser import ARGS, CHROMIUM, SHOTS
from tests.e2e.test_workbench_browser import axe_source, serious_violations

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
deltalake = pytest.importorskip("deltalake")

COMMITS = 9  # versions 0..8, stored in batches of 4


def sync_in_a_thread(table_id: int, job_id: int) -> threading.Thread:
    """The job run as a worker would run it, beside the page."""

    def run() -> None:
        try:
            sync.sync_table(table_id, job_id)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_first_sync_is_not_news_and_the_state_follows_the_job(
    live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch
) -> None:
    expect = playwright_sync.expect
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "orders"
    for i in range(COMMITS):
        deltalake.write_deltalake(str(path), pa.table({"id": [i]}), mode="append")
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    # the job stays queued, as when a worker has not taken it yet; the test runs it below
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(jobs, "send", lambda task, *args, **_kw: sent.append((task, *args)))
    monkeypatch.setattr(sync, "BATCH", 4)
    first_batch, go = threading.Event(), threading.Event()

    def hold(point: str) -> None:
        if point == "sync-batch-stored" and not first_batch.is_set():
            first_batch.set()
            go.wait(60)

    monkeypatch.setattr(faults, "reached", hold)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        errors: list[str] = []
        page = csp.new_context(browser, sink=errors, viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        polls: list[float] = []
        page.on("response", lambda r: polls.append(time.monotonic()) if "/api/activity/" in r.url else None)
        page.goto(live_server.url + "/accounts/login/?next=/tables/register/")
        page.get_by_label("Username").fill("ana")
        page.get_by_label("Password").fill("e2e-secret-pass")
        page.get_by_role("button", name="Sign in").click()

        # register through the form: the page of the new table, its sync queued
        page.get_by_label("Name").fill("orders")
        page.get_by_label("Location").fill(str(path))
        page.get_by_role("button", name="Register and sync").click()
        job = Job.objects.get()
        expect(page).to_have_url(f"{live_server.url}/t/orders/?job={job.pk}")
        badge = page.locator('[data-sync-badge="orders"]')
        expect(badge).to_have_text("queued")
        assert sent == [(jobs.SYNC_TASK, job.pk)]
        table = Table.objects.get()

        # the sync stores its first batch and waits until the page has polled the feed
        thread = sync_in_a_thread(table.pk, job.pk)
        while not first_batch.is_set():
            page.wait_for_timeout(100)
        stored_at = time.monotonic()
        deadline = time.monotonic() + 20
        while not any(t > stored_at for t in polls) and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert any(t > stored_at for t in polls), "the page did not poll while the sync was half done"
        expect(page.locator("#live-commits")).to_be_hidden()
        go.set()
        thread.join(60)

        # the job's end: its status, and the table's state beside it
        job.refresh_from_db()
        assert job.status == JobStatus.SUCCEEDED, job.error
        # the page loads again by itself, without the job, showing the table's history
        expect(page).to_have_url(f"{live_server.url}/t/orders/")
        expect(page.locator("#job-progress")).to_have_count(0)
        expect(badge).to_have_text("in sync")
        expect(badge).to_have_class("badge state-ok")
        expect(page.locator('[data-sync-note="orders"]')).to_have_count(0)
        # the page loaded after the sync asks only for commits after it, then stays quiet
        live = page.locator("#live-commits")
        expect(live).to_have_attribute("data-url", re.compile(f"afterVersion={COMMITS - 1}$"))
        settled = time.monotonic()
        while sum(t > settled for t in polls) < 1:
            page.wait_for_timeout(500)
        expect(live).to_be_hidden()
        expect(page.get_by_text("new commit(s) since this page loaded")).to_be_hidden()
        assert serious_violations(page, axe_source()) == []
        page.screenshot(path=str(SHOTS / "first-sync-registered.png"), full_page=True)

        # a commit after the first sync is news
        deltalake.write_deltalake(str(path), pa.table({"id": [99]}), mode="append")
        sync.sync_table(table.pk)
        expect(live).to_be_visible(timeout=20_000)
        expect(live.locator("[data-field=count]")).to_have_text("1")
        expect(live.locator("tbody tr td").first).to_have_text(f"v{COMMITS}")
        page.screenshot(path=str(SHOTS / "first-sync-then-one-new-commit.png"), full_page=True)

        # a reload after the sync renders the state the job left
        page.reload()
        expect(badge).to_have_text("in sync")
        assert errors == []
        csp.assert_no_violations(page.context)
        browser.close()
