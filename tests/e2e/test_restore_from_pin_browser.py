"""Issue 55's browser test, under the app's own CSP: a table written by delta-rs, version N
pinned, then a zero-retention VACUUM by delta-rs and a sync. In headless Chromium the analyst
opens version N's page ("kept by pin NAME"), previews its rows (delta-rs's rows of version N,
read before the VACUUM), compares N with the latest version (no unreadable warning, the file
counts delta-rs gives), and requests a restore to N (the form and the plan name the files that
come back from the pin and their bytes). Another user approves it on the request page; the
restore runs on Spark (eager Celery: inside the approval's request), and the new latest
version's preview shows version N's rows. Screenshots: test-output/screenshots/
55-restore-from-pin-*.png."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tables.models import RestoreRequest, RestoreStatus
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.pins import lifecycle as pins
from tables.services.sync import store as sync
from tests.e2e.test_workbench_third import (
    browser,  # noqa: F401 (a fixture)
    expect,
    page_of,
    pytestmark,  # noqa: F401 (Chromium, slow)
    shot,
    user,
)
from tests.spark.conftest import java_executable
from tests.web.restore_tables import log_versions, restore_table, rs_paths
from tests.web.restores.test_restore_from_pin import gone_from_table

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("pyspark")

N = 2  # 30 rows; the overwrite at version 3 removes its files, which VACUUM then deletes
PIN = "before-the-overwrite"
SPARK = 300_000  # ms: a Spark job on a loaded 2-core machine (the first one starts the session)


def rs_rows(path: Path, version: int | None = None) -> list[tuple[int, str]]:
    """The rows of a version as delta-rs reads them, sorted."""
    dt = deltalake.DeltaTable(str(path)) if version is None else deltalake.DeltaTable(str(path), version=version)
    return sorted((r["id"], r["s"]) for r in dt.to_pyarrow_table().to_pylist())


def shown_rows(page) -> list[tuple[int, str]]:
    """The preview's rows as the page shows them (id, s; the last cell is the row's history link)."""
    out = []
    for row in page.locator("#rows-table tbody tr").all():
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        out.append((int(cells[0].replace(",", "")), cells[1]))
    return sorted(out)


def preview(page, base: str, version: int, name: str) -> list[tuple[int, str]]:
    """Open a version's page, run Preview (a Spark job inside the request), return its rows."""
    page.goto(f"{base}/t/events/v/{version}/")
    page.locator("#preview-rows").click()
    expect(page.locator("#rows-table tbody tr").first).to_be_visible(timeout=SPARK)
    expect(page.locator("#rows-range")).to_contain_text(" in this version")
    page.locator("#rows").scroll_into_view_if_needed()
    shot(page, name)
    got = shown_rows(page)
    pages = page.get_by_role("navigation", name="Row pages")
    while pages.get_by_role("link", name="next ›").count():  # the preview's rows, a page at a time
        last = page.locator("#rows-range").inner_text()
        pages.get_by_role("link", name="next ›").click()
        expect(page.locator("#rows-range")).not_to_have_text(last)
        got += shown_rows(page)
    return sorted(got)


@pytest.fixture
def eager_spark(settings):
    """Celery tasks run inside the request that sends them, on this process's Spark session."""
    from deltaweb.celery import app
    from tables.spark.session import get_spark

    get_spark(settings.SPARK_MASTER)  # warm: the jobs below run in the server's threads
    settings.DELTAWEB_RESTORE_ENGINE = "spark"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def pinned(live_server, transactional_db, settings, tmp_path, django_user_model, eager_spark):
    """events (delta-rs), version N pinned, VACUUMed by delta-rs with zero retention, synced."""
    src = tmp_path / "tables"
    src.mkdir()
    settings.DELTAWEB_ALLOWED_ROOTS = [str(src)]
    settings.DELTAWEB_PIN_STORE = str(tmp_path / "pins")
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    path = restore_table(src / "events")
    table = registration.register_table("events", str(path))
    sync.sync_table(table.pk)
    analyst = user(django_user_model, "ana", roles.ANALYST)
    user(django_user_model, "appro", roles.APPROVER)
    before = {
        "rows": rs_rows(path, N),
        "files_n": rs_paths(path, N),
        "files_latest": rs_paths(path),
    }
    pin = pins.create_pin(table, N, PIN, "the state before the overwrite", analyst)
    assert pin.state == "active"
    deltalake.DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    sync.sync_table(table.pk)
    table.refresh_from_db()
    before["head"] = max(log_versions(path))  # delta-rs's VACUUM commits its start and end
    assert table.last_synced_version == before["head"]
    gone = gone_from_table(table, N)
    assert gone  # VACUUM took version N's files from the table
    before["gone"] = gone
    before["bytes"] = sum((Path(pin.store_location) / p).stat().st_size for p in gone)
    return live_server.url, table, path, before


