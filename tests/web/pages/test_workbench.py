"""The table page as an analyst's workbench: tabs with their own URLs, the history as DESCRIBE
HISTORY (userMetadata, chips with units, sorting, columns) and its streamed export, checked
against delta-rs's own history of the same table."""

from __future__ import annotations

import csv
import html
import io
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.history.timestamps import format_ms
from tables.models import Commit
from tables.services.catalog import registration
from tables.services.history import export as history_export
from tables.services.sync import store as sync
from tables.web.base import formatting
from tables.web.base.sql import sql_identifier
from tests.web.ui_tables import EVIL, history_table

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db


@pytest.fixture
def table(roots):
    """'Sales' (v0..v3 as tests/web/ui_tables.history_table), then v4: an append with userMetadata."""
    path = history_table(roots / "sales")
    deltalake.write_deltalake(
        str(path),
        pa.table({"x": [5, 6, 7], "p": ["a", "a", "c"]}),
        mode="append",
        commit_properties=deltalake.CommitProperties(custom_metadata={"userMetadata": f"nightly load {EVIL}"}),
    )
    t = registration.register_table("Sales", str(path), "orders by region")
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


def text(r) -> str:
    return r.content.decode()


def body(r) -> bytes:
    return b"".join(r.streaming_content)


# --- tabs ------------------------------------------------------------------------------------


TABS = {
    "/t/sales/": "Overview",
    "/t/sales/schema/": "Schema",
    "/t/sales/history/": "History",
    "/t/sales/charts/": "Timeline &amp; growth",
    "/t/sales/versions/": "Versions",
    "/t/sales/diff/": "Compare",
    "/t/sales/restores/": "Restores",
    "/t/sales/v/2/": "Versions",
}


def test_each_tab_has_its_own_url_and_marks_itself_current(browser, table) -> None:
    for url, name in TABS.items():
        r = browser.get(url)
        assert r.status_code == 200, url
        current = re.findall(r'<a href="([^"]+)" aria-current="page">([^<]+)</a>', text(r))
        assert [c[1] for c in current] == [name], url
        assert 'aria-label="Table sections"' in text(r)


def test_overview_shows_the_state_now_reachability_and_last_commits(browser, table) -> None:
    page = text(browser.get("/t/sales/"))
    assert "orders by region" in page and "In-Commit Timestamps" in page
    summary = page.split('id="reach-summary"')[1].split("</ul>")[0]
    assert "<strong>5</strong> versions: readable" in summary
    last = page.split('id="last-commits"')[1].split("</table>")[0]
    assert [int(v) for v in re.findall(r'href="/t/sales/v/(\d+)/"', last)] == [4, 3, 2, 1, 0]
    # no promotional card: the Overview says what the table is, each tab what it answers
    assert 'id="only-here"' not in page and "Answers no other Delta tool gives" not in page
    # the page before tabs answered ?as_of= and history filters: old links land on their tab
    r = browser.get("/t/sales/", {"as_of": "2020-01-01"})
    assert r.status_code == 302 and r["Location"] == "/t/sales/versions/?as_of=2020-01-01"
    r = browser.get("/t/sales/", {"operation": "DELETE", "page": "1"})
    assert r.status_code == 302 and r["Location"] == "/t/sales/history/?operation=DELETE&page=1"


def test_time_travel_past_the_latest_commit_follows_allow_latest(browser, table) -> None:
    r = browser.get("/t/sales/versions/", {"as_of": "2999-01-01 00:00:00"})
    assert r.status_code == 400 and "after the latest commit" in text(r)
    r = browser.get("/t/sales/versions/", {"as_of": "2999-01-01 00:00:00", "allow_latest": "on"})
    assert r.status_code == 200 and "<strong>version 4</strong>" in text(r)
    assert 'name="allow_latest" id="tt-allow-latest" checked' in text(r)
    api = browser.get(f"/api/tables/{table.pk}/resolve/", {"timestamp": "2999-01-01 00:00:00", "allow_latest": "true"})
    assert api.status_code == 200 and api.json()["version"] == 4  # the same answer as the API's


