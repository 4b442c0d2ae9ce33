"""A pin by legal holds on S3 with Object Lock (moto's server) holds whatever runs first: delta-rs
runs a zero-retention VACUUM, a checkpoint and its log cleanup before deltaweb's next sync, so
the log no longer says version 1's files were removed. The sync still notices that the held
objects are behind delete markers, copies their held versions into the pin store, and the kept
table is one any engine opens as it is: delta-rs, given only the pin store's storage options,
reads version 1's rows from it, and so does deltaweb's preview source."""

from __future__ import annotations

import threading
import uuid

import pytest

from tables.models import PinEvent, PinState
from tables.services.catalog import registration
from tables.services.pins import lifecycle as pins
from tables.services.pins import queries as pin_queries
from tables.services.pins import store as pin_store
from tables.services.sync import store as sync
from tests.web.pins.test_pins import users  # noqa: F401 (a fixture)

deltalake = pytest.importorskip("deltalake")
pa = pytest.importorskip("pyarrow")

pytestmark = pytest.mark.django_db
BUCKET = "pins-holds-first"


def _object_lock_bucket(s3_server, monkeypatch, settings):
    """The bucket with Object Lock (made once), its `allowed/` the allowed root and
    a pin store of its own under it (a new one each run): the bucket's boto3 client."""
    from tests.conftest import s3_buckets

    client = s3_buckets(s3_server, monkeypatch, settings)
    if BUCKET not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET, ObjectLockEnabledForBucket=True)
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{BUCKET}/allowed"]
    settings.DELTAWEB_PIN_STORE = f"s3://{BUCKET}/allowed/pins-{uuid.uuid4().hex[:8]}"  # a new store each run
    return client


def _rows(table) -> list[dict]:
    return sorted(pa.table(table).to_pylist(), key=lambda r: r["id"])


def test_holds_hold_when_vacuum_checkpoint_and_cleanup_run_before_a_sync(
    s3_server,
    monkeypatch,
    settings,
    users,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    from tests.core.test_keep_s3 import rows as s3_rows
    from tests.core.test_keep_s3 import write_table

    _object_lock_bucket(s3_server, monkeypatch, settings)
    location = f"s3://{BUCKET}/allowed/t-{uuid.uuid4().hex[:8]}"
    write_table(s3_server, location)
    expected = s3_rows(s3_server, location, 1)
    table = registration.register_table(f"held-{uuid.uuid4().hex[:6]}", location)
    sync.sync_table(table.pk)
    pin = pins.create_pin(table, 1, "quarter end", "close", users["analyst"])
    assert pin_store.write_pin(pin.pk)["state"] == PinState.ACTIVE
    pin.refresh_from_db()
    assert pin.protection == "legal holds"

    # delta-rs, with no sync between: VACUUM (retention 0), a checkpoint, and log cleanup with a
    # log retention of 0 (S3 keeps no settable file time: the table says its commits have expired)
    opts = s3_server.storage_options()
    dt = deltalake.DeltaTable(location, storage_options=opts)
    dt.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt = deltalake.DeltaTable(location, storage_options=opts)
    dt.create_checkpoint()
    deltalake.DeltaTable(location, storage_options=opts).cleanup_metadata()
    with pytest.raises(Exception):  # noqa: B017 (delta-rs's own errors) the table lost version 1
        s3_rows(s3_server, location, 1)

    with django_capture_on_commit_callbacks(execute=True):
        sync.sync_table(table.pk)

    notes = list(PinEvent.objects.filter(pin=pin).values_list("note", flat=True))
    assert any("held versions copied into the pin store" in n for n in notes), notes
    snap = pin_queries.pinned_snapshot(table, 1)
    from tables.services.versions.read import snapshot_at

    source = snapshot_at(table, 1)
    assert source.version == 1 and sorted(source.file_paths()) == sorted(snap.file_paths())
    # another engine opens the kept table as it is, with the pin store's options alone
    kept = deltalake.DeltaTable(pin.store_location, storage_options=opts)
    assert all("://" not in u.split(pin.store_location, 1)[-1] for u in kept.file_uris())
    assert _rows(kept.to_pyarrow_table()) == expected


def test_a_held_version_with_deletion_vectors_settles_self_contained(
    s3_server,
    monkeypatch,
    settings,
    users,  # noqa: F811
):
    """A Spark-written table with deletion vectors and column mapping (a golden table) in a bucket
    with Object Lock: its held objects deleted by anyone (delete markers, no commit to tell of
    it), the beat's sweep notices and settles. The kept table names only its own files: each data
    file has the golden table's bytes, each deletion vector is a relative one beside the data
    that deletes the same rows as the golden table's (delta-rs 1.6 reads no deletion vectors)."""
    from tables.delta.snapshot.dv import read_deletion_vector
    from tables.delta.snapshot.files import log_add_actions
    from tables.delta.snapshot.state import load_snapshot
    from tables.delta.storage.opening import as_storage, open_storage
    from tests.conftest import golden_path

    golden = golden_path("dv-with-columnmapping")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(golden)]
    source = open_storage(str(golden))  # what the golden table's latest version names and deletes
    want = load_snapshot(source)
    want_adds = {a["path"]: a for a in log_add_actions(source, want, want.files)[0]}
    deleted = {p: read_deletion_vector(source, a.get("deletionVector")).tolist() for p, a in want_adds.items()}
    data = {p: (golden / p).read_bytes() for p in want_adds}

    client = _object_lock_bucket(s3_server, monkeypatch, settings)
    prefix = f"allowed/dv-{uuid.uuid4().hex[:8]}"
    for path in sorted(p for p in golden.rglob("*") if p.is_file()):
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{path.relative_to(golden).as_posix()}", Body=path.read_bytes())
    location = f"s3://{BUCKET}/{prefix}"
    table = registration.register_table(f"dv-{uuid.uuid4().hex[:6]}", location)
    sync.sync_table(table.pk)
    table.refresh_from_db()
    pin = pins.create_pin(table, table.last_synced_version, "dv", "why", users["analyst"])
    assert pin_store.write_pin(pin.pk)["state"] == PinState.ACTIVE
    pin.refresh_from_db()
    assert pin.protection == "legal holds"
    assert pins.sweep_pins()["settled"] == []  # nothing deleted yet: nothing copied

    for obj in client.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/")["Contents"]:
        if "/_delta_log/" not in obj["Key"]:
            client.delete_object(Bucket=BUCKET, Key=obj["Key"])  # a delete marker above the held version
    assert pins.sweep_pins()["settled"] == [pin.pk]

    assert table.last_synced_version == want.version
    kept_store = as_storage(pin.store_location)
    kept = load_snapshot(kept_store)
    adds = log_add_actions(kept_store, kept, kept.files)[0]
    assert kept.version == 1 and sorted(a["path"] for a in adds) == sorted(want_adds)
    with_dv = 0
    for add in adds:
        assert "://" not in add["path"]
        assert kept_store.read(kept_store.resolve(add["path"])) == data[add["path"]]
        dv = add.get("deletionVector")
        if dv:
            with_dv += 1
            assert dv["storageType"] == "u"
            assert read_deletion_vector(kept_store, dv).tolist() == deleted[add["path"]]
    assert with_dv > 0


