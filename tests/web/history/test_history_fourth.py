"""History as complete as DESCRIBE HISTORY (issue 57, item 6) and the tables list's Error cell
(item 4), on the server: filters by user, by a metric's range and by text in the operation
parameters on the page, the API and the export alike, checked against delta-rs's own reading of
the log; every DESCRIBE HISTORY column in the chooser; "pick two rows → compare"; where a jump
landed; the effective retention on the Overview. The browser half is
tests/e2e/test_workbench_fourth.py."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import time
from datetime import UTC
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tables.delta.history.columns import COLUMNS
from tables.models import Commit, Table
from tables.services.catalog.registration import register_table
from tables.services.sync.store import sync_table
from tests.web.pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db
COMMITS = 120
USERS = ("ana@example.com", "bob@example.com", "etl-bot", "carol@example.com")


def spark_like_table(path: Path, commits: int = COMMITS, **options: Any) -> Path:
    """Version 0 written by delta-rs, then commits as Spark writes them (userId, userName,
    notebook, clusterId, WRITE/MERGE/DELETE with their parameters and string metrics), each
    commit file a minute after the one before."""
    deltalake.write_deltalake(str(path), pa.table({"x": [0]}), **options)
    log = path / "_delta_log"
    start = int(time.time()) - commits * 60
    for v in range(1, commits):
        op = ("WRITE", "MERGE", "DELETE")[v % 3]
        params = {
            "WRITE": {"mode": "Append", "partitionBy": "[]"},
            "MERGE": {"predicate": f'["(t.id = s.id_{v})"]', "matchedPredicates": '[{"actionType":"update"}]'},
            "DELETE": {"predicate": f"[\"(region = 'eu-{v % 5}')\"]"},
        }[op]
        info = {
            "timestamp": (start + v * 60) * 1000,
            "userId": f"{1000 + v % 4}",
            "userName": USERS[v % 4],
            "operation": op,
            "operationParameters": params,
            "notebook": {"notebookId": f"nb-{v % 2}"},
            "clusterId": f"0601-cluster-{v % 3}",
            "readVersion": v - 1,
            "isolationLevel": "WriteSerializable",
            "isBlindAppend": op == "WRITE",
            "operationMetrics": {"numFiles": "1", "numOutputRows": str(v * 10), "numOutputBytes": str(500 + v)},
            "engineInfo": "Apache-Spark/3.5.3 Delta-Lake/3.3.0",
        }
        add = {
            "add": {
                "path": f"part-{v}.parquet",
                "partitionValues": {},
                "size": 500 + v,
                "modificationTime": 0,
                "dataChange": True,
            }
        }
        f = log / f"{v:020d}.json"
        f.write_text(json.dumps({"commitInfo": info}) + "\n" + json.dumps(add) + "\n")
        os.utime(f, (start + v * 60, start + v * 60))
    os.utime(log / f"{0:020d}.json", (start, start))
    return path


@pytest.fixture
def table(roots) -> Table:
    path = spark_like_table(roots / "events")
    t = register_table("events", str(path))
    sync_table(t.pk)
    return Table.objects.get(pk=t.pk)


def peer_versions(table: Table, keep) -> list[int]:
    """The versions delta-rs's history gives whose commitInfo `keep` accepts, newest first."""
    return sorted((h["version"] for h in deltalake.DeltaTable(table.location).history() if keep(h)), reverse=True)


def as_number(text: Any) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def api_versions(api, table: Table, **params: Any) -> list[int]:
    body = api.get(f"/api/tables/{table.pk}/history/", {"limit": 500, **params})
    assert body.status_code == 200, body.content
    return [r["version"] for r in body.json()["results"]]


def page_versions(browser, **params: Any) -> list[int]:
    page = browser.get("/t/events/history/", {"size": 200, **params}).content.decode()
    return [int(v) for v in re.findall(r'<tr id="v(\d+)">', page)]


