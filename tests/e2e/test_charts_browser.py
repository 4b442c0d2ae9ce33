"""The timeline of a long table in a real browser (Debian's Chromium via Playwright), under the
app's own Content-Security-Policy (script-src 'self', no 'unsafe-eval'; tests/e2e/csp.py): at
2,000 and 10,000 versions every trace is drawn, as SVG (plotly's WebGL traces need
'unsafe-eval' and showed "WebGL is not supported" instead), with no CSP violation; the legend
clear of the axis, zooming on versions refits the time axis, every version reachable by
keyboard, and no serious accessibility violation. Screenshots:
test-output/screenshots/34-charts-2000-versions.png, 34-charts-10000-versions.png."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tables.models import Commit, SyncState, Table
from tables.services.access import roles
from tables.services.catalog import registration
from tests.e2e import csp
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
    yield from charts_page(VERSIONS, live_server, settings, tmp_path, django_user_model, monkeypatch)


@pytest.fixture
def table_2000(live_server, transactional_db, settings, tmp_path, django_user_model, monkeypatch):
    yield from charts_page(2_000, live_server, settings, tmp_path, django_user_model, monkeypatch)


def charts_page(versions, live_server, settings, tmp_path, django_user_model, monkeypatch):
    """The charts page of a table of `versions` versions, drawn, in a signed-in Chromium that
    has WebGL (in software) and keeps the page's CSP."""
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
            for v in range(versions)
        ],
        batch_size=2000,
    )
    Table.objects.filter(pk=table.pk).update(
        sync_state=SyncState.OK, last_synced_version=versions - 1, earliest_version=0
    )
    user = django_user_model.objects.create_user("ana", password="e2e-secret-pass")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    SHOTS.mkdir(parents=True, exist_ok=True)
    # WebGL in software on a machine without a GPU: a WebGL trace would meet the CSP here
    args = [*ARGS, "--enable-unsafe-swiftshader"]
    with signed_in_page(live_server.url, "ana", "e2e-secret-pass", width=1280, args=args) as (page, errors):
        page.set_default_timeout(60_000)
        response = page.goto(f"{live_server.url}/t/{table.slug}/charts/")
        assert response is not None
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "unsafe-eval" not in policy, policy
        for chart in ("timeline", "files", "size"):
            page.locator(f"#chart-{chart}.js-plotly-plot").wait_for()
        yield page, errors


# per chart: its traces' types and, for each trace of the main plot, the vertices of its SVG
# line, its markers, and how far (px) the line's ends are from its first and last versions'
# places on the axis (plotly simplifies a line: a straight run of versions has few vertices)
DRAWN = """(id) => {
  const el = document.getElementById(id);
  const xaxis = el._fullLayout.xaxis;
  const origin = el.getBoundingClientRect().left + xaxis._offset;
  const traces = [...el.querySelectorAll(".cartesianlayer .subplot.xy .scatterlayer .trace")];
  return {
    types: el.data.map((t) => t.type),
    points: el.data.map((t) => t.x.length),
    canvases: el.querySelectorAll("canvas").length,
    traces: traces.map((t, i) => {
      const line = t.querySelector("path.js-line");
      const box = line ? line.getBoundingClientRect() : { left: NaN, right: NaN };
      const x = el._fullData[i].x;
      return {
        vertices: line ? ((line.getAttribute("d") || "").match(/[MLHV]/g) || []).length : 0,
        markers: t.querySelectorAll(".points path.point").length,
        off: Math.max(Math.abs(box.left - origin - xaxis.l2p(x[0])),
                      Math.abs(box.right - origin - xaxis.l2p(x[x.length - 1]))),
      };
    }),
  };
}"""


def assert_drawn_as_svg(page, errors, versions: int) -> None:
    """Every chart drawn, in SVG, its lines across the versions; no WebGL error, no CSP violation."""
    assert "WebGL is not supported" not in page.locator("body").inner_text()
    for chart in ("chart-timeline", "chart-files", "chart-size"):
        drawn = page.evaluate(DRAWN, chart)
        assert set(drawn["types"]) == {"scatter"}, (chart, drawn["types"])
        assert drawn["points"][0] == versions, (chart, drawn["points"])
        assert drawn["canvases"] == 0, chart  # no WebGL layer
        line = drawn["traces"][0]
        assert line["vertices"] >= 2 and line["off"] < 2, (chart, line)  # from the first version to the last
        assert line["markers"] == 0, (chart, line)  # dense: the line alone
    timeline = page.evaluate(DRAWN, "chart-timeline")
    # the inCommitTimestamp and file-time traces (versions 1,200 on): a marker per version up
    # to 1,000 of them (tables/web/base/charts.py DENSE), a line beyond
    ict = versions - 1_200
    assert timeline["points"][1:3] == [ict, ict]
    for trace in timeline["traces"][1:3]:
        if ict > 1_000:
            assert trace["vertices"] >= 2 and trace["off"] < 2 and trace["markers"] == 0, trace
        else:
            assert trace["markers"] == ict, trace
    assert csp.violations(page.context) == []
    assert errors == []


def test_two_thousand_versions_draw_under_the_apps_csp(table_2000) -> None:
    page, errors = table_2000
    assert_drawn_as_svg(page, errors, 2_000)
    # the range slider under the timeline moves a zoomed window through the versions
    assert page.locator("#chart-timeline .rangeslider-container").count() == 1
    # by keyboard: the last version, with its time
    page.locator("#chart-timeline").focus()
    page.keyboard.press("End")
    assert page.locator("#chart-timeline-cursor").inner_text().startswith("version 1999:")
    page.screenshot(path=str(SHOTS / "34-charts-2000-versions.png"), full_page=True)
    assert serious_violations(page, axe_source()) == []
    assert csp.violations(page.context) == []


def test_ten_thousand_versions_draw_as_svg_with_the_legend_clear_of_the_axis(long_table) -> None:
    page, errors = long_table
    assert_drawn_as_svg(page, errors, VERSIONS)
    legend = page.locator("#chart-timeline .legend").bounding_box()
    axis_title = page.locator("#chart-timeline .xtitle").bounding_box()
    plot = page.locator("#chart-timeline .nsewdrag").first.bounding_box()
    assert legend and axis_title and plot
    assert legend["y"] + legend["height"] <= plot["y"] + 1  # above the plot area
    assert legend["y"] + legend["height"] <= axis_title["y"]  # and nowhere near the axis title
    page.screenshot(path=str(SHOTS / "34-charts-10000-versions.png"), full_page=True)
    assert serious_violations(page, axe_source()) == []
    assert errors == []
    assert csp.violations(page.context) == []


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
    # back to the whole history: the effective times' span (tables/web/base/charts.py), not autorange
    page.wait_for_function(
        "() => { const r = document.getElementById('chart-timeline').layout.yaxis.range;"
        f" return Date.parse(r[1].replace(' ', 'T') + 'Z') >= {_time(VERSIONS - 1)}; }}"
    )
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