def test_time_travel_before_the_first_commit_follows_allow_earliest(browser, table) -> None:
    r = browser.get("/t/sales/versions/", {"as_of": "2000-01-01 00:00:00"})
    assert r.status_code == 400 and "before the earliest version" in text(r)
    assert 'name="allow_earliest" id="tt-allow-earliest">' in text(r)  # offered, not ticked
    r = browser.get("/t/sales/versions/", {"as_of": "2000-01-01 00:00:00", "allow_earliest": "on"})
    page = text(r)
    assert r.status_code == 200 and "<strong>version 0</strong>" in page
    assert 'name="allow_earliest" id="tt-allow-earliest" checked' in page
    assert "allow_earliest answered version 0" in page  # the answer says why it is version 0
    answer = page.split('id="tt-answer"')[1].split("</section>")[0]
    assert 'href="/t/sales/v/0/"' in answer  # the version page, and the diff with the latest
    assert 'href="/t/sales/diff/?from=0&amp;to=4"' in answer
    api = browser.get(f"/api/tables/{table.pk}/resolve/", {"timestamp": "2000-01-01 00:00:00", "allow_earliest": "1"})
    assert api.status_code == 200 and api.json()["version"] == 0  # the same answer as the API's
    assert "allow_earliest answered version 0" in api.json()["rule"]
    refused = browser.get(f"/api/tables/{table.pk}/resolve/", {"timestamp": "2000-01-01", "allow_earliest": "x"})
    assert refused.status_code == 400 and "allow_earliest" in text(refused)
    # allow_earliest never changes a time inside the history: the table's first commit time answers v0
    v0 = Commit.objects.get(table=table, version=0).timestamp
    same = browser.get(f"/api/tables/{table.pk}/resolve/", {"timestamp": str(v0), "allow_earliest": "1"}).json()
    assert same["version"] == 0 and "allow_earliest" not in same["rule"]


def test_open_a_version_from_the_versions_tab(browser, table) -> None:
    r = browser.get("/t/sales/versions/", {"v": "3"})
    assert r.status_code == 302 and r["Location"] == "/t/sales/v/3/"
    r = browser.get("/t/sales/versions/", {"v": "three"})
    assert r.status_code == 400 and "must be a version number" in text(r)


# --- history ---------------------------------------------------------------------------------


def test_history_has_user_metadata_and_chips_with_units(browser, table) -> None:
    first = text(browser.get("/t/sales/history/"))  # the most read columns: metrics, no metadata
    assert ">operationMetrics</" in first and "nightly load" not in first
    r = browser.get("/t/sales/history/", {"cols": ["userMetadata", "operationMetrics"]})
    page = text(r)
    assert "nightly load &lt;script&gt;" in page and "<script>alert" not in page
    # the chips of version 4's operationMetrics cell (the one chips cell of these columns)
    row = page.split('<tr id="v4">', 1)[1].split("</tr>", 1)[0]
    cell = row.split('<td class="chips-cell">', 1)[1].split("</td>", 1)[0]
    chip = r'<li class="chip"[^>]*><span class="k">([^<]*)</span> <span class="v">([^<]*)</span></li>'
    metrics = {html.unescape(k): html.unescape(v) for k, v in re.findall(chip, cell)}
    raw = Commit.objects.get(table=table, version=4).operation_metrics
    # delta-rs names its metrics in snake_case; each number carries its unit
    rows_key = next(k for k in raw if formatting.metric_unit(k) == "rows")
    assert metrics[rows_key] == f"{int(raw[rows_key]):,} row{'' if int(raw[rows_key]) == 1 else 's'}"
    ms_key = next(k for k in raw if formatting.metric_unit(k) == "ms")
    assert metrics[ms_key].endswith(("ms", " s", "min"))
    assert 'class="chip"' in page and '<details class="more-chips">' in page