def test_user_metric_and_parameter_filters_agree_with_delta_rs_on_the_api_the_page_and_the_export(
    table, browser
) -> None:
    api = token_client(make_user("otto"))
    by_user = peer_versions(table, lambda h: "bob@" in (h.get("userName") or "") or "bob@" in (h.get("userId") or ""))
    assert len(by_user) == 30
    assert api_versions(api, table, user="BOB@") == by_user == page_versions(browser, user="BOB@")
    # the user's id finds the same commits as the name
    assert api_versions(api, table, user="1001") == peer_versions(table, lambda h: h.get("userId") == "1001")

    def rows_between(lo: float, hi: float):
        return lambda h: (
            (n := as_number((h.get("operationMetrics") or {}).get("numOutputRows"))) is not None and (lo <= n <= hi)
        )

    ranged = peer_versions(table, rows_between(250, 400))
    assert ranged == list(range(40, 24, -1))
    query = {"metric": "numOutputRows", "metric_min": 250, "metric_max": 400}
    assert api_versions(api, table, **query) == ranged == page_versions(browser, **query)
    assert api_versions(api, table, metric="numOutputRows", metric_min=1150) == [119, 118, 117, 116, 115]
    assert len(api_versions(api, table, metric="numOutputBytes")) == COMMITS - 1  # a key alone: commits that have it

    in_params = peer_versions(table, lambda h: "region" in json.dumps(h.get("operationParameters") or {}))
    assert len(in_params) == 40
    assert api_versions(api, table, params="REGION") == in_params == page_versions(browser, params="REGION")
    # all of them at once, and the export of what they select
    every = {"user": "carol", "params": "region", "metric": "numOutputRows", "metric_max": 600}
    expected = peer_versions(
        table,
        lambda h: (
            h.get("userName") == "carol@example.com"
            and "region" in json.dumps(h.get("operationParameters") or {})
            and rows_between(-1e18, 600)(h)
        ),
    )
    assert expected == [59, 47, 35, 23, 11]
    assert api_versions(api, table, **every) == expected == page_versions(browser, **every)
    text = b"".join(api.get(f"/api/tables/{table.pk}/history/csv/", every).streaming_content).decode()
    assert [int(r["version"]) for r in csv.DictReader(io.StringIO(text))] == expected
    page_csv = b"".join(browser.get("/t/events/history.csv", every).streaming_content).decode()
    assert [int(r["version"]) for r in csv.DictReader(io.StringIO(page_csv))] == expected


def test_a_metric_that_is_not_a_number_matches_no_range_and_bad_filters_are_refused(table, browser) -> None:
    from tests.web.ui_tables import add_action, write_raw_commit

    info = {"timestamp": int(time.time() * 1000) + 60_000, "operation": "WRITE"}
    write_raw_commit(
        Path(table.location),
        COMMITS,
        {**info, "operationMetrics": {"numOutputRows": "n/a"}, "userName": "<b>eve</b>"},
        [add_action("x.parquet", {}, 1)],
    )
    sync_table(table.pk)
    api = token_client(make_user("otto"))
    assert COMMITS not in api_versions(api, table, metric="numOutputRows", metric_min=-1e18)
    assert COMMITS not in api_versions(api, table, metric="numOutputRows")
    assert api_versions(api, table, user="<b>eve") == [COMMITS]
    for bad in (
        {"metric_min": 1},  # a range without its metric
        {"metric": "num Output"},  # no metric's name
        {"metric": "a__b"},
        {"metric": "numOutputRows", "metric_min": 5, "metric_max": 1},
        {"metric_min": "many", "metric": "numFiles"},
        {"user": "x" * 201},
    ):
        answer = api.get(f"/api/tables/{table.pk}/history/", bad)
        assert answer.status_code == 400, (bad, answer.content)
        assert answer.json()["error"]["code"] in ("invalid", "invalid_range"), answer.json()
        page = browser.get("/t/events/history/", bad)
        assert page.status_code == 200 and "Traceback" not in page.content.decode()
        assert 'class="field invalid"' in page.content.decode() or 'class="errors"' in page.content.decode(), bad
    shown = browser.get("/t/events/history/", {"user": "eve"}).content.decode()
    assert "&lt;b&gt;eve&lt;/b&gt;" in shown and "<b>eve</b>" not in shown


