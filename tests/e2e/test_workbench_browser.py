"""The analyst's workbench in a real browser (Debian's Chromium via Playwright): the table
page's tabs by keyboard, history sorting, columns and export, the table list's search, copy as
SQL, and an accessibility check (axe-core, from the npm registry) on every page, which must
report no serious or critical violation. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import csv
import io
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from tables.models import Commit
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.e2e import csp
from tests.e2e.test_browser import CHROMIUM, SHOTS, signed_in_page
from tests.web.ui_tables import ict_table

HERE = Path(__file__).resolve().parent
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")


def axe_source() -> str:
    """axe-core, installed from the npm registry (tests/e2e/package.json) on first use."""
    if not AXE.exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, capture_output=True, timeout=300)
    return AXE.read_text()


def serious_violations(page, source: str) -> list[str]:
    """axe-core's serious and critical violations of the page, as readable lines (axe-core
    loaded as a same-origin script, under the page's CSP)."""
    csp.inject_axe(page, source)
    found = page.evaluate(
        """async () => {
          const r = await axe.run(document, {resultTypes: ["violations"]});
          return r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
            .map(v => v.id + ": " + v.help + " @ " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", "));
        }"""
    )
    return list(found)


@pytest.fixture
def workbench(live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("Clock", str(ict_table(tmp_path / "clock")), "ICT enabled part-way")
    sync.sync_table(table.pk)
    for i in range(3):  # a few more tables for the list
        registration.register_table(f"Other {i}", str(ict_table(tmp_path / f"other{i}")))
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    SHOTS.mkdir(parents=True, exist_ok=True)
    with signed_in_page(live_server.url, "ana", "e2e-secret-pass", accept_downloads=True) as (page, errors):
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
        yield page, live_server.url, table, errors


def test_every_page_passes_the_accessibility_check(workbench) -> None:
    page, base, _table, errors = workbench
    source = axe_source()
    urls = {
        "20-list": "/",
        "21-overview": "/t/clock/",
        "22-history": "/t/clock/history/",
        "23-charts": "/t/clock/charts/",
        "24-versions": "/t/clock/versions/?as_of=2999-01-01&allow_latest=on",
        "25-compare": "/t/clock/diff/?from=2&to=5",
        "26-restores": "/t/clock/restores/",
        "27-version": "/t/clock/v/4/",
        "28-register": "/tables/register/",
        "29-restore-list": "/restores/",
    }
    report = {}
    for name, url in urls.items():
        page.goto(base + url)
        if "charts" in url:
            page.locator("#chart-timeline.js-plotly-plot").wait_for(timeout=60_000)
        report[url] = serious_violations(page, source)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    # the README's pictures: the Overview, and the History with the columns most read
    page.goto(f"{base}/t/clock/")
    page.screenshot(path=str(SHOTS / "readme-table-overview.png"))
    cols = "&".join(
        f"cols={c}" for c in ("readable", "timestamp", "operation", "operationParameters", "operationMetrics")
    )
    page.goto(f"{base}/t/clock/history/?{cols}")
    page.locator("#history-count").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "readme-table-history.png"))
    (SHOTS / "axe-report.txt").write_text("\n".join(f"{u}: {v}" for u, v in report.items()))
    assert report == {url: [] for url in urls.values()}
    assert errors == []


def test_tabs_by_keyboard_with_their_own_urls(workbench) -> None:
    expect = playwright_sync.expect
    page, base, _table, errors = workbench
    page.goto(f"{base}/t/clock/")
    tabs = page.get_by_role("navigation", name="Table sections")
    expect(tabs.get_by_role("link", name="Overview")).to_have_attribute("aria-current", "page")
    # keyboard: Tab until the History tab has the focus, Enter follows it
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.textContent.trim()") == "History":
            break
    focused = page.locator(":focus")
    expect(focused).to_have_text("History")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")  # the focus is visible
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/t/clock/history/")
    expect(tabs.get_by_role("link", name="History")).to_have_attribute("aria-current", "page")
    page.go_back()
    expect(page).to_have_url(f"{base}/t/clock/")
    page.go_forward()
    expect(page).to_have_url(f"{base}/t/clock/history/")
    assert errors == []