def test_metric_units() -> None:
    assert formatting.metric_text("numOutputRows", "12345") == "12,345 rows"
    assert formatting.metric_text("numOutputRows", 1) == "1 row"
    assert formatting.metric_text("numRemovedBytes", 1536) == "1.5 KB"
    assert formatting.metric_text("numTargetFilesAdded", "3") == "3 files"
    assert formatting.metric_text("executionTimeMs", 65_000) == "1 min 5 s"
    assert formatting.metric_text("scanTimeMs", 250) == "250 ms"
    assert formatting.metric_text("predicate", '["x > 1"]') == '["x > 1"]'
    assert formatting.metric_text("numFiles", "1.5") == "1.5"  # not an integer: as given
    c = formatting.chips({str(i): i for i in range(10)}, units=True)
    assert len(c["shown"]) == formatting.CHIPS_SHOWN and len(c["more"]) == 10 - formatting.CHIPS_SHOWN


def test_history_sorts_and_keeps_the_sort_in_links(browser, table, monkeypatch) -> None:
    from tables.web.tabs import history as history_views

    def listed(params) -> list[int]:
        return [row["version"] for row in browser.get("/t/sales/history/", params).context["rows"]]

    assert listed({}) == [4, 3, 2, 1, 0]
    assert listed({"sort": "version"}) == [0, 1, 2, 3, 4]
    ops = {c.version: c.operation for c in Commit.objects.filter(table=table)}
    by_op = listed({"sort": "operation"})
    assert [ops[v] for v in by_op] == sorted(ops[v] for v in by_op)
    assert listed({"sort": "nonsense"}) == [4, 3, 2, 1, 0]
    times = {c.version: c.timestamp for c in Commit.objects.filter(table=table)}
    asc = listed({"sort": "timestamp"})
    assert [times[v] for v in asc] == sorted(times.values())
    monkeypatch.setattr(history_views, "HISTORY_PAGE_SIZE", 2)
    page = text(browser.get("/t/sales/history/", {"sort": "version", "operation": "WRITE"}))
    assert 'href="?sort=version&amp;operation=WRITE&amp;page=2"' in page
    # the header of the current sort says so to assistive technology, and links to the reverse
    assert re.search(r'aria-sort="ascending"><a href="\?[^"]*sort=-version', page)


def test_history_column_chooser(browser, table) -> None:
    r = browser.get("/t/sales/history/", {"cols": ["operation", "userMetadata"]})
    head = text(r).split('class="grid history"')[1].split("</thead>")[0]
    headers = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th scope=\"col\"[^>]*>(.*?)</th>", head)]
    assert headers == ["version", "operation", "userMetadata"]
    body_ = text(r).split('class="grid history"')[1].split("</tbody>")[0]
    assert body_.count("<td") == 3 * 5
    assert 'name="cols" value="operation" checked' in text(r)
    assert 'name="cols" value="engineInfo">' in text(r)


def test_history_filters_follow_the_query_and_the_next_sync(browser, table) -> None:
    """The filter form is rendered once per query and synced state: another query shows its
    own values, and a sync that brings a new operation offers it."""
    first = text(browser.get("/t/sales/history/", {"operation": "WRITE"}))
    assert 'name="operation" value="WRITE"' in first
    other = text(browser.get("/t/sales/history/", {"operation": "DELETE", "cols": ["userMetadata"]}))
    assert 'name="operation" value="DELETE"' in other and 'value="WRITE"' not in other.split("<datalist")[0]
    assert 'name="cols" value="operation" checked' in first and 'name="cols" value="operation">' in other
    ops = re.findall(
        r'<option value="([^"]+)">',
        text(browser.get("/t/sales/history/")).split('<datalist id="operations">')[1].split("</datalist>")[0],
    )
    assert "OPTIMIZE" not in ops
    deltalake.DeltaTable(table.location).optimize.compact()
    sync.sync_table(table.pk)
    ops_after = re.findall(
        r'<option value="([^"]+)">',
        text(browser.get("/t/sales/history/")).split('<datalist id="operations">')[1].split("</datalist>")[0],
    )
    assert ops_after == sorted({*ops, "OPTIMIZE"})


