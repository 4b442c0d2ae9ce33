"""History that outlives the log: rows of commits that log cleanup deleted stay in deltaweb's
history, marked expired, through every re-sync — also when cleanup went past the last synced
version."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tables.models import Commit, Table
from tables.services.sync.store import sync_table

from ..pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


def append(path, i: int) -> None:
    write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")


def clean_log_before(path, version: int) -> None:
    for f in (path / "_delta_log").glob("*.json"):
        if int(f.name[:20]) < version:
            f.unlink()


@pytest.fixture
def table(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "events"
    for i in range(4):
        append(path, i)  # versions 0..3
    t = Table.objects.create(name="events", slug="events", location=str(path))
    sync_table(t.pk)
    t.refresh_from_db()
    assert t.last_synced_version == 3
    return t, path


def test_expired_rows_stay_through_resyncs(table, client) -> None:
    t, path = table
    append(path, 4)
    append(path, 5)
    DeltaTable(str(path)).create_checkpoint()  # at version 5
    clean_log_before(path, 5)  # cleanup went past the last synced version (3) and took 4 too
    for _ in range(2):
        sync_table(t.pk)
    t.refresh_from_db()
    rows = dict(Commit.objects.filter(table=t).values_list("version", "log_expired"))
    assert rows == {0: True, 1: True, 2: True, 3: True, 5: False}
    assert Commit.objects.get(table=t, version=5).num_files == 6
    assert t.earliest_version == 5 and t.last_synced_version == 5

    body = token_client(make_user("reader")).get(f"/api/tables/{t.pk}/history/").json()
    assert [(r["version"], r["logExpired"]) for r in body["results"]] == [
        (5, False),
        (3, True),
        (2, True),
        (1, True),
        (0, True),
    ]
    assert body["results"][1]["operation"] == "WRITE"  # the record of what was

    client.force_login(make_user("viewer"))
    html = client.get(f"/t/{t.slug}/history/").content.decode()
    assert html.count('class="badge expired"') == 4 and 'id="history-start"' in html


def test_a_table_registered_after_cleanup_says_where_history_starts(settings, tmp_path, client) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "late"
    for i in range(3):
        append(path, i)
    DeltaTable(str(path)).create_checkpoint()
    clean_log_before(path, 2)
    t = Table.objects.create(name="late", slug="late", location=str(path))
    sync_table(t.pk)
    assert list(Commit.objects.filter(table=t).values_list("version", flat=True)) == [2]
    client.force_login(make_user("viewer"))
    html = client.get(f"/t/{t.slug}/history/").content.decode()
    assert "versions from 2 on" in html and "before deltaweb first synced" in html
