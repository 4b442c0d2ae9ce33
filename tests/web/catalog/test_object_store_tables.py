"""A table in S3 (a real S3-compatible server on loopback) through the web app: registration
checks the location against the allowed prefixes, then sync, history, a version, time travel
and reachability answer as for the same table on disk."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tables.models import Table
from tables.services.sync.store import sync_table
from tests.conftest import s3_buckets

from ..pages.test_api import assert_error, make_user, token_client

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("obstore")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db
BUCKET = "web-tables"


@pytest.fixture
def s3(s3_server, monkeypatch, settings):
    s3_buckets(s3_server, monkeypatch, settings, BUCKET)
    return s3_server


def write_s3_table(s3, name: str) -> str:
    uri = f"s3://{BUCKET}/{name}"
    for i in range(3):
        write_deltalake(
            uri,
            pa.table({"id": pa.array([i], pa.int64())}),
            mode="overwrite" if i == 2 else "append",
            storage_options=s3.storage_options(),
        )
    return uri


def test_an_s3_table_end_to_end(s3, client) -> None:
    uri = write_s3_table(s3, "allowed/events")
    api = token_client(make_user("ana", group="analyst"))
    r = api.post("/api/tables/", {"name": "events", "location": uri}, format="json")
    assert r.status_code == 201, r.content
    table = Table.objects.get(name="events")
    assert table.location == uri
    sync_table(table.pk)
    table.refresh_from_db()
    assert table.last_synced_version == 2

    reader = token_client(make_user("reader"))
    history = reader.get(f"/api/tables/{table.pk}/history/").json()["results"]
    expected = DeltaTable(uri, storage_options=s3.storage_options()).history()
    assert [h["version"] for h in history] == [e["version"] for e in expected]
    assert [h["operation"] for h in history] == [e["operation"] for e in expected]
    version = reader.get(f"/api/tables/{table.pk}/versions/1/").json()
    assert version["numFiles"] == len(DeltaTable(uri, version=1, storage_options=s3.storage_options()).file_uris())
    reach = reader.get(f"/api/tables/{table.pk}/reachability/").json()
    assert [v["readable"] for v in reach["results"]] == [True, True, True]

    client.force_login(make_user("viewer"))
    page = client.get(f"/t/{table.slug}/")
    assert page.status_code == 200 and "WRITE" in page.content.decode()


def test_an_s3_location_outside_the_allowed_prefixes_is_refused(s3) -> None:
    uri = write_s3_table(s3, "elsewhere/events")
    api = token_client(make_user("ana", group="analyst"))
    body = assert_error(api.post("/api/tables/", {"name": "x", "location": uri}, format="json"), 403)
    assert "outside the allowed" in body
    assert_error(api.post("/api/tables/", {"name": "y", "location": "s3://"}, format="json"), 400)
    assert not Table.objects.exists()
