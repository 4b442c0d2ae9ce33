"""The history's commitInfo columns are declared once (tables/delta/history/columns.py) and
every place that shows them follows: the Commit model, the API, the CSV and Parquet export and
the History tab. Each column's value is checked against delta-rs's own history of the table,
and a commit written by hand gives every column a value of its kind."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest

from tables.delta.history.columns import COLUMNS, SHOWN_COLUMNS
from tables.models import Commit
from tables.services.catalog.registration import register_table
from tables.services.sync.store import sync_table
from tests.web.pages.test_api import make_user, token_client
from tests.web.ui_tables import add_action, history_table, write_raw_commit

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db

EVERY_KIND = {
    "userId": "u-17",
    "userName": "ana@example.com",
    "operation": "MERGE",
    "operationParameters": {"predicate": "t.id = s.id", "matchedPredicates": [{"actionType": "update"}]},
    "job": {"jobId": "42", "runId": "7"},
    "notebook": {"notebookId": "nb-1"},
    "clusterId": "cluster-9",
    "readVersion": 3,
    "isolationLevel": "WriteSerializable",
    "isBlindAppend": False,
    "operationMetrics": {"numTargetRowsUpdated": "5"},
    "userMetadata": "nightly merge",
    "engineInfo": "Apache-Spark/3.5.3 Delta-Lake/3.3.0",
}


@pytest.fixture
def table(roots):
    path = history_table(roots / "events")
    write_raw_commit(
        path, 4, {"timestamp": 1_700_000_000_000, **EVERY_KIND}, [add_action("p=a/x.parquet", {"p": "a"}, 1)]
    )
    t = register_table("events", str(path))
    sync_table(t.pk)
    return t


def test_every_declared_column_is_a_model_field_an_api_field_and_an_export_column() -> None:
    assert {c.name for c in COLUMNS} == set(EVERY_KIND), "a declared column this test gives no value"
    from tables.api.history.commits import CommitSerializer
    from tables.services.history import export

    fields = CommitSerializer().fields
    for c in COLUMNS:
        Commit._meta.get_field(c.field)  # raises when the model lacks it
        assert c.name in fields and c.name in export.NAMES and c.field in export.FIELDS
        assert (c.name in export.COLUMNS) == (c.shown is not None)


def test_the_api_and_the_export_agree_with_delta_rs(table) -> None:
    api = token_client(make_user("ana"))
    rows = {r["version"]: r for r in api.get(f"/api/tables/{table.pk}/history/").json()["results"]}
    peer = {h["version"]: h for h in deltalake.DeltaTable(table.location).history()}
    assert set(rows) == set(peer) == {0, 1, 2, 3, 4}
    for version, expected in peer.items():
        for c in COLUMNS:
            if c.name in expected:  # delta-rs leaves out what a commit does not say
                assert rows[version][c.name] == expected[c.name], (version, c.name)
    assert {c.name: rows[4][c.name] for c in COLUMNS} == EVERY_KIND

    text = api.get(f"/api/tables/{table.pk}/history/csv/")
    by_version = {int(r["version"]): r for r in csv.DictReader(io.StringIO(b"".join(text.streaming_content).decode()))}
    parquet = api.get(f"/api/tables/{table.pk}/history/parquet/")
    pq_rows = {r["version"]: r for r in pq.read_table(io.BytesIO(b"".join(parquet.streaming_content))).to_pylist()}
    for c in COLUMNS:
        value = EVERY_KIND[c.name]
        if c.kind == "json":
            assert json.loads(by_version[4][c.name]) == value and json.loads(pq_rows[4][c.name]) == value
        elif c.kind == "bool":
            assert by_version[4][c.name] == str(value) and pq_rows[4][c.name] is value
        else:
            assert by_version[4][c.name] == str(value) and pq_rows[4][c.name] == value


def test_the_history_tab_shows_the_declared_columns_it_should(browser, table) -> None:
    first = browser.get("/t/events/history/").content.decode()  # before any choice: the most read
    first_head = first[first.index('class="grid history"') :].split("</thead>")[0]
    for c in COLUMNS:
        assert (f">{c.name}</" in first_head) == (c.shown is not None and c.at_first), c.name
    every = ["readable", "timestamp", *(c.name for c in SHOWN_COLUMNS)]
    page = browser.get("/t/events/history/", {"cols": every}).content.decode()
    grid = page[page.index('class="grid history"') :]
    head = grid[: grid.index("</thead>")]
    for c in COLUMNS:
        assert (f">{c.name}</" in head) == (c.shown is not None), c.name
    shown = [c.name for c in SHOWN_COLUMNS]
    assert [head.index(f">{n}</") for n in shown] == sorted(head.index(f">{n}</") for n in shown)
    body = grid[grid.index("<tbody>") : grid.index("</tbody>")]
    assert "nightly merge" in body and "WriteSerializable" in body and "MERGE" in body
    assert "cluster-9" in body and "nb-1" in body  # every DESCRIBE HISTORY column is one of the tab
    only = browser.get("/t/events/history/", {"cols": ["operation", "userMetadata"]}).content.decode()
    only_grid = only[only.index('class="grid history"') :]
    only_head = only_grid[: only_grid.index("</thead>")]
    assert ">operation</" in only_head and ">userMetadata</" in only_head and ">userName</" not in only_head


def test_the_operation_filter_matches_part_of_a_name(table, browser) -> None:
    api = token_client(make_user("otto"))
    found = api.get(f"/api/tables/{table.pk}/history/", {"operation": "wri"}).json()["results"]
    assert sorted(r["operation"] for r in found) == ["WRITE", "WRITE", "WRITE"]
    page = browser.get("/t/events/history/", {"operation": "MER"}).content.decode()
    grid = page[page.index('class="grid history"') :]
    assert "MERGE" in grid and "WRITE" not in grid[grid.index("<tbody>") :]


def test_columns_and_page_size_are_remembered_and_a_version_can_be_jumped_to(roots, browser) -> None:
    from tests.web.sync.test_probe import small_table

    path = small_table(roots / "long", 60)
    t = register_table("long", str(path))
    sync_table(t.pk)

    def heads(page: str) -> str:
        grid = page[page.index('class="grid history"') :]
        return grid[: grid.index("</thead>")]

    browser.get("/t/long/history/", {"cols": ["operation", "userMetadata"], "size": "25"})
    later = browser.get("/t/long/history/").content.decode()  # a later visit, nothing in the URL
    assert ">operation</" in heads(later) and ">userName</" not in heads(later)
    assert later.count('<tr id="v') == 25 and 'option value="25" selected' in later

    jump = browser.get("/t/long/history/", {"at": "5"})
    assert jump.status_code == 302 and jump["Location"].endswith("#v5")
    landed = browser.get(jump["Location"].split("#")[0]).content.decode()
    assert '<tr id="v5">' in landed  # 60 versions, 25 a page, newest first: page 3 holds 9..0
    missing = browser.get("/t/long/history/", {"at": "999"}, follow=True).content.decode()
    assert "Version 999 is not in this history" in missing


def test_a_time_jumps_to_the_version_current_then(roots, browser) -> None:
    """'Go to time': the version current at that time (the newest commit at or before it, by the
    effective timestamp), then the page that holds it; a time before the first commit, or no
    time at all, says so on the page."""
    from tables.models import Commit
    from tests.web.sync.test_probe import small_table

    path = small_table(roots / "long", 60)
    t = register_table("long", str(path))
    sync_table(t.pk)
    times = dict(Commit.objects.filter(table=t).values_list("version", "timestamp"))
    between = times[30] + (times[31] - times[30]) // 2 if times[31] > times[30] else times[30]
    when = datetime.fromtimestamp(between / 1000, tz=UTC).isoformat(timespec="milliseconds")
    first = browser.get("/t/long/history/", {"at_time": when})
    assert first.status_code == 302 and "at=30" in first["Location"]
    landed = browser.get(first["Location"], follow=True)
    assert '<tr id="v30">' in landed.content.decode()
    early = browser.get("/t/long/history/", {"at_time": "1990-01-01"}, follow=True).content.decode()
    assert "before the table&#x27;s first commit" in early
    bad = browser.get("/t/long/history/", {"at_time": "<not a time>"}, follow=True).content.decode()
    assert "time:" in bad and "<not a time>" not in bad
    assert 'id="history-at-time"' in landed.content.decode()


def test_paging_is_above_the_history_as_well_as_below(roots, browser) -> None:
    from tests.web.sync.test_probe import small_table

    path = small_table(roots / "long", 60)
    t = register_table("long", str(path))
    sync_table(t.pk)
    page = browser.get("/t/long/history/", {"size": "25", "page": "2"}).content.decode()
    above = page.index('aria-label="History pages, above the table"')
    below = page.index('aria-label="History pages"')
    grid = page.index('class="grid history"')
    assert above < grid < below
    nav = page[above : page.index("</nav>", above)]
    assert "page 2 of 3" in nav and 'rel="prev"' in nav and 'rel="next"' in nav
