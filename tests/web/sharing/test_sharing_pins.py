"""Delta Sharing of pinned versions: a share's window ends at a pinned version after delta-rs's
zero-retention VACUUM and log cleanup, and the official `delta-sharing` connector reads it, at
the window's end and by its number, with the same rows as delta-rs read before the VACUUM. Its
file URLs serve the pin's kept table only: a grant for the pin store names the pin, covers its
version alone and serves no other file. A version whose files are gone and that no pin keeps is
refused with the protocol's error, not answered with URLs that fail."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
import requests

from tables.models import SharedTable
from tables.services.sharing import file_urls
from tests.conftest import golden_path
from tests.core.builders import writable

from ..kept_tables import peer_table, pin_place, register, vacuum
from ..sharing_site import assert_same_rows, share_tables

delta_sharing = pytest.importorskip("delta_sharing")
deltalake = pytest.importorskip("deltalake")
N = 5

# golden table -> what it stands for
GOLDEN = {
    "basic-with-inserts-deletes-checkpoint": "checkpoint",
    "dv-partitioned-with-checkpoint": "partitioned with deletion vectors",
    "dv-with-columnmapping": "column mapping",
}


@pytest.fixture
def place(settings, tmp_path) -> Path:
    return pin_place(settings, tmp_path)


@pytest.fixture
def analyst(django_user_model):
    from django.contrib.auth.models import Group

    from tables.services.access.roles import ANALYST

    user = django_user_model.objects.create_user("ana")
    user.groups.add(Group.objects.get_or_create(name=ANALYST)[0])
    return user


def delta_rs_rows(path: Path, version: int | None = None):
    return peer_table(path, version).to_pandas()


def query(site, name: str, body: dict) -> requests.Response:
    return requests.post(
        f"{site.base}/delta-sharing/shares/{site.share.name}/schemas/default/tables/{name}/query",
        json=body,
        headers={"Authorization": f"Bearer {site.token}", "delta-sharing-capabilities": "responseformat=delta"},
        timeout=30,
    )


def file_urls_of(response: requests.Response) -> list[str]:
    lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    return [line["file"]["deltaSingleAction"]["add"]["path"] for line in lines if "file" in line]


@pytest.mark.parametrize("name", sorted(GOLDEN), ids=[GOLDEN[n] for n in sorted(GOLDEN)])
def test_a_window_ending_at_a_pinned_version_reads_it_after_vacuum_and_log_cleanup(
    name, live_server, place, analyst, tmp_path
) -> None:
    from tables.services.pins import lifecycle as pins

    path = place / name
    shutil.copytree(golden_path(name), path)
    writable(path)
    table = register(path)
    want = delta_rs_rows(path, N)
    pin = pins.create_pin(table, N, "quarter-end", "Q3 close", analyst)
    vacuum(path, table, age_log=True)
    with pytest.raises(Exception):  # noqa: B017  # delta-rs: the table itself lost version N
        delta_rs_rows(path, N)

    site = share_tables(live_server.url, tmp_path, {"q3": {"table": table, "last_version": N}})
    assert delta_sharing.get_table_version(site.url("q3")) == N
    assert_same_rows(delta_sharing.load_as_pandas(site.url("q3"), use_delta_format=True), want)
    assert_same_rows(delta_sharing.load_as_pandas(site.url("q3"), version=N, use_delta_format=True), want)

    # the URLs serve the kept table's files, under a grant that names the pin
    answer = query(site, "q3", {"version": N})
    assert answer.status_code == 200, answer.text
    urls = file_urls_of(answer)
    assert urls and all(requests.get(u, timeout=30).status_code == 200 for u in urls)
    grant = file_urls.Grant(site.recipient.pk, SharedTable.objects.get(name="q3").pk, table.pk, N, N, pin.pk)
    store = Path(pin.store_location)
    kept_file = next(str(p.relative_to(store)) for p in sorted(store.rglob("*.parquet")) if "_delta_log" not in p.parts)

    def fetch(g: file_urls.Grant, key: str) -> int:
        expires = int(time.time() * 1000) + 60_000
        return requests.get(
            f"{site.base}/delta-sharing/{file_urls.signed_path(g, key, expires)}", timeout=30
        ).status_code

    assert fetch(grant, kept_file) == 200
    # a file in the pin store that the kept table's log does not name: never served
    (Path(pin.store_location) / "stray.parquet").write_bytes(b"PAR1 not a kept file")
    assert fetch(grant, "stray.parquet") == 404
    kept_names = {str(p.relative_to(store)) for p in store.rglob("*.parquet")}
    table_only = [
        str(p.relative_to(path))
        for p in sorted(path.rglob("*.parquet"))
        if "_delta_log" not in p.parts and str(p.relative_to(path)) not in kept_names
    ]
    if table_only:  # a file of the table itself: not through a grant of the pin store
        assert fetch(grant, table_only[0]) == 404
    assert fetch(grant, "_delta_log/00000000000000000000.json") == 404
    assert fetch(file_urls.Grant(*[*vars_of(grant)[:3], N - 1, N, pin.pk]), kept_file) == 403  # not the pin's version
    assert fetch(file_urls.Grant(*[*vars_of(grant)[:5], 0]), kept_file) == 404  # the table's grant: the table lost it


def vars_of(grant: file_urls.Grant) -> list:
    return [grant.recipient_id, grant.shared_id, grant.table_id, grant.first, grant.last, grant.store]


def test_a_version_whose_files_are_gone_and_not_pinned_is_refused(live_server, place, analyst, tmp_path) -> None:
    from deltalake import write_deltalake

    path = place / "orders"
    for i in range(3):  # three versions, each one file; the overwrite leaves only the last
        data = pa.table({"id": pa.array([i], pa.int64())})
        write_deltalake(str(path), data, mode="overwrite" if i else "error")
    table = register(path)
    vacuum(path, table, age_log=False)  # versions 0 and 1 lose their files, the log keeps them
    site = share_tables(live_server.url, tmp_path, {"o": {"table": table}})
    gone = query(site, "o", {"version": 1})
    assert gone.status_code == 404, gone.text
    assert gone.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST" and "no pin keeps it" in gone.json()["message"]
    with pytest.raises(Exception, match=r"RESOURCE_DOES_NOT_EXIST|404"):
        delta_sharing.load_as_pandas(site.url("o"), version=0, use_delta_format=True)
    assert_same_rows(delta_sharing.load_as_pandas(site.url("o"), version=2, use_delta_format=True), delta_rs_rows(path))


def test_a_pinned_version_of_an_s3_table_is_shared_from_the_pin_store(
    live_server, s3_server, monkeypatch, settings, analyst, tmp_path
) -> None:
    """On moto: the pin's server-side copies in the pin store's prefix are what the pre-signed
    URLs of a window ending at the pin name, after delta-rs's VACUUM of the table."""
    import uuid

    from tables.services.pins import lifecycle as pins
    from tables.services.pins import store as pin_store
    from tests.conftest import s3_buckets
    from tests.core.test_keep_s3 import rows as s3_rows
    from tests.core.test_keep_s3 import write_table

    from .test_sharing import presigned_urls_answered

    bucket = "sharing-pins"
    client = s3_buckets(s3_server, monkeypatch, settings)
    if bucket not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=bucket)
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{bucket}/allowed"]
    settings.DELTAWEB_PIN_STORE = f"s3://{bucket}/allowed/pins"
    location = f"s3://{bucket}/allowed/t-{uuid.uuid4().hex[:8]}"
    write_table(s3_server, location)  # version 2 drops a file of versions 0-1
    want = pa.Table.from_pylist(s3_rows(s3_server, location, 1)).to_pandas()
    from tables.services.catalog import registration
    from tables.services.sync import store as sync

    table = registration.register_table(f"s3-{uuid.uuid4().hex[:6]}", location)
    sync.sync_table(table.pk)
    pin = pins.create_pin(table, 1, "s3 pin", "why", analyst)
    assert pin_store.write_pin(pin.pk)["state"] == "active"  # an object store: a worker keeps it
    pin.refresh_from_db()
    dt = deltalake.DeltaTable(location, storage_options=s3_server.storage_options())
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    sync.sync_table(table.pk)
    table.refresh_from_db()
    site = share_tables(live_server.url, tmp_path, {"k": {"table": table, "last_version": 1}})
    answer = query(site, "k", {})
    assert answer.status_code == 200, answer.text
    kept_prefix = pin.store_location.split("/", 3)[3]
    urls = file_urls_of(answer)
    assert urls and all(f"/{bucket}/{kept_prefix}/" in u and "X-Amz-Signature=" in u for u in urls)
    with presigned_urls_answered(s3_server.endpoint):
        assert_same_rows(delta_sharing.load_as_pandas(site.url("k"), use_delta_format=True), want)
