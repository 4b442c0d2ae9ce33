"""Issue 57, items 1 and 2, in a real browser under the app's own CSP: a table whose newest
commit is cut off (its writer still writing it) shows its history up to the commit before and
names the incomplete version; a preview that meets a corrupt data file says which version,
which file and what to do, without repeating "failed". Screenshots in test-output/screenshots/
(57-01-incomplete-commit.png, 57-02-corrupt-file.png)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from tables.models import Job, JobStatus
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.e2e.test_browser import CHROMIUM
from tests.e2e.test_workbench_third import browser, page_of, shot, user  # noqa: F401  (the module's Chromium)
from tests.spark.conftest import java_executable

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
deltalake = pytest.importorskip("deltalake")
expect = playwright_sync.expect
FIX = "Restore it from a backup or restore the table to a version that does not use it."


def write_versions(path: str, count: int) -> None:
    for i in range(count):
        deltalake.write_deltalake(path, pa.table({"id": pa.array(range(i * 3, i * 3 + 3), pa.int64())}), mode="append")


def test_57_01_a_table_mid_write_stays_readable(
    browser,  # noqa: F811
    live_server,
    transactional_db,
    settings,
    tmp_path,
    django_user_model,
) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "orders"
    write_versions(str(path), 11)
    tip = path / "_delta_log" / "00000000000000000010.json"
    whole = tip.read_bytes()
    tip.write_bytes(whole[:150])
    table = registration.register_table("Orders", str(path))
    sync.sync_table(table.pk)
    user(django_user_model, "ana", roles.ANALYST)
    base = live_server.url
    with page_of(browser, base, "ana") as (page, errors):
        page.goto(f"{base}/t/{table.slug}/history/")
        notice = page.locator("#incomplete-commit")
        expect(notice).to_contain_text("Version 10 is not shown yet")
        expect(notice).to_contain_text("line 1 is not valid JSON at char 150")
        expect(notice).to_contain_text("History is shown up to version 9")
        expect(page.get_by_text("has not been synced yet")).to_have_count(0)
        expect(page.locator("body")).not_to_contain_text("Last sync failed")
        shot(page, "57-01-incomplete-commit")
        # the writer finishes: the next sync stores version 10 and the notice is gone
        tip.write_bytes(whole)
        sync.sync_table(table.pk)
        page.goto(f"{base}/t/{table.slug}/")
        expect(page.locator("#incomplete-commit")).to_have_count(0)
        page.goto(f"{base}/t/{table.slug}/v/10/")
        expect(page.locator("h1, h2").first).to_be_visible()
        assert errors == []


@pytest.mark.skipif(java_executable() is None, reason="Java is not installed (PySpark needs a JVM)")
def test_57_02_a_corrupt_data_file_is_named_with_its_version_and_the_fix(
    browser,  # noqa: F811
    live_server,
    transactional_db,
    settings,
    tmp_path,
    django_user_model,
) -> None:
    pytest.importorskip("pyspark")
    from deltalake import DeltaTable

    from deltaweb.celery import app
    from tables.spark.session import get_spark

    get_spark(settings.SPARK_MASTER)  # warm: the job below runs in the server's thread
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    path = tmp_path / "events"
    write_versions(str(path), 3)
    name = os.path.relpath(sorted(DeltaTable(str(path)).file_uris())[1].removeprefix("file://"), path)
    (path / name).write_bytes(b"this is not parquet " * 10)
    table = registration.register_table("Events", str(path))
    sync.sync_table(table.pk)
    user(django_user_model, "ana", roles.ANALYST)
    base = live_server.url
    old = app.conf.task_always_eager
    app.conf.task_always_eager = True  # the preview runs when its row commits, in the request
    try:
        with page_of(browser, base, "ana") as (page, errors):
            page.goto(f"{base}/t/{table.slug}/v/2/")
            page.locator("#preview-rows").click()
            expected = (
                f"Version 2 cannot be previewed: data file {name} is not a valid Parquet file "
                f"(magic bytes not found). {FIX}"
            )
            box = page.locator("#job-progress")
            expect(box.locator('[data-field="error"]')).to_have_text(expected, timeout=120_000)
            expect(box.locator('[data-field="status"]')).to_have_text("failed", ignore_case=True)
            expect(box.locator('[data-field="stage"]')).to_have_text("")  # not "failed" again
            expect(box.locator('[data-field="count"]')).to_have_text("")
            box.scroll_into_view_if_needed()
            shot(page, "57-02-corrupt-file")
            assert errors == []
    finally:
        app.conf.task_always_eager = old
    job = Job.objects.get(kind="preview")
    assert job.status == JobStatus.FAILED and job.error == expected