# --- export ----------------------------------------------------------------------------------


def _delta_rs_history(table) -> list[dict]:
    return sorted(deltalake.DeltaTable(table.location).history(), key=lambda h: -h["version"])


def test_export_csv_matches_delta_rs_history(browser, table) -> None:
    r = browser.get("/t/sales/history.csv")
    assert r.status_code == 200 and r.streaming
    assert r["Content-Type"].startswith("text/csv")
    assert r["Content-Disposition"] == 'attachment; filename="sales-history.csv"'
    rows = list(csv.DictReader(io.StringIO(body(r).decode())))
    peer = _delta_rs_history(table)
    assert [int(x["version"]) for x in rows] == [h["version"] for h in peer]
    assert [x["operation"] for x in rows] == [h["operation"] for h in peer]
    assert rows[0]["userMetadata"] == f"nightly load {EVIL}"
    for x, h in zip(rows, peer, strict=True):
        assert x["timestamp"] == format_ms(Commit.objects.get(table=table, version=h["version"]).timestamp)
        assert x["engineInfo"] == (h.get("engineInfo") or h.get("clientVersion") or x["engineInfo"])
    # filters and sort of the tab apply to the download
    r = browser.get("/t/sales/history.csv", {"operation": "WRITE", "sort": "version"})
    rows = list(csv.DictReader(io.StringIO(body(r).decode())))
    assert [int(x["version"]) for x in rows] == [h["version"] for h in reversed(peer) if h["operation"] == "WRITE"]


FORMULAS = ["=cmd|' /C calc'!A0", "+SUM(1,1)", "-2+3", "@SUM(A1:A2)", '=HYPERLINK("http://x","y")', "\tx", "\rx"]


def test_export_csv_cells_cannot_start_a_formula(browser, roots) -> None:
    path = history_table(roots / "formulas")
    for text_ in FORMULAS:
        deltalake.write_deltalake(
            str(path),
            pa.table({"x": [1], "p": ["a"]}),
            mode="append",
            commit_properties=deltalake.CommitProperties(custom_metadata={"userMetadata": text_}),
        )
    t = registration.register_table("Formulas", str(path), "")
    sync.sync_table(t.pk)
    rows = list(csv.DictReader(io.StringIO(body(browser.get("/t/formulas/history.csv", {"sort": "version"})).decode())))
    cells = [x["userMetadata"] for x in rows if x["userMetadata"]]
    # OWASP: a leading single quote makes the cell text; the rest of the string is kept
    assert cells == ["'" + f for f in FORMULAS]
    assert all(c == "" or c[0] not in "=+-@\t\r" for x in rows for c in x.values())
    # numbers stay numbers, and the Parquet export keeps the strings as written
    assert [int(x["version"]) for x in rows] == list(range(len(rows)))
    pq_rows = pq.read_table(io.BytesIO(body(browser.get("/t/formulas/history.parquet", {"sort": "version"}))))
    assert [m for m in pq_rows.column("userMetadata").to_pylist() if m] == FORMULAS


def test_export_parquet_is_a_real_parquet_file(browser, table) -> None:
    r = browser.get("/t/sales/history.parquet", {"version_from": 1})
    assert r.status_code == 200 and r.streaming
    t = pq.read_table(io.BytesIO(body(r)))
    assert t.schema == history_export.SCHEMA
    assert t.column("version").to_pylist() == [4, 3, 2, 1]
    assert t.column("userMetadata").to_pylist()[0] == f"nightly load {EVIL}"
    expected = [Commit.objects.get(table=table, version=v).timestamp for v in (4, 3, 2, 1)]
    assert [ts.timestamp() * 1000 for ts in t.column("timestamp").to_pylist()] == expected


