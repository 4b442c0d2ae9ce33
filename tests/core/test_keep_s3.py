"""Keeping a version on S3 (moto's server): without Object Lock, server-side copies (CopyObject,
never a download and upload) into the pin store's prefix, in the table's bucket or another one,
and delta-rs reads the kept table after the source's VACUUM. Object Lock's legal holds are
proved through a pin in the app (tests/web/pins/test_pins.py), which also releases them."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from tables.delta.write.keep import keep_version
from tests.conftest import use_store_environment

deltalake = pytest.importorskip("deltalake")
PLAIN, PINS = "keep-plain", "keep-pins"


@pytest.fixture
def s3(s3_server, monkeypatch):
    use_store_environment(monkeypatch, s3_server.env())
    client = s3_server.boto3()
    names = {b["Name"] for b in client.list_buckets()["Buckets"]}
    for bucket in (PLAIN, PINS):
        if bucket not in names:
            client.create_bucket(Bucket=bucket)
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


def test_never_kept_inside_another_s3_table(s3):
    """An object-store DIR under another table's prefix (a `_delta_log/` above it) is refused
    before anything is written, as on disk; beside it, it is kept."""
    from tables.delta.errors import KeepInsideTableError

    prefix = f"s3://{PLAIN}/t-{uuid.uuid4().hex[:8]}"
    table, other = f"{prefix}/table", f"{prefix}/other"
    write_table(s3, table)
    write_table(s3, other)
    client = s3.boto3()
    key = other.split("/", 3)[3]
    before = sorted(o["Key"] for o in client.list_objects_v2(Bucket=PLAIN, Prefix=key)["Contents"])
    with pytest.raises(KeepInsideTableError) as refused:
        keep_version(table, 1, f"{other}/pins/deep/v1")
    assert f"inside the Delta table {other}" in str(refused.value) and refused.value.code == "keep_target_in_table"
    assert sorted(o["Key"] for o in client.list_objects_v2(Bucket=PLAIN, Prefix=key)["Contents"]) == before
    assert keep_version(table, 1, f"{prefix}/pins/v1").files
