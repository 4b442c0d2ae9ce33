"""What the table pages ask the database, counted (never timed): after the first reader, the
History and Overview tabs answer from the cached rows, counts and flags of the synced state,
with the same content; a sync makes them ask again. Also the long-log case: a History page
rendered while reachability is computed is cached too, and replaced once the answer exists."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.web.ui_tables import history_table

pytestmark = pytest.mark.django_db


@pytest.fixture
def table(roots):
    path = history_table(roots / "sales")
    t = registration.register_table("Sales", str(path))
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


def _commit_scans(queries) -> list[str]:
    """Queries that count or scan a table's cached commits (what grows with the log)."""
    return [
        q["sql"]
        for q in queries
        if '"tables_commit"' in q["sql"] and ("COUNT(" in q["sql"] or '"log_expired")' in q["sql"])
    ]


def test_history_page_counts_and_flags_are_asked_once_per_synced_state(browser, table) -> None:
    with CaptureQueriesContext(connection) as first:
        r1 = browser.get("/t/sales/history/", {"operation": "WRITE"})
    assert len(_commit_scans(first.captured_queries)) == 2  # the page's count, the expired flag
    with CaptureQueriesContext(connection) as second:
        r2 = browser.get("/t/sales/history/", {"operation": "WRITE"})
    assert _commit_scans(second.captured_queries) == []
    assert len(second.captured_queries) < len(first.captured_queries)
    count = re.search(r'id="history-count">\s*(.*?)\.', r2.content.decode(), re.S)[1]
    assert count == re.search(r'id="history-count">\s*(.*?)\.', r1.content.decode(), re.S)[1]
    assert "Commits 1–3 of 3 matching the filters" in " ".join(count.split())
    # another filter is another count; a sync is a new state, asked again
    with CaptureQueriesContext(connection) as other:
        browser.get("/t/sales/history/", {"operation": "DELETE"})
    assert len(_commit_scans(other.captured_queries)) == 1
    sync.sync_table(table.pk)  # nothing new, but a new synced state (its time)
    with CaptureQueriesContext(connection) as synced:
        html = browser.get("/t/sales/history/", {"operation": "WRITE"}).content.decode()
    assert len(_commit_scans(synced.captured_queries)) == 2
    assert "Commits 1–3 of 3" in " ".join(html.split())


def test_overview_asks_the_expired_flag_once(browser, table) -> None:
    browser.get("/t/sales/")
    with CaptureQueriesContext(connection) as again:
        r = browser.get("/t/sales/")
    assert r.status_code == 200 and _commit_scans(again.captured_queries) == []


def test_a_long_logs_history_is_cached_while_pending_and_replaced_when_computed(
    browser, table, settings, monkeypatch
) -> None:
    from tables.services.jobs import lifecycle as jobs
    from tables.services.versions import reachability as app_reach

    sent = []
    monkeypatch.setattr(jobs, "send", lambda name, *args, **_kw: sent.append(args))
    settings.DELTAWEB_REACHABILITY_INLINE_VERSIONS = 2  # 4 versions: a "long" log here
    first = browser.get("/t/sales/history/").content.decode()
    with CaptureQueriesContext(connection) as q:
        again = browser.get("/t/sales/history/").content.decode()
    assert 'id="reach-pending"' in again  # served from the cached rows, not rendered again
    assert not any('"tables_commit"' in x["sql"] for x in q.captured_queries)
    assert sent == [(table.pk, None)]  # one worker asked, whatever the number of pages
    app_reach.compute_in_worker(table.pk)
    html = browser.get("/t/sales/history/").content.decode()
    assert 'id="reach-pending"' in first and 'id="reach-pending"' not in html
    assert "✓" in html  # the readable column filled in