def test_export_streams_in_row_groups(browser, table, monkeypatch) -> None:
    monkeypatch.setattr(history_export, "CHUNK_ROWS", 2)
    r = browser.get("/t/sales/history.parquet")
    chunks = [c for c in r.streaming_content if c]
    assert len(chunks) >= 3  # sent as it is written, not built whole
    f = pq.ParquetFile(io.BytesIO(b"".join(chunks)))
    assert f.metadata.num_row_groups == 3 and f.metadata.num_rows == 5


def test_export_of_bad_filters_is_an_error_page(browser, table) -> None:
    r = browser.get("/t/sales/history.csv", {"version_from": "abc"})
    assert r.status_code == 400 and "Enter a whole number" in text(r)
    assert browser.get("/t/sales/history.xlsx").status_code == 404
    from django.test import Client

    assert Client().get("/t/sales/history.csv").status_code == 302  # sign-in first


def test_api_export_streams_the_same_file_as_the_page(browser, table) -> None:
    params = {"operation": "WRITE", "sort": "version"}
    page = body(browser.get("/t/sales/history.csv", {"operation": "WRITE", "sort": "version"}))
    r = browser.get(f"/api/tables/{table.pk}/history/csv/", params)
    assert r.status_code == 200 and r.streaming and r["Content-Type"].startswith("text/csv")
    assert body(r) == page
    r = browser.get(f"/api/tables/{table.pk}/history/parquet/", {"since": "2000-01-01"})
    t = pq.read_table(io.BytesIO(body(r)))
    assert t.column("version").to_pylist() == [4, 3, 2, 1, 0]
    r = browser.get(f"/api/tables/{table.pk}/history/csv/", {"version_min": 3, "version_max": 1})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_range"
    r = browser.get(f"/api/tables/{table.pk}/history/xml/")
    assert r.status_code == 404


# --- the table list --------------------------------------------------------------------------


@pytest.fixture
def many(db):
    from tables.models import ManagedTable, SyncState, Table

    out = []
    for i in range(30):
        out.append(
            Table.objects.create(
                name=f"t{i:02d}",
                slug=f"t{i:02d}",
                location=f"/data/{'sales' if i % 3 == 0 else 'ops'}/t{i:02d}",
                num_files=i,
                size_bytes=i * 1000,
                sync_state=SyncState.ERROR if i == 7 else SyncState.OK,
                last_error="boom" if i == 7 else "",
            )
        )
    ManagedTable.objects.create(table=out[4], owner_table_id="abc", state="active")
    ManagedTable.objects.create(table=out[5], owner_table_id="def", state="proposed")
    return out


def _names(r) -> list[str]:
    return [t.name for t in r.context["tables"]]


def test_table_list_searches_sorts_pages_and_filters(browser, many) -> None:
    r = browser.get("/")
    assert _names(r) == [f"t{i:02d}" for i in range(25)] and "Tables 1–25 of 30." in text(r)
    assert 'href="?page=2"' in text(r)
    assert _names(browser.get("/", {"page": 2})) == [f"t{i:02d}" for i in range(25, 30)]
    r = browser.get("/", {"q": "SALES"})  # the location, case-insensitive
    assert _names(r) == [f"t{i:02d}" for i in range(0, 30, 3)] and "of 10 matching" in text(r)
    assert _names(browser.get("/", {"q": "t1"})) == [f"t{i}" for i in range(10, 20)]
    assert _names(browser.get("/", {"sort": "-size"}))[:3] == ["t29", "t28", "t27"]
    assert _names(browser.get("/", {"sort": "-name"}))[0] == "t29"
    assert _names(browser.get("/", {"status": "error"})) == ["t07"]
    assert _names(browser.get("/", {"status": "managed"})) == ["t04"]
    r = browser.get("/", {"q": "<script>x", "status": "bogus", "sort": "bogus"})
    assert r.status_code == 200 and "No table matches." in text(r) and "<script>x" not in text(r)
    page = text(browser.get("/", {"q": "data", "sort": "-files"}))
    assert 'href="?q=data&amp;sort=-files&amp;page=2"' in page  # the search and order go with the pages
    assert 'name="next" value="/?q=data&amp;sort=-files"' in page  # "Sync now" comes back to this list