@pytest.mark.skipif(java_executable() is None, reason="Java is not installed (PySpark needs a JVM)")
def test_55_restore_to_a_pinned_version_after_vacuum_in_a_browser(browser, pinned) -> None:  # noqa: F811
    base, table, path, before = pinned
    head = before["head"]
    with page_of(browser, base, "ana") as (page, errors):
        page.set_default_timeout(60_000)
        # the version page: kept by the pin, every action enabled
        page.goto(f"{base}/t/events/v/{N}/")
        expect(page.locator("#version-kept")).to_contain_text(f"kept by pin {PIN}")
        expect(page.locator("#version-unreadable")).to_have_count(0)
        expect(page.get_by_role("button", name="Preview rows")).to_be_enabled()
        shot(page, "55-restore-from-pin-1-version-page")

        # Preview: delta-rs's rows of version N, read before the VACUUM
        assert preview(page, base, N, "55-restore-from-pin-2-preview") == before["rows"]

        # Compare N -> latest: both sides readable, the file counts delta-rs gives
        page.goto(f"{base}/t/events/v/{N}/")
        page.locator("#kept-compare").click()
        expect(page).to_have_url(f"{base}/t/events/diff/?from={N}&to={head}")
        stats = page.locator("#file-stats")
        n_from, n_to = len(before["files_n"]), len(before["files_latest"])
        expect(stats.locator(".stat", has_text="Active files")).to_contain_text(f"{n_from} → {n_to}")
        added = len(before["files_latest"] - before["files_n"])
        removed = len(before["files_n"] - before["files_latest"])
        expect(stats.locator(".stat.added .value")).to_have_text(str(added))
        expect(stats.locator(".stat.removed .value")).to_have_text(str(removed))
        expect(page.locator("#compare-unreadable-from")).to_have_count(0)
        expect(page.locator("#compare-unreadable-to")).to_have_count(0)
        expect(page.locator("body")).not_to_contain_text("cannot be read")
        shot(page, "55-restore-from-pin-3-compare")

        # the restore form says the version comes from the pin; the plan names the files and bytes
        page.goto(f"{base}/t/events/v/{N}/")
        page.locator("#restore-this").click()
        expect(page.locator("#restore-from-pin")).to_contain_text(
            f"pin “{PIN}” keeps the version ({len(before['files_n'])} files, "
        )
        page.get_by_label("Reason").fill("The overwrite at version 3 was a mistake")
        shot(page, "55-restore-from-pin-4-form")
        page.get_by_role("button", name="Plan the restore").click()
        expect(page).to_have_url(f"{base}/restores/{RestoreRequest.objects.get().pk}/")
        req = RestoreRequest.objects.get()
        plan = page.locator("#plan-from-pin")
        expect(plan.locator("#from-pin-count")).to_have_text(f"{len(before['gone'])} files")
        expect(plan).to_contain_text(f"{before['bytes']} bytes")
        for p in before["gone"]:
            expect(plan.locator("#from-pin-files")).to_contain_text(p)
        expect(page.locator("#decision")).to_have_count(0)  # analysts do not decide
        plan.scroll_into_view_if_needed()
        shot(page, "55-restore-from-pin-5-request")
        assert errors == []

    # another user approves on the request page; the run (Spark) happens inside that request
    with page_of(browser, base, "appro") as (page, errors):
        page.set_default_timeout(60_000)
        page.goto(f"{base}/restores/{req.pk}/")
        expect(page.locator("#plan-from-pin #from-pin-count")).to_have_text(f"{len(before['gone'])} files")
        decision = page.locator("#decision")
        decision.locator("[name=comment]").fill("checked with finance")
        shot(page, "55-restore-from-pin-6-approve")
        decision.get_by_role("button", name="Approve and run").click()
        expect(page.locator("#restore-result")).to_contain_text(f"version {head + 1}", timeout=SPARK)
        expect(page.locator("#restore-check")).to_contain_text(f"equal version {N}")
        shot(page, "55-restore-from-pin-7-restored")
        assert errors == []
    req.refresh_from_db()
    assert req.status == RestoreStatus.SUCCEEDED, req.error
    assert req.result_version == head + 1 and req.result["fromPin"]["copied"] == len(before["gone"])
    assert req.result["engine"] == "spark"
    assert rs_rows(path) == before["rows"]  # delta-rs reads the new version with version N's rows

    deadline = time.time() + 120  # the run syncs the table after its commit
    while not table.commits.filter(version=head + 1).exists() and time.time() < deadline:
        time.sleep(0.5)
    assert table.commits.filter(version=head + 1).exists()
    with page_of(browser, base, "ana") as (page, errors):
        page.set_default_timeout(60_000)
        rows = preview(page, base, head + 1, "55-restore-from-pin-8-restored-preview")
        assert rows == before["rows"]
        assert errors == []