def test_a_hold_refused_leaves_the_pin_not_protected_and_no_hold_behind(s3_server, monkeypatch, settings, users):  # noqa: F811
    """One legal hold refused (an injected AccessDenied, as without s3:PutObjectLegalHold): the pin
    fails as "not protected", saying why, and the holds already placed are released."""
    from tables.delta.errors import ObjectStoreAccessError
    from tables.delta.storage.backends.s3_versions import S3VersionedBucket
    from tests.core.test_keep_s3 import write_table

    client = _object_lock_bucket(s3_server, monkeypatch, settings)
    location = f"s3://{BUCKET}/allowed/t-{uuid.uuid4().hex[:8]}"
    write_table(s3_server, location)
    table = registration.register_table(f"refused-{uuid.uuid4().hex[:6]}", location)
    sync.sync_table(table.pk)
    held, calls = [], []
    real = S3VersionedBucket.hold_current
    lock = threading.Lock()

    def hold(self, key):
        with lock:  # the holds are placed from several threads: the second one is refused
            calls.append(key)
            if len(calls) > 1:
                raise ObjectStoreAccessError(f"{self.where}/{key}: access denied by the object store (AccessDenied)")
            held.append((key, real(self, key)))
            return held[-1][1]

    monkeypatch.setattr(S3VersionedBucket, "hold_current", hold)
    pin = pins.create_pin(table, 1, "refused", "why", users["analyst"])
    assert "failed" in pin_store.write_pin(pin.pk)
    pin.refresh_from_db()
    assert pin.state == PinState.FAILED and pin.protection == "not protected" and "AccessDenied" in pin.error
    assert pins.held_by(pin) == "not protected"
    assert held  # one was placed before the refusal, and released
    for key, version_id in held:
        legal = client.get_object_legal_hold(Bucket=BUCKET, Key=key, VersionId=version_id)
        assert legal["LegalHold"]["Status"] == "OFF"