def test_table_list_filters_tables_with_alerts(browser, many) -> None:
    from django.apps import apps

    if not apps.is_installed("alerts"):
        pytest.skip("the alerts app is not installed")
    from alerts.models import Alert

    for v in (1, 2):
        Alert.objects.create(
            table=many[9], version=v, rule="r", rule_name="big delete", severity="warning", explanation="x"
        )
    r = browser.get("/", {"status": "alerts"})
    assert _names(r) == ["t09"] and [t.plugin_values for t in r.context["tables"]] == [[2]]
    assert '<option value="alerts" selected>' in text(r)
    page = text(browser.get("/t/t09/"))
    assert 'id="alerts"' in page and page.count("big delete") == 2


def test_each_order_of_the_table_list_and_its_search_read_an_index(many) -> None:
    """At 100,000 tables a page of 25 is read off an index (no sort of every table), and the
    search reads the narrow (name, location, slug) index, not every whole row (SQLite's)."""
    from django.db import connection
    from django.test import RequestFactory

    from tables.web.catalog.table_list import TABLE_SORTS, _table_rows

    if connection.vendor != "sqlite":
        pytest.skip("the plans are SQLite's")
    for sort in TABLE_SORTS:
        plan = _table_rows(RequestFactory().get("/", {"sort": sort}))[0][:25].explain()
        assert "TEMP B-TREE" not in plan and "USING INDEX" in plan, (sort, plan)
    plan = _table_rows(RequestFactory().get("/", {"q": "sales"}))[0][:25].explain()
    assert "table_list_search" in plan and "TEMP B-TREE" not in plan, plan


# --- charts ----------------------------------------------------------------------------------


def test_chart_hover_names_version_time_source_and_anomaly(browser, table) -> None:
    from tables.models import Anomaly
    from tables.web.base import charts

    Anomaly.objects.create(table=table, version=2, kind="non_monotonic", detail=f"went back {EVIL}")
    from django.core.cache import cache

    cache.clear()
    data = browser.get("/t/sales/charts.json").json()
    trace = data["timeline"]["data"][0]
    assert "version %{x}" in trace["hovertemplate"] and "source: %{customdata[0]}" in trace["hovertemplate"]
    by_version = dict(zip(trace["x"], trace["customdata"], strict=True))
    assert by_version[2][2].startswith("<br>anomaly: non_monotonic: went back &lt;script&gt;")
    assert by_version[3][2] == ""
    removed = set(data["config"]["modeBarButtonsToRemove"])
    assert {"sendDataToCloud", "lasso2d", "select2d", "toggleSpikelines"} <= removed
    assert "rangeslider" not in data["timeline"]["layout"]["xaxis"]  # 5 versions: no slider
    rows = [
        {
            "version": v,
            "timestamp": v * 1000,
            "timestamp_source": "file",
            "in_commit_timestamp": None,
            "file_modification_time": v * 1000,
            "adjusted": False,
            "operation": "WRITE",
        }
        for v in range(60)
    ]
    long = charts.timeline_figure(table, rows, [])
    assert long["layout"]["xaxis"]["rangeslider"]["visible"] is True


# --- readable diffs and copy as SQL ----------------------------------------------------------