def test_every_describe_history_column_is_in_the_chooser_and_shows_on_the_tab(table, browser) -> None:
    page = browser.get("/t/events/history/").content.decode()
    chooser = page[page.index('id="column-chooser"') :]
    chooser = chooser[: chooser.index("</details>")]
    offered = re.findall(r'name="cols" value="([^"]+)"', chooser)
    assert set(offered) >= {c.name for c in COLUMNS}
    for name in ("userId", "job", "notebook", "clusterId", "isolationLevel", "isBlindAppend", "engineInfo"):
        assert name in offered, name
    shown = browser.get("/t/events/history/", {"cols": ["userId", "clusterId", "notebook"]}).content.decode()
    row = shown[shown.index('<tr id="v118">') :]
    row = row[: row.index("</tr>")]
    assert "1002" in row and "0601-cluster-1" in row and "nb-0" in row


def test_two_rows_can_be_picked_to_compare(table, browser) -> None:
    page = browser.get("/t/events/history/").content.decode()
    assert re.search(r'id="compare-two" data-diff="/t/events/diff/"', page)
    assert "Compare these two" in page
    picks = re.findall(
        r'<input type="checkbox" class="pick" value="(\d+)" aria-label="Pick version \1 to compare"', page
    )
    assert [int(p) for p in picks] == list(range(119, 69, -1))
    assert 'src="/static/tables/history.js"' in page


def test_a_jump_says_where_it_landed(table, browser) -> None:
    when = Commit.objects.get(table=table, version=37).timestamp + 30_000
    text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when / 1000))
    first = browser.get("/t/events/history/", {"at_time": text})
    assert first.status_code == 302 and "at=37" in first["Location"]
    second = browser.get(first["Location"])
    assert second.status_code == 302 and second["Location"].endswith("#v37") and "jump=37" in second["Location"]
    landed = browser.get(second["Location"].split("#")[0]).content.decode()
    said = re.search(r'<p class="jumped" id="history-jumped" role="status">(.*?)</p>', landed)[1]
    assert said == f"{text} → version 37, the version current then: its row is highlighted below."
    assert '<tr id="v37">' in landed
    # the words belong to that landing only: the pages' links and the export leave them out
    assert "jump=" not in landed.split('id="history-jumped"')[1]
    plain = browser.get(browser.get("/t/events/history/", {"at": "90"})["Location"].split("#")[0]).content.decode()
    assert "→ version 90: its row is highlighted below." in plain


def test_the_overview_says_the_effective_retention(roots, browser) -> None:
    plain = register_table("plain", str(spark_like_table(roots / "plain", 3)))
    sync_table(plain.pk)
    page = browser.get("/t/plain/").content.decode()
    said = re.sub(r"<[^>]+>", "", re.search(r'<p class="small" id="retention">(.*?)</p>', page, re.S)[1])
    assert said == (
        "Effective retention: commits kept by log cleanup 30 days (default) · "
        "removed files kept by VACUUM 7 days (default)."
    )
    conf = {"delta.logRetentionDuration": "interval 2 days", "delta.deletedFileRetentionDuration": "interval 36 hours"}
    set_ = register_table("kept", str(spark_like_table(roots / "kept", 3, configuration=conf)))
    sync_table(set_.pk)
    assert deltalake.DeltaTable(set_.location).metadata().configuration == conf  # as the peer reads it
    page = browser.get("/t/kept/").content.decode()
    said = re.sub(r"<[^>]+>", "", re.search(r'<p class="small" id="retention">(.*?)</p>', page, re.S)[1])
    assert said == ("Effective retention: commits kept by log cleanup 2 days · removed files kept by VACUUM 36 hours.")
    assert 'title="delta.logRetentionDuration = interval 2 days"' in page


