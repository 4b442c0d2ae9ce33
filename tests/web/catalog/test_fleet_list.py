"""The tables list as a fleet view: each table's last commit, commits in the last day, versions
past its log retention, when it was last checked, its alerts; sorted by last commit; the same
few queries whatever the number of tables."""

from __future__ import annotations

import os
import re
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tables.models import Table
from tables.services.catalog.registration import register_table
from tables.services.sync.store import sync_table
from tests.web.sync.test_probe import small_table

pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db

DAY = 86_400


def age(path, days: float) -> None:
    """Every commit file of the table `days` old (file times: no ICT here)."""
    for i, f in enumerate(sorted((path / "_delta_log").glob("*.json"))):
        t = time.time() - days * DAY + i
        os.utime(f, (t, t))


def cells(page: str, name: str) -> list[str]:
    row = re.search(rf">{name}</a>.*?</tr>", page, re.S)[0]
    return [re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_the_list_shows_each_tables_recent_and_old_commits(roots, browser) -> None:
    fresh = small_table(roots / "fresh", 3)
    old = small_table(roots / "old", 4)
    age(old, 40)  # past the default 30-day log retention
    for name, path in (("fresh", fresh), ("old", old)):
        sync_table(register_table(name, str(path)).pk)
    page = browser.get("/").content.decode()
    assert "Commits, 24 h" in page and "Past retention" in page
    fresh_cells, old_cells = cells(page, "fresh"), cells(page, "old")
    # after the name: location, sync, last synced (version and time), last commit, 24 h, past retention, ...
    assert fresh_cells[4] == ["3"] and fresh_cells[5] == ["0"]
    assert old_cells[4] == ["0"] and old_cells[5] == ["4"]
    assert "checked" in " ".join(fresh_cells[1]) and "ago" in " ".join(fresh_cells[1])
    assert old_cells[3][0] < fresh_cells[3][0]  # the last commit's date
    by_commit = browser.get("/", {"sort": "-commit"}).content.decode()
    assert by_commit.index(">fresh</a>") < by_commit.index(">old</a>")
    assert Table.objects.get(name="old").log_retention_ms == 30 * DAY * 1000


def test_the_list_asks_the_same_number_of_queries_for_many_tables(roots, browser) -> None:
    path = small_table(roots / "seed", 2)
    sync_table(register_table("t-0", str(path)).pk)
    seed = Table.objects.get(name="t-0")
    browser.get("/")  # the session and the caches warm
    with CaptureQueriesContext(connection) as few:
        browser.get("/")
    Table.objects.bulk_create(
        [
            Table(
                name=f"t-{i}",
                slug=f"t-{i}",
                location=f"{path}-{i}",
                last_synced_version=1,
                last_commit_ms=seed.last_commit_ms,
            )
            for i in range(1, 300)
        ]
    )
    with CaptureQueriesContext(connection) as many:
        page = browser.get("/").content.decode()
    assert "Tables 1–25 of 300" in page
    assert len(many) == len(few)