def test_ict_enablement_timestamp_reads_as_a_date_with_the_raw_value_on_hover(browser, roots) -> None:
    from tables.delta.write.commit import enable_ict

    path = history_table(roots / "clock")
    enable_ict(str(path))  # v4
    t = registration.register_table("clock", str(path))
    sync.sync_table(t.pk)
    t.refresh_from_db()
    raw = str(t.ict_enablement_timestamp)
    r = browser.get("/t/clock/diff/", {"from": 3, "to": 4})
    changes = text(r).split('id="property-changes"', 1)[1].split("</table>", 1)[0]
    row = changes.split("<td><code>delta.inCommitTimestampEnablementTimestamp</code></td>", 1)[1].split("</tr>", 1)[0]
    assert row.endswith(f'<td><code title="{raw} (epoch milliseconds)">{format_ms(int(raw))}</code></td>')
    page = text(browser.get("/t/clock/v/4/"))
    assert f'title="{raw} (epoch milliseconds)">{format_ms(int(raw))}</code>' in page


def test_copy_as_sql_for_a_version_a_time_travel_and_a_diff(browser, table) -> None:
    loc = table.location
    page = text(browser.get("/t/sales/v/2/"))
    assert f"SELECT * FROM delta.`{loc}` VERSION AS OF 2" in page
    assert f"SELECT * FROM delta.`{loc}`@v2" in page
    ts = format_ms(Commit.objects.get(table=table, version=2).timestamp)
    assert f"SELECT * FROM delta.`{loc}` TIMESTAMP AS OF &#x27;{ts}&#x27;" in page
    assert 'data-copy="sql-q-1"' in page and 'id="sql-q-1"' in page and "tables/copy" in page
    page = text(browser.get("/t/sales/versions/", {"as_of": ts}))
    assert f"SELECT * FROM delta.`{loc}` VERSION AS OF 2" in page and 'id="sql-tt-1"' in page
    page = text(browser.get("/t/sales/diff/", {"from": 1, "to": 3}))
    assert f"VERSION AS OF 3\nEXCEPT ALL\nSELECT * FROM delta.`{loc}` VERSION AS OF 1" in page
    assert sql_identifier("/a/b`c") == "delta.`/a/b``c`"


def test_diff_lists_files_with_size_partitions_and_rows_as_delta_rs_reads_them(browser, table) -> None:
    from urllib.parse import unquote

    def adds(version: int) -> dict[str, tuple[int, int, str]]:
        rows = pa.table(deltalake.DeltaTable(table.location, version=version).get_add_actions(flatten=True))
        return {unquote(r["path"]): (r["size_bytes"], r["num_records"], r["partition.p"]) for r in rows.to_pylist()}

    before, after = adds(0), adds(4)
    r = browser.get("/t/sales/diff/", {"from": 0, "to": 4})
    page = text(r)
    for side, expected in (("added", set(after) - set(before)), ("removed", set(before) - set(after))):
        table_html = page.split(f'id="files-{side}"')[1].split("</table>")[0]
        shown = re.findall(
            r'<code class="path">([^<]+)</code></td><td class="small nowrap"><code>([^<]*)</code></td>\s*'
            r'<td class="num nowrap" title="(\d+) bytes">([^<]+)</td>\s*<td class="num">([^<]+)</td>',
            table_html,
        )
        assert {s[0] for s in shown} == expected and shown, side
        ref = after if side == "added" else before
        for path, part, size, human, rows in shown:
            ref_size, ref_rows, ref_part = ref[path]
            assert int(size) == ref_size and rows == f"{ref_rows:,}", path
            assert part == f"p={ref_part}"
            assert human.replace("\xa0", " ").endswith("bytes")  # human units, the bytes on hover
    assert '<th scope="col" class="num">Rows</th>' in page
    # the API keeps `sample` (paths) and adds `sampleFiles` with the same facts
    api = browser.get(f"/api/tables/{table.pk}/diff/", {"from": 0, "to": 4}).json()
    files = api["filesRemoved"]["sampleFiles"]
    assert api["filesRemoved"]["sample"] == [f["path"] for f in files]
    assert [(f["size"], f["numRecords"], f["partitionValues"]["p"]) for f in files] == [
        before[f["path"]] for f in files
    ]


