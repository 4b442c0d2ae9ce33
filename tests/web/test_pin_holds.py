"""A pin by legal holds on S3 with Object Lock (moto's server) holds whatever runs first: delta-rs
runs a zero-retention VACUUM, a checkpoint and its log cleanup before deltaweb's next sync, so
the log no longer says version 1's files were removed. The sync still notices that the held
objects are behind delete markers, copies their held versions into the pin store, and the kept
table is one any engine opens as it is: delta-rs, given only the pin store's storage options,
reads version 1's rows from it, and so does deltaweb's preview source."""

from __future__ import annotations

import uuid

import pytest

from tables.models import PinEvent, PinState
from tables.services import pins, registration
from tables.services.sync import store as sync
from tests.web.test_pins import users  # noqa: F401 (a fixture)

deltalake = pytest.importorskip("deltalake")
pa = pytest.importorskip("pyarrow")

pytestmark = pytest.mark.django_db
BUCKET = "pins-holds-first"


def _rows(table) -> list[dict]:
    return sorted(pa.table(table).to_pylist(), key=lambda r: r["id"])


def test_holds_hold_when_vacuum_checkpoint_and_cleanup_run_before_a_sync(
    s3_server,
    monkeypatch,
    settings,
    users,
    django_capture_on_commit_callbacks,  # noqa: F811
):
    from tests.conftest import s3_buckets
    from tests.core.test_keep_s3 import rows as s3_rows
    from tests.core.test_keep_s3 import write_table

    client = s3_buckets(s3_server, monkeypatch, settings)
    if BUCKET not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET, ObjectLockEnabledForBucket=True)
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{BUCKET}/allowed"]
    settings.DELTAWEB_PIN_STORE = f"s3://{BUCKET}/allowed/pins"
    location = f"s3://{BUCKET}/allowed/t-{uuid.uuid4().hex[:8]}"
    write_table(s3_server, location)
    expected = s3_rows(s3_server, location, 1)
    table = registration.register_table(f"held-{uuid.uuid4().hex[:6]}", location)
    sync.sync_table(table.pk)
    pin = pins.create_pin(table, 1, "quarter end", "close", users["analyst"])
    assert pins.write_pin(pin.pk)["state"] == PinState.ACTIVE
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
    snap = pins.pinned_snapshot(table, 1)
    from tables.services.versions import snapshot_at

    source = snapshot_at(table, 1)
    assert source.version == 1 and sorted(source.file_paths()) == sorted(snap.file_paths())
    # another engine opens the kept table as it is, with the pin store's options alone
    kept = deltalake.DeltaTable(pin.store_location, storage_options=opts)
    assert all("://" not in u.split(pin.store_location, 1)[-1] for u in kept.file_uris())
    assert _rows(kept.to_pyarrow_table()) == expected