def test_the_list_error_cell_says_the_cause_escaped_not_the_table_name(roots, browser, settings) -> None:
    path = spark_like_table(roots / "orders_eu", 3)
    t = register_table("orders_eu", str(path))
    shutil.rmtree(path / "_delta_log")
    sync_table(t.pk)
    t.refresh_from_db()
    assert t.last_error.startswith("orders_eu: ")  # the stored message names the table first
    page = browser.get("/").content.decode()
    cell = re.search(r'<td class="error small"><span class="cause" title="([^"]*)">(.*?)</span>', page)
    assert cell[2] == t.last_error.removeprefix("orders_eu: ") and cell[1] == t.last_error
    # a cause in a file of the table says the file after it; markup from a log stays text
    Table.objects.filter(pk=t.pk).update(last_error="orders_eu/_delta_log/00000000000000000003.json: <img src=x> bad")
    page = browser.get("/").content.decode()
    cell = re.search(r'<span class="cause" title="[^"]*">(.*?)</span>', page)[1]
    assert cell == "&lt;img src=x&gt; bad (in _delta_log/00000000000000000003.json)"
    long = "orders_eu: " + "x" * 5000
    Table.objects.filter(pk=t.pk).update(last_error=long)
    cell = re.search(r'<span class="cause" title="([^"]*)">(.*?)</span>', browser.get("/").content.decode())
    assert len(cell[2]) <= 160 and len(cell[1]) <= 1000


# --- item 3: one time format, through the one filter ------------------------------------------


def test_the_one_time_filter_shows_a_row_value_to_the_millisecond_and_keeps_other_text() -> None:
    from datetime import datetime

    from tables.templatetags.times import when

    assert when("2026-12-01T22:28:13.880000Z") == (
        '<time datetime="2026-12-01T22:28:13.880000Z">2026-12-01T22:28:13.880Z</time>'
    )
    assert when("2026-12-01T22:28:13.880123Z") == (
        '<time datetime="2026-12-01T22:28:13.880123Z">2026-12-01T22:28:13.880123Z</time>'
    )
    assert when("2026-12-01T22:28:13.880Z", "s") == (
        '<time datetime="2026-12-01T22:28:13.880Z">2026-12-01T22:28:13Z</time>'
    )
    assert when(datetime(2027, 3, 1, 22, 58, 7, tzinfo=UTC)) == (
        '<time datetime="2027-03-01T22:58:07Z">2027-03-01T22:58:07Z</time>'
    )
    assert when("2026-12-01T22:28:13Z<b>") == "2026-12-01T22:28:13Z&lt;b&gt;"  # not a time: text, escaped
    assert when("not a time") == "not a time"


def test_commit_bytes_sharing_queries_and_tokens_show_times_as_the_rest_of_the_site(table, browser, client) -> None:
    from django.contrib.auth import get_user_model

    from tables.models import Recipient, RecipientQuery, Share, SharedTable

    page = browser.get("/t/events/v/5/").content.decode()
    seen = page[page.index("first seen on") :][:200]
    assert re.match(r'first seen on <time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">', seen), seen
    assert not re.search(r"\d\d:\d\d:\d\d UTC", page)

    share = Share.objects.create(name="s1")
    SharedTable.objects.create(share=share, table=table, schema="sc", name="events")
    recipient = Recipient.objects.create(name="acme")
    RecipientQuery.objects.create(recipient=recipient, table=table, shared_as="s1.sc.events", kind="query", files=1)
    overview = browser.get("/t/events/").content.decode()
    box = overview[overview.index('id="recipient-queries"') :]
    assert "When (UTC)" not in box and re.search(r'<td class="nowrap"><time datetime="[^"]+Z">', box)

    root = get_user_model().objects.create_superuser("root", password="pw-root-1")
    client.force_login(root)
    answer = client.post(
        "/admin/tables/recipient/", {"action": "issue_token", "_selected_action": [recipient.pk]}, follow=True
    )
    text = answer.content.decode()
    assert re.search(r'valid until <time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">', text), text[:2000]
    assert "tables/time.js" in text
