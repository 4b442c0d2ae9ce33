"""Keeping a version on S3 (moto's server): without Object Lock, server-side copies (CopyObject,
never a download and upload) into the pin store's prefix, and delta-rs reads the kept table
after the source's VACUUM; with Object Lock (a bucket created with ObjectLockEnabledForBucket),
legal holds on the exact object versions the version needs, which a delete cannot remove."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from tables.delta.write.keep import discard_kept, keep_version
from tests.conftest import use_store_environment

deltalake = pytest.importorskip("deltalake")
PLAIN, LOCKED, PINS = "keep-plain", "keep-locked", "keep-pins"


@pytest.fixture
def s3(s3_server, monkeypatch):
    use_store_environment(monkeypatch, s3_server.env())
    client = s3_server.boto3()
    names = {b["Name"] for b in client.list_buckets()["Buckets"]}
    for bucket in (PLAIN, PINS):
        if bucket not in names:
            client.create_bucket(Bucket=bucket)
    if LOCKED not in names:
        client.create_bucket(Bucket=LOCKED, ObjectLockEnabledForBucket=True)
    return s3_server


def write_table(s3_server, uri: str) -> None:
    """Three versions by delta-rs: two appends and a delete (version 2 drops a file of 0-1)."""
    opts = s3_server.storage_options()
    for start in (0, 10):
        data = pa.table({"id": list(range(start, start + 10)), "v": [f"r{i}" for i in range(start, start + 10)]})
        deltalake.write_deltalake(uri, data, mode="append", storage_options=opts)
    deltalake.DeltaTable(uri, storage_options=opts).delete("id < 10")


def rows(s3_server, uri: str, version: int | None = None) -> list[dict]:
    dt = deltalake.DeltaTable(uri, version=version, storage_options=s3_server.storage_options())
    return sorted(pa.table(dt.to_pyarrow_table()).to_pylist(), key=lambda r: r["id"])


def test_server_side_copies_into_the_pin_prefix(s3):
    """Same bucket: obstore's copy (CopyObject); the bytes never come through deltaweb."""
    prefix = f"s3://{PLAIN}/t-{uuid.uuid4().hex[:8]}"
    table, kept = f"{prefix}/table", f"{prefix}/pins/v1"
    write_table(s3, table)
    expected = rows(s3, table, 1)
    result = keep_version(table, 1, kept)
    assert result.placed == {"server-copy": result.files} and result.bytes_copied == 0
    # a pin store in another bucket of the same service: CopyObject across buckets
    elsewhere = f"s3://{PINS}/{prefix.rsplit('/', 1)[1]}/v1"
    assert keep_version(table, 1, elsewhere).placed == {"server-copy": result.files}
    dt = deltalake.DeltaTable(table, storage_options=s3.storage_options())
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(Exception):  # noqa: B017 (delta-rs raises its own I/O errors) the table lost version 1
        rows(s3, table, 1)
    assert rows(s3, kept) == expected == rows(s3, elsewhere)


def test_object_lock_holds_the_exact_versions(s3):
    import orjson

    prefix = f"s3://{LOCKED}/t-{uuid.uuid4().hex[:8]}"
    table, kept = f"{prefix}/table", f"{prefix}/pins/v1"
    write_table(s3, table)
    result = keep_version(table, 1, kept, hold=None)  # chosen because the bucket has Object Lock
    assert result.placed == {"hold": result.files} and result.bytes_copied == 0
    client = s3.boto3()
    holds = orjson.loads(
        client.get_object(Bucket=LOCKED, Key=f"{kept.split('/', 3)[3]}/_kept/holds.json")["Body"].read()
    )
    assert len(holds["objects"]) == result.files
    dt = deltalake.DeltaTable(table, storage_options=s3.storage_options())
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    for held in holds["objects"]:
        got = client.get_object_legal_hold(Bucket=LOCKED, Key=held["key"], VersionId=held["versionId"])
        assert got["LegalHold"]["Status"] == "ON"
        with pytest.raises(client.exceptions.ClientError):  # a held version cannot be deleted
            client.delete_object(Bucket=LOCKED, Key=held["key"], VersionId=held["versionId"])
        assert client.head_object(Bucket=LOCKED, Key=held["key"], VersionId=held["versionId"])["ContentLength"] > 0
    # the kept log names the held objects by their absolute URIs (a shallow clone)
    kept_adds = deltalake.DeltaTable(kept, storage_options=s3.storage_options()).get_add_actions(flatten=True)
    assert all(p.startswith(f"s3://{LOCKED}/") for p in pa.table(kept_adds).column("path").to_pylist())
    # a removed pin releases its holds and deletes its kept log
    assert discard_kept(kept) > 0
    for held in holds["objects"]:
        got = client.get_object_legal_hold(Bucket=LOCKED, Key=held["key"], VersionId=held["versionId"])
        assert got["LegalHold"]["Status"] == "OFF"