def test_diff_file_without_stats_or_footer_reads_rows_unknown(browser, roots) -> None:
    from tests.web.ui_tables import ict_table

    t = registration.register_table("ict", str(ict_table(roots / "ict")))
    sync.sync_table(t.pk)
    page = text(browser.get("/t/ict/diff/", {"from": 3, "to": 5}))
    added = page.split('id="files-added"')[1].split("</table>")[0]
    assert added.count('no stats and its Parquet footer cannot be read (the file is gone)">unknown</span>') == 2
    assert 'title="1234 bytes">1.2' in added and "p=z/extra-0.parquet" in added


def test_the_register_form_says_where_tables_may_be(browser, settings, tmp_path) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path / "lake"), "s3://bucket/tables"]
    page = browser.get("/tables/register/").content.decode()
    assert f"Allowed under: {tmp_path / 'lake'}, s3://bucket/tables." in page and "An absolute path" in page
    assert f'placeholder="{tmp_path / "lake"}/…"' in page


def test_a_vacuumed_versions_page_says_so_and_disables_what_cannot_work(roots, browser, settings) -> None:
    import pyarrow as pa

    from tables.services.catalog.registration import register_table
    from tables.services.sync.store import sync_table

    deltalake = pytest.importorskip("deltalake")
    path = roots / "vac"
    deltalake.write_deltalake(str(path), pa.table({"x": [1, 2]}))
    first = set(deltalake.DeltaTable(str(path)).file_uris())
    deltalake.write_deltalake(str(path), pa.table({"x": [3]}), mode="overwrite")
    for uri in first:  # what a VACUUM would delete: version 0's files
        Path(uri.removeprefix("file://")).unlink()
    t = register_table("vac", str(path))
    sync_table(t.pk)
    old = browser.get("/t/vac/v/0/").content.decode()
    assert 'id="version-unreadable"' in old and "1 file vacuumed" in old
    assert re.search(r'<button type="submit" id="preview-rows" disabled', old)
    assert 'href="/t/vac/restore/?version=0"' not in old
    new = browser.get("/t/vac/v/1/").content.decode()
    assert 'id="version-unreadable"' not in new and re.search(r'id="preview-rows">', new)


def test_the_overview_shows_the_columns_partitioning_and_properties(roots, browser) -> None:
    from tables.services.catalog.registration import register_table
    from tables.services.sync.store import sync_table

    deltalake = pytest.importorskip("deltalake")
    path = roots / "ov"
    deltalake.write_deltalake(
        str(path),
        pa.table({"id": pa.array([1], pa.int64()), "region": ["eu"]}),
        partition_by=["region"],
        configuration={"delta.appendOnly": "false"},
    )
    sync_table(register_table("ov", str(path)).pk)
    page = browser.get("/t/ov/").content.decode()
    columns = page[page.index('id="columns"') :]
    names = [f.name for f in deltalake.DeltaTable(str(path)).schema().fields]  # the peer's reading
    assert names == ["id", "region"]
    for name in names:
        assert f"<code>{name}</code>" in columns
    assert '<span class="badge">partition</span>' in columns and "<code>long</code>" in columns
    assert "<code>delta.appendOnly</code>" in page[page.index('id="overview-properties"') :]


def test_charts_offer_no_way_to_plotlys_cloud(browser, table) -> None:
    config = browser.get("/t/sales/charts.json").json()["config"]
    assert config["showLink"] is False and config["showSendToCloud"] is False
    assert config["showEditInChartStudio"] is False and config["plotlyServerURL"] == ""
    assert {"sendDataToCloud", "editInChartStudio"} <= set(config["modeBarButtonsToRemove"])
