"""The default database under concurrent writers: 20 API clients register tables at once on
the live server (real threads, real HTTP) while syncs write to the same SQLite file; none may
get a 5xx ("database is locked")."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
import requests
from django.db import connection
from rest_framework.authtoken.models import Token

from tables.models import Table
from tables.services.catalog.registration import register_table
from tables.services.sync.store import sync_table

from ..pages.test_api import make_user

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)
WRITERS = 20


def test_concurrent_api_writers_during_syncs_get_no_5xx(live_server, settings, tmp_path) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("this is about SQLite's locking")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    for i in range(WRITERS):
        write_deltalake(str(tmp_path / f"t{i}"), pa.table({"id": pa.array([i], pa.int64())}))
    busy = tmp_path / "busy"
    for i in range(30):
        write_deltalake(str(busy), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    busy_table = register_table("busy", str(busy))
    token = Token.objects.create(user=make_user("ana", group="analyst")).key

    statuses: list[int] = []
    errors: list[str] = []
    start = threading.Barrier(WRITERS + 1)

    def writer(i: int) -> None:
        start.wait()
        r = requests.post(
            f"{live_server.url}/api/tables/",
            json={"name": f"t{i}", "location": str(tmp_path / f"t{i}")},
            headers={"Authorization": f"Token {token}"},
            timeout=120,
        )
        statuses.append(r.status_code)
        if r.status_code >= 500:
            errors.append(r.text[:200])

    def syncer() -> None:
        start.wait()
        for _ in range(3):  # rewrites the busy table's history rows from scratch each time
            Table.objects.filter(pk=busy_table.pk).update(last_synced_version=None)
            sync_table(busy_table.pk)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    threads.append(threading.Thread(target=syncer))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == [] and sorted(statuses) == [201] * WRITERS, (statuses, errors)
    assert Table.objects.count() == WRITERS + 1