def test_history_sort_columns_and_export(workbench) -> None:
    expect = playwright_sync.expect
    page, base, table, errors = workbench
    page.goto(f"{base}/t/clock/history/")
    rows = page.locator("table.history tbody tr")
    expect(rows.first.locator("td").first).to_contain_text("5")
    page.locator("table.history thead").get_by_role("link", name="version").click()  # oldest first
    expect(page).to_have_url(f"{base}/t/clock/history/?sort=version")
    expect(rows.first.locator("td").first).to_have_text("0")
    # the column chooser: keep only operation and userMetadata
    page.locator("#column-chooser summary").click()
    for box in page.locator('#column-chooser input[name="cols"]').all():
        box.set_checked(box.get_attribute("value") in ("operation", "userMetadata"))
    page.get_by_role("button", name="Filter").click()
    headers = page.locator("table.history thead th")
    expect(headers).to_have_text(["version", "operation", "userMetadata"])
    expect(page.get_by_label("Sort by")).to_have_value("version")  # the sort stays
    page.screenshot(path=str(SHOTS / "30-history-columns.png"), full_page=True)
    # export what is filtered, in the order shown
    page.get_by_label("Operation", exact=True).fill("WRITE")
    page.get_by_role("button", name="Filter").click()
    with page.expect_download() as info:
        page.locator("#history-export").get_by_role("link", name="CSV").click()
    got = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text())))
    expected = list(Commit.objects.filter(table=table, operation="WRITE").order_by("version"))
    assert [int(r["version"]) for r in got] == [c.version for c in expected]
    assert info.value.suggested_filename == "clock-history.csv"
    assert errors == []


def test_table_list_search_and_copy_as_sql(workbench) -> None:
    expect = playwright_sync.expect
    page, base, table, errors = workbench
    page.goto(base + "/")
    page.get_by_label("Search name or location").fill("other")
    page.get_by_label("Search name or location").press("Enter")
    expect(page.locator("table.grid tbody tr")).to_have_count(3)
    expect(page.locator("#table-count")).to_contain_text("of 3 matching")
    page.get_by_label("Status").select_option("never")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("table.grid tbody tr")).to_have_count(3)
    page.screenshot(path=str(SHOTS / "31-table-list-search.png"), full_page=True)
    # copy as SQL on a version page, by keyboard
    page.goto(f"{base}/t/clock/v/4/")
    button = page.locator("#version-sql").get_by_role("button").first
    button.focus()
    page.keyboard.press("Enter")
    expect(button).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == f"SELECT * FROM delta.`{table.location}` VERSION AS OF 4"
    assert errors == []


def test_a_finished_data_job_on_its_own_page_reloads_to_show_its_rows(workbench) -> None:
    """The compare page of a change-data job (its own URL plus #rows): when the job finishes the
    page loads again with the rows, instead of only scrolling to the fragment."""
    from tables.models import Job, JobStatus

    page, base, table, _errors = workbench
    job = Job.objects.create(kind="changes", table=table, status=JobStatus.RUNNING, params={"from": 1, "to": 3})
    page.goto(f"{base}/t/{table.slug}/diff/?from=1&to=3&rowjob={job.pk}")
    page.locator("#job-progress").wait_for()
    page.evaluate("window.__notReloaded = true")
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED, stage="done")
    # a function, not an expression: playwright evaluates an expression string with eval in the
    # page, which the page's CSP refuses
    page.wait_for_function("() => window.__notReloaded === undefined", timeout=20_000)
    assert page.url.endswith("#rows") and f"rowjob={job.pk}" in page.url
    page.screenshot(path=str(SHOTS / "34-3-change-data-reloaded.png"), full_page=False)
