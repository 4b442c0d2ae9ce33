"""Issue 57, item 5: the Timeline of a copied ICT table in Chromium under the app's CSP. Its
commits' effective times (inCommitTimestamp) span two months; the copy gave every log file the
same modification time, today. The time axis follows the effective times, at first and after a
zoom and a reset, so the line is not squashed by the file-time markers; on a phone the chart's
toolbar does not cover the legend. Screenshot: test-output/screenshots/57-05-timeline.png."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import Group

from tables.models import Commit, SyncState, Table
from tables.services.access import roles
from tables.services.catalog import registration
from tests.e2e import csp
from tests.e2e.test_browser import CHROMIUM, SHOTS, signed_in_page
from tests.web.ui_tables import ict_table

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")

VERSIONS = 60
DAY = 86_400_000
COPIED = int(time.time() * 1000)  # every file's modification time: the day of the copy
T0 = COPIED - 120 * DAY  # the commits: one a day, four to two months ago


def effective(v: int) -> int:
    return T0 + v * DAY


@pytest.fixture
def copied_table(live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("Copied", str(ict_table(tmp_path / "copied")))
    Commit.objects.bulk_create(
        [
            Commit(
                table=table,
                version=v,
                timestamp=effective(v),
                timestamp_source="ict",
                in_commit_timestamp=effective(v),
                file_modification_time=COPIED + v,
                num_files=v + 1,
                size_bytes=(v + 1) * 1000,
                operation="WRITE",
            )
            for v in range(VERSIONS)
        ]
    )
    Table.objects.filter(pk=table.pk).update(
        sync_state=SyncState.OK, last_synced_version=VERSIONS - 1, earliest_version=0
    )
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    SHOTS.mkdir(parents=True, exist_ok=True)
    return live_server.url, table


RANGE = "() => document.getElementById('chart-timeline')._fullLayout.yaxis.range.map((s) => typeof s === 'number' ? s : Date.parse(s.replace(' ', 'T') + 'Z'))"


def open_timeline(page, base: str, table) -> None:
    response = page.goto(f"{base}/t/{table.slug}/charts/")
    assert response is not None and "script-src 'self'" in response.headers.get("content-security-policy", "")
    page.locator("#chart-timeline.js-plotly-plot").wait_for()


def assert_follows_effective_times(page, first: int, last: int) -> None:
    lo, hi = page.evaluate(RANGE)
    assert lo <= effective(first) and hi >= effective(last), (lo, hi)
    # the span is the effective times' (plus a margin), nowhere near the copy's file times
    assert hi < COPIED - 30 * DAY and hi - lo < 1.5 * max(effective(last) - effective(first), DAY), (lo, hi)


def test_the_time_axis_follows_the_effective_times_on_zoom(copied_table) -> None:
    base, table = copied_table
    with signed_in_page(base, "ana", "e2e-secret-pass", width=1280) as (page, errors):
        open_timeline(page, base, table)
        assert_follows_effective_times(page, 0, VERSIONS - 1)
        # the line spans most of the plot's height instead of a flat strip at its bottom
        line = page.locator("#chart-timeline .scatterlayer .trace").first.locator("path.js-line").bounding_box()
        plot = page.locator("#chart-timeline .nsewdrag").first.bounding_box()
        assert line and plot and line["height"] > 0.8 * plot["height"], (line, plot)
        page.evaluate("() => Plotly.relayout('chart-timeline', {'xaxis.range': [10, 20]})")
        page.wait_for_function(f"() => ({RANGE})()[1] < {effective(25)}")
        assert_follows_effective_times(page, 10, 20)
        page.evaluate("() => Plotly.relayout('chart-timeline', {'xaxis.autorange': true})")
        page.wait_for_function(f"() => ({RANGE})()[1] > {effective(50)}")
        assert_follows_effective_times(page, 0, VERSIONS - 1)
        assert errors == [] and csp.violations(page.context) == []


def test_on_a_phone_the_toolbar_does_not_cover_the_legend(copied_table) -> None:
    base, table = copied_table
    with signed_in_page(base, "ana", "e2e-secret-pass", width=390, is_mobile=True, has_touch=True) as (page, errors):
        open_timeline(page, base, table)
        page.locator("#chart-timeline .nsewdrag").first.hover()  # the toolbar shows
        bar = page.locator("#chart-timeline .modebar").bounding_box()
        legend = page.locator("#chart-timeline .legend").bounding_box()
        plot = page.locator("#chart-timeline .nsewdrag").first.bounding_box()
        assert bar and legend and plot and bar["width"] > 0
        apart = bar["y"] + bar["height"] <= legend["y"] or legend["y"] + legend["height"] <= bar["y"]
        apart = apart or bar["x"] >= legend["x"] + legend["width"] or bar["x"] + bar["width"] <= legend["x"]
        assert apart, f"the toolbar {bar} covers the legend {legend}"
        assert legend["y"] + legend["height"] <= plot["y"] + 1  # the legend still above the plot
        assert_follows_effective_times(page, 0, VERSIONS - 1)
        page.locator("#chart-timeline").scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "57-05-timeline.png"), full_page=True)
        assert errors == [] and csp.violations(page.context) == []
