"""The Query tab in a real browser (Debian's Chromium via Playwright) under the app's own CSP:
write a statement and run it by keyboard (Ctrl+Enter), see its rows with their types and its
chart, download them as CSV, run it at another version, compare two versions (the counts and
the chart of the change), and cancel a long query on a real Celery worker running Spark, the
page saying it was cancelled. Screenshots go to test-output/screenshots/query-NN-*.png."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pyarrow as pa
import pytest
from django.contrib.auth.models import Group

from tables.models import Job, JobStatus
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.e2e.test_browser import CHROMIUM, SHOTS, signed_in_page
from tests.web.data import test_rows

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

spark = test_rows.spark  # the module's Spark session, as the eager task gets it
eager = test_rows.eager  # jobs enqueued on commit run inside the request that started them
expect = playwright_sync.expect
PASSWORD = "e2e-secret-pass"
BY_REGION = "SELECT region, count(*) AS n, sum(amount) AS total FROM sales GROUP BY region ORDER BY region"
# ten billion rows' worth of nested loops: runs until it is cancelled
CROSS_JOIN = (
    "SELECT count(*) FROM sales VERSION AS OF 0 a, sales VERSION AS OF 0 b, sales VERSION AS OF 0 c, "
    "sales VERSION AS OF 0 d, sales VERSION AS OF 0 e WHERE a.id+b.id+c.id+d.id+e.id >= 0"
)


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def sales(live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch):
    """v0: 100 sales in eu/us/apac; v1: 10 more in us and 10 in latam; v2: the eu ones deleted;
    synced, and an analyst. Returns the live server's URL and the table."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # playwright's loop on this thread
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "sales"
    regions = ["eu", "us", "apac"]
    write_deltalake(
        str(path),
        pa.table(
            {
                "id": pa.array(range(100), pa.int64()),
                "region": [regions[i % 3] for i in range(100)],
                "amount": [float(i % 7) + 0.5 for i in range(100)],
            }
        ),
    )
    write_deltalake(
        str(path),
        pa.table(
            {
                "id": pa.array(range(100, 120), pa.int64()),
                "region": ["us"] * 10 + ["latam"] * 10,
                "amount": [1.0] * 20,
            }
        ),
        mode="append",
    )
    DeltaTable(str(path)).delete("region = 'eu'")
    table = registration.register_table("sales", str(path))
    sync.sync_table(table.pk)
    user = django_user_model.objects.create_user("ana", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    SHOTS.mkdir(parents=True, exist_ok=True)
    return live_server.url, table


def by_region(location: str, version: int) -> dict[str, tuple[int, float]]:
    """The query's answer computed with delta-rs: {region: (rows, total amount)}."""
    rows = DeltaTable(location, version=version).to_pyarrow_table().to_pylist()
    out: dict[str, tuple[int, float]] = {}
    for r in rows:
        n, total = out.get(r["region"], (0, 0.0))
        out[r["region"]] = (n + 1, total + r["amount"])
    return out


def shown_rows(page) -> list[list[str]]:
    return [
        [cell.strip() for cell in row.locator("td").all_inner_texts()]
        for row in page.locator("#rows-table tbody tr").all()
    ]


def test_run_see_rows_and_chart_download_another_version_and_compare(eager, sales) -> None:
    base, table = sales
    with signed_in_page(base, "ana", PASSWORD, accept_downloads=True) as (page, errors):
        page.set_default_timeout(120_000)  # the first query starts the Spark session
        page.goto(f"{base}/t/sales/query/")
        expect(
            page.get_by_role("navigation", name="Table sections").get_by_role("link", name="Query")
        ).to_have_attribute("aria-current", "page")
        statement = page.get_by_label("Statement")
        statement.fill(BY_REGION)
        # Ctrl+Enter in the statement runs it (the job runs inside the request here)
        with page.expect_navigation():
            statement.press("Control+Enter")
        assert "?job=" in page.url and page.url.endswith("#result")
        job = Job.objects.get(pk=int(page.url.split("job=")[1].split("#")[0]))
        assert job.status == JobStatus.SUCCEEDED, job.error
        latest = by_region(table.location, 2)
        # the rows, each column's type in the header
        headers = [h.strip() for h in page.locator("#rows-table thead th").all_inner_texts()]
        assert headers == ["region string", "n long", "total double"]
        got = shown_rows(page)
        assert [r[0] for r in got] == sorted(latest)
        assert {r[0]: (int(r[1]), float(r[2])) for r in got} == latest
        expect(page.locator("#query-versions tbody")).to_contain_text("2")  # read at the latest synced version
        # the chart: one bar trace per numeric column, one bar per region
        page.locator("#query-chart.js-plotly-plot").wait_for()
        traces = page.evaluate(
            "() => document.getElementById('query-chart').data.map(t => [t.type, t.name, t.x.length])"
        )
        assert traces == [["bar", "n", 3], ["bar", "total", 3]]
        assert page.locator("#query-chart .bars .point").count() == 6
        shot(page, "query-01-result-and-chart")
        # the CSV download holds the rows
        with page.expect_download() as info:
            page.locator("#download-csv").click()
        assert info.value.suggested_filename == f"sales-query-{job.pk}.csv"
        rows = list(csv.reader(io.StringIO(Path(info.value.path()).read_text())))
        assert rows[0] == ["region", "n", "total"]
        assert {r[0]: (int(r[1]), float(r[2])) for r in rows[1:]} == latest
        assert [r[0] for r in rows[1:]] == sorted(latest)
        # the same statement at another version of the table
        page.get_by_label("Run at another version of sales").fill("0")
        with page.expect_navigation():
            page.get_by_role("button", name="Run there").click()
        first = by_region(table.location, 0)
        got = shown_rows(page)
        assert {r[0]: (int(r[1]), float(r[2])) for r in got} == first
        assert "eu" in first and "latam" not in first
        expect(page.locator("#query-versions tbody td.num")).to_have_text("0")
        page.locator("#query-chart.js-plotly-plot").wait_for()
        shot(page, "query-02-another-version")
        # the two versions compared, matched on the GROUP BY column
        page.locator("#cmp-from").fill("0")
        page.locator("#cmp-to").fill("2")
        with page.expect_navigation():
            page.get_by_role("button", name="Compare").click()
        assert "?a=" in page.url and page.url.endswith("#compare")
        counts = page.locator("#compare-counts .stat")
        expect(counts).to_have_count(4)
        values = [v.strip() for v in page.locator("#compare-counts .value").all_inner_texts()]
        assert values == ["1", "1", "1", "1"]  # eu gone, latam new, us changed, apac the same
        expect(page.locator("#compare-sides")).to_contain_text("region")
        expect(page.locator("#compare-changed")).to_contain_text("us")
        expect(page.locator("#compare-only-from")).to_contain_text("eu")
        expect(page.locator("#compare-only-to")).to_contain_text("latam")
        page.locator("#compare-chart.js-plotly-plot").wait_for()
        change = page.evaluate(
            "() => { const t = document.getElementById('compare-chart').data[0];"
            " return Object.fromEntries(t.x.map((x, i) => [x, t.y[i]])); }"
        )
        assert change == {
            "eu": -first["eu"][0],
            "latam": latest["latam"][0],
            "us": latest["us"][0] - first["us"][0],
        }
        shot(page, "query-03-compare")
        assert errors == [], "\n".join(errors)


def test_a_long_query_is_cancelled_from_its_page(sales, settings, tmp_path, celery_worker_factory) -> None:
    """On a real worker running Spark: the page follows the running query, its Cancel stops
    the Spark job, and the page says the query was cancelled."""
    base, _table = sales
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    celery_worker_factory("spark", {"SPARK_MASTER": "local[2]", "DELTAWEB_RESULTS_DIR": settings.DELTAWEB_RESULTS_DIR})
    with signed_in_page(base, "ana", PASSWORD) as (page, errors):
        page.goto(f"{base}/t/sales/query/")
        page.get_by_label("Statement").fill(CROSS_JOIN)
        page.get_by_role("button", name="Run", exact=True).click()
        page.wait_for_url("**?job=*")
        job = Job.objects.get(pk=int(page.url.split("job=")[1].split("#")[0]))
        box = page.locator("#job-progress")
        expect(box).to_have_attribute("data-status", "running", timeout=120_000)
        # cancelled once Spark runs it (the worker's session starts on its first job)
        expect(box.locator('[data-field="stage"]')).to_have_text(re.compile(r"\d+ of \d+ stages"), timeout=120_000)
        expect(box.get_by_role("button", name="Cancel")).to_be_visible()
        shot(page, "query-04-running")
        box.get_by_role("button", name="Cancel").click()
        expect(page.locator("#job-progress")).to_have_attribute("data-status", "failed", timeout=60_000)
        expect(page.locator('#job-progress [data-field="error"]')).to_have_text("Cancelled by ana.")
        expect(page.locator('#job-progress [data-field="stage"]')).to_have_text("cancelled")
        expect(page.locator('#job-progress [data-field="cancel"]')).to_be_hidden()
        job.refresh_from_db()
        assert (job.status, job.stage, job.result.get("cancelledBy")) == (JobStatus.FAILED, "cancelled", "ana")
        page.reload()  # and once loaded again, the page still says so
        expect(page.locator("#job-progress")).to_contain_text("Cancelled by ana.")
        expect(page.locator("#rows-table")).to_have_count(0)
        shot(page, "query-05-cancelled")
        assert errors == [], "\n".join(errors)
