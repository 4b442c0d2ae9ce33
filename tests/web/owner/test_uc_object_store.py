"""A catalog-managed table whose storage root is in S3 (a real S3-compatible server on
loopback), driven by the official Unity Catalog SDK: the staging table's location is in the
bucket, the client's version 0 and staged commits go there, deltaweb ratifies them reading the
staged files through its storage boundary, the client publishes, and the history is synced
from the bucket. A storage root outside the allowed prefixes is refused before anything is
written."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.authtoken.models import Token

from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.managed import commit_via_owner
from tables.models import ManagedTable, RatifiedCommit
from tables.services.access.roles import WRITER
from tables.services.sync.store import sync_table
from tests.web.catalog.test_object_store_tables import BUCKET
from tests.web.catalog.test_object_store_tables import s3 as s3  # the fixture, shared
from tests.web.owner.test_uc_api import CAT, SCH, add, create_table
from tests.web.pages.test_api import make_user, token_client
from tests.web.uc_sdk import SdkCatalogOwner, UcSession

pytest.importorskip("obstore")
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session(s3, live_server, settings):
    settings.DELTAWEB_UC_STORAGE_ROOT = f"s3://{BUCKET}/allowed/uc"
    settings.DELTAWEB_OWNER_AUTO_BACKFILL = False  # the client publishes, as UC's protocol has it do
    s = UcSession(live_server.url, Token.objects.create(user=make_user("svc", group=WRITER)).key)
    yield s
    s.close()


def keys(s3, prefix: str) -> set[str]:
    listed = s3.boto3().list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return {o["Key"][len(prefix) :] for o in listed.get("Contents", [])}


def test_a_catalog_managed_table_lives_in_s3(s3, session) -> None:
    table_id, location, _ = create_table(session, "events", local=False)
    assert location == f"s3://{BUCKET}/allowed/uc/{table_id}"
    loaded = session.load(CAT, SCH, "events")
    assert loaded.body["metadata"]["location"] == location and loaded.body["metadata"]["table-uuid"] == table_id

    # two commits through the catalog: staged in the bucket, ratified by deltaweb reading them there
    owner = SdkCatalogOwner(session, table_id, location, location)
    assert commit_via_owner(location, owner, [add("a.parquet")], "WRITE").version == 1
    assert commit_via_owner(location, owner, [add("b.parquet")], "WRITE", txn_id="txn-b").version == 2
    prefix = f"allowed/uc/{table_id}/_delta_log/"
    staged = {k for k in keys(s3, prefix) if k.startswith("_staged_commits/")}
    assert len(staged) == 2
    assert RatifiedCommit.objects.filter(table__managed__owner_table_id=table_id).count() == 2
    snap = load_snapshot(location, owner=owner)
    assert snap.version == 2 and set(snap.file_paths()) == {"a.parquet", "b.parquet"}
    assert load_snapshot(location).version == 0  # a filesystem reader sees only what is published

    # the client publishes; the bucket then holds the published commits, the catalog nothing more
    assert owner.backfill_to_version(None, 2) == 2
    assert {"00000000000000000001.json", "00000000000000000002.json"} <= keys(s3, prefix)
    assert ManagedTable.objects.get(owner_table_id=table_id).backfilled_version == 2
    assert load_snapshot(location).version == 2

    # deltaweb's history of the table, synced from the bucket
    table = ManagedTable.objects.get(owner_table_id=table_id).table
    assert table.location == location
    sync_table(table.pk)
    history = token_client(make_user("ana")).get(f"/api/tables/{table.pk}/history/").json()["results"]
    assert [h["version"] for h in history] == [2, 1, 0]
    assert [h["operation"] for h in history[:2]] == ["WRITE", "WRITE"]


def test_a_storage_root_outside_the_allowed_prefixes_is_refused_before_anything_is_written(
    s3,
    session,
    settings,
) -> None:
    outside = f"outside-{uuid.uuid4().hex}"  # the bucket is the session's: a prefix no test wrote
    settings.DELTAWEB_UC_STORAGE_ROOT = f"s3://{BUCKET}/{outside}"
    answer = session.call("POST", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/staging-tables", {"name": "x"})
    assert answer.status == 403 and answer.error_type == "PermissionDeniedException"
    assert keys(s3, f"{outside}/") == set()
