"""The timeline of a 10,000-version table in a real browser (Debian's Chromium via Playwright):
WebGL traces, the legend clear of the axis, zooming on versions refits the time axis, every
version reachable by keyboard, and no serious accessibility violation. Screenshot:
test-output/screenshots/34-charts-10000-versions.png."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tables.models import Commit, SyncState, Table
from tables.services import registration
from tables.services.access import roles
from tests.e2e.test_browser import ARGS, CHROMIUM, SHOTS, signed_in_page
from tests.e2e.test_workbench_browser import axe_source, serious_violations
from tests.web.ui_tables import ict_table

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytest.importorskip("deltalake")

VERSIONS = 10_000
T0 = 1_700_000_000_000


def _time(v: int) -> int:
    """Commit times that speed up after version 5,000: a zoomed window's range differs."""
    return T0 + v * 60_000 if v < 5_000 else T0 + 5_000 * 60_000 + (v - 5_000) * 1_000


@pytest.fixture
def long_table(live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("Long", str(ict_table(tmp_path / "long")))
    # the history rows a sync of a 10,000-commit log stores (the chart reads only these)
    Commit.objects.bulk_create(
        [
            Commit(
                table=table,
                version=v,
                timestamp=_time(v),
                timestamp_source="ict" if v >= 1_200 else "file",
                in_commit_timestamp=_time(v) if v >= 1_200 else None,
                file_modification_time=_time(v) + 5,
                num_files=v + 1,
                size_bytes=(v + 1) * 1000,
                operation="WRITE",
            )
            for v in range(VERSIONS)
        ],
        batch_size=2000,
    )
    Table.objects.filter(pk=table.pk).update(
        sync_state=SyncState.OK, last_synced_version=VERSIONS - 1, earliest_version=0
    )
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    SHOTS.mkdir(parents=True, exist_ok=True)
    args = [*ARGS, "--enable-unsafe-swiftshader"]  # WebGL in software on a machine without a GPU
    with signed_in_page(live_server.url, "ana", "e2e-secret-pass", width=1280, args=args) as (page, errors):
        page.set_default_timeout(60_000)
        page.goto(f"{live_server.url}/t/{table.slug}/charts/")
        page.locator("#chart-timeline.js-plotly-plot").wait_for()
        yield page, errors


def test_ten_thousand_versions_draw_on_webgl_with_the_legend_clear_of_the_axis(long_table) -> None:
    page, errors = long_table
    kinds = page.evaluate("() => document.getElementById('chart-timeline').data.map(t => t.type)")
    assert kinds[0] == "scattergl" and "scattergl" in kinds[1:], kinds  # effective, ICT, file time
    assert page.evaluate("() => document.getElementById('chart-timeline').data[0].x.length") == VERSIONS
    assert page.locator("#chart-timeline canvas").count() > 0
    files = page.evaluate("() => document.getElementById('chart-files').data[0].type")
    assert files == "scattergl"
    legend = page.locator("#chart-timeline .legend").bounding_box()
    axis_title = page.locator("#chart-timeline .xtitle").bounding_box()
    plot = page.locator("#chart-timeline .nsewdrag").first.bounding_box()
    assert legend and axis_title and plot
    assert legend["y"] + legend["height"] <= plot["y"] + 1  # above the plot area
    assert legend["y"] + legend["height"] <= axis_title["y"]  # and nowhere near the axis title
    page.screenshot(path=str(SHOTS / "34-charts-10000-versions.png"), full_page=True)
    assert serious_violations(page, axe_source()) == []
    assert errors == []


def test_zooming_on_versions_refits_the_time_axis(long_table) -> None:
    page, errors = long_table
    whole = page.evaluate("() => document.getElementById('chart-timeline').layout.yaxis.range.slice()")
    page.evaluate("() => Plotly.relayout('chart-timeline', {'xaxis.range': [6000, 7000]})")
    page.wait_for_function(
        "() => { const r = document.getElementById('chart-timeline').layout.yaxis.range;"
        " return r && r[0] !== arguments[0]; }".replace("arguments[0]", repr(whole[0]))
    )
    lo, hi = page.evaluate(
        "() => document.getElementById('chart-timeline').layout.yaxis.range.map(s => Date.parse(s.replace(' ', 'T') + 'Z'))"
    )
    # the window's own times (versions 6,000..7,000 span 1,000 s), not the whole history's
    assert lo <= _time(6_000) and hi >= _time(7_000)
    assert hi - lo < 2 * (_time(7_000) - _time(6_000))
    page.evaluate("() => Plotly.relayout('chart-timeline', {'xaxis.autorange': true})")
    page.wait_for_function("() => document.getElementById('chart-timeline').layout.yaxis.autorange === true")
    assert errors == []


def test_every_version_is_reachable_by_keyboard(long_table) -> None:
    page, errors = long_table
    chart = page.locator("#chart-timeline")
    chart.focus()
    cursor = page.locator("#chart-timeline-cursor")
    page.keyboard.press("Home")
    assert cursor.inner_text().startswith("version 0:")
    page.keyboard.press("ArrowRight")
    assert cursor.inner_text().startswith("version 1:") and "(2 of 10000)" in cursor.inner_text()
    page.keyboard.press("End")
    assert cursor.inner_text().startswith(f"version {VERSIONS - 1}:")
    page.keyboard.press("PageUp")
    assert cursor.inner_text().startswith(f"version {VERSIONS - 1 - 1000}:")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/v/{VERSIONS - 1 - 1000}/")
    assert errors == []


def test_the_history_metrics_column_is_on_screen_at_1280_px(long_table) -> None:
    page, errors = long_table
    page.goto(page.url.replace("/charts/", "/history/"))
    box = page.evaluate(
        """() => { const t = document.querySelector('table.grid.history');
          const th = [...t.querySelectorAll('thead th')].find(h => h.textContent.trim() === 'operationMetrics');
          return {right: th.getBoundingClientRect().right, view: document.documentElement.clientWidth}; }"""
    )
    assert box["right"] <= box["view"], box
    page.screenshot(path=str(SHOTS / "34-history-1280.png"))
    assert errors == []
