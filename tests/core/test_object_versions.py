"""Recovery from a versioned bucket at the storage boundary, on a real S3-compatible server (moto
in server mode): which gone objects survive as noncurrent versions, the read-only view of the
table with them back, the conditional copy back and its checks (never over a current object,
also when another writer races it or the server ignores If-None-Match), and the reachability
core's recoverable versions when log cleanup deleted commits."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from tables.delta.errors import NotVersionedError, ObjectStoreAccessError, RecoveryError, StorageError
from tables.delta.history.reachability.compute import (
    answer,
    mark_recoverable,
    reach_state,
    reachability,
    recovery_needs,
    recovery_state,
)
from tables.delta.storage.backends.s3_versions import S3VersionedBucket, build_client
from tables.delta.storage.objectstore_config import parse_location
from tables.delta.storage.opening import as_storage
from tables.delta.storage.versions import RecoveryView, copy_back, recoverable_objects, versioned_bucket
from tests.conftest import use_store_environment

BUCKET = "object-versions"
PLAIN = "object-versions-plain"
NOW = 4_000_000_000_000


@pytest.fixture
def s3(s3_server, monkeypatch):
    use_store_environment(monkeypatch, s3_server.env())
    client = s3_server.boto3()
    names = [b["Name"] for b in client.list_buckets()["Buckets"]]
    for bucket in (BUCKET, PLAIN):
        if bucket not in names:
            client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    return s3_server


@pytest.fixture
def prefix(s3) -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def all_versions(client, prefix: str) -> set[str]:
    out = set()
    for page in client.get_paginator("list_object_versions").paginate(Bucket=BUCKET, Prefix=prefix):
        out |= {v["VersionId"] for v in (page.get("Versions") or []) + (page.get("DeleteMarkers") or [])}
    return out


def current_bytes(client, key: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def test_only_an_object_store_with_versioning_on_is_asked(s3, tmp_path) -> None:
    with pytest.raises(NotVersionedError):
        versioned_bucket(as_storage(str(tmp_path)))
    with pytest.raises(NotVersionedError, match="versioning is off"):
        versioned_bucket(as_storage(f"s3://{PLAIN}/t"))
    assert versioned_bucket(as_storage(f"s3://{BUCKET}/t")).status() == "Enabled"


def test_gone_objects_with_a_noncurrent_version_are_recoverable(s3, prefix) -> None:
    client = s3.boto3()
    for key, body in (("a.parquet", b"A"), ("b.parquet", b"B"), ("c.parquet", b"C1")):
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{key}", Body=body)
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/c.parquet", Body=b"C2")  # overwritten: current
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}/a.parquet")  # a delete marker
    client.put_object(Bucket=BUCKET, Key=f"{prefix}x/a.parquet", Body=b"other table")  # a sibling prefix
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}x/a.parquet")
    storage = as_storage(f"s3://{BUCKET}/{prefix}")
    found = recoverable_objects(storage, versioned_bucket(storage))
    assert set(found.objects) == {"a.parquet"} and found.objects["a.parquet"].size == 1

    view = RecoveryView(storage, versioned_bucket(storage), found)
    assert [f.path for f in view.list_from("")] == ["a.parquet", "b.parquet", "c.parquet"]
    assert sorted(view.list_tree()) == ["a.parquet", "b.parquet", "c.parquet"]
    assert view.read("a.parquet") == b"A" and view.read("c.parquet") == b"C2"
    assert view.exists("a.parquet") and not storage.exists("a.parquet")
    with pytest.raises(StorageError, match="read-only"):
        view.put("a.parquet", b"no")


def test_a_copy_back_never_replaces_a_current_object_and_deletes_nothing(s3, prefix) -> None:
    client = s3.boto3()
    data = uuid.uuid4().bytes * 1000
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/a.parquet", Body=data)
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}/a.parquet")
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/b.parquet", Body=b"old b")
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}/b.parquet")
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/b.parquet", Body=b"new b")  # written again since
    storage = as_storage(f"s3://{BUCKET}/{prefix}")
    bucket = versioned_bucket(storage)
    found = recoverable_objects(storage, bucket)
    assert set(found.objects) == {"a.parquet"}
    before = all_versions(client, prefix)

    [report] = copy_back(storage, bucket, [("a.parquet", found.objects["a.parquet"])])
    assert report["outcome"] == "copied" and report["sourceVersionId"] == found.objects["a.parquet"].version_id
    assert report["checkedBy"] and report["size"] == len(data)
    assert current_bytes(client, f"{prefix}/a.parquet") == data
    after = all_versions(client, prefix)
    assert before <= after and after - before == {report["versionId"]}

    # again (a retried run): the object is there with the same bytes, nothing is written
    assert bucket.copy_back(f"{prefix}/a.parquet", found.objects["a.parquet"])["outcome"] == "present"
    assert all_versions(client, prefix) == after
    # b's noncurrent version, while another object is current: refused, b left as it is
    old_b = next(v for v in bucket.key_versions(f"{prefix}/b.parquet") if not v.is_latest and not v.delete_marker)
    with pytest.raises(RecoveryError, match="holds other bytes"):
        bucket.copy_back(f"{prefix}/b.parquet", old_b)
    assert current_bytes(client, f"{prefix}/b.parquet") == b"new b"
    assert all_versions(client, prefix) == after


class _Racing:
    """A client through which another writer puts the key just before our PUT; `honour`: the
    server applies If-None-Match (else it ignores it, as some S3-compatible servers do)."""

    def __init__(self, client, honour: bool) -> None:
        self._client, self.honour = client, honour

    def __getattr__(self, name):
        return getattr(self._client, name)

    def put_object(self, **kw):
        self._client.put_object(Bucket=kw["Bucket"], Key=kw["Key"], Body=b"another writer's")
        if not self.honour:
            kw.pop("IfNoneMatch")
        return self._client.put_object(**kw)


@pytest.mark.parametrize("honour", [True, False])
def test_a_writer_racing_the_copy_fails_it_and_keeps_its_object(s3, prefix, honour) -> None:
    client = s3.boto3()
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/a.parquet", Body=b"the version's bytes")
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}/a.parquet")
    storage = as_storage(f"s3://{BUCKET}/{prefix}")
    loc = parse_location(storage.location)
    racing = S3VersionedBucket(loc, {}, client=_Racing(build_client(loc, {}), honour))
    source = recoverable_objects(storage, racing).objects["a.parquet"]
    with pytest.raises(RecoveryError, match="other bytes" if honour else "another writer wrote it"):
        copy_back(storage, racing, [("a.parquet", source)])
    versions = racing.key_versions(f"{prefix}/a.parquet")
    assert source.version_id in {v.version_id for v in versions}  # nothing deleted
    if honour:  # the other writer's object stays current
        assert current_bytes(client, f"{prefix}/a.parquet") == b"another writer's"


def test_keys_outside_the_table_are_not_copied(s3, prefix) -> None:
    client = s3.boto3()
    client.put_object(Bucket=BUCKET, Key=f"{prefix}x/a.parquet", Body=b"A")
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}x/a.parquet")
    storage = as_storage(f"s3://{BUCKET}/{prefix}")
    bucket = versioned_bucket(storage)
    outside = next(v for v in bucket.key_versions(f"{prefix}x/a.parquet") if not v.delete_marker)
    with pytest.raises(RecoveryError, match="outside"):
        copy_back(storage, bucket, [(f"../{prefix}x/a.parquet", outside)])
    with pytest.raises(RecoveryError, match="another object"):
        copy_back(storage, bucket, [("a.parquet", outside)])


def test_wrong_credentials_are_named_without_the_secret(s3) -> None:
    secret = "definitely-not-the-secret-" + uuid.uuid4().hex
    loc = parse_location(f"s3://{BUCKET}/t")
    bucket = S3VersionedBucket(loc, {"aws_access_key_id": "AKIAWRONG", "aws_secret_access_key": secret})
    with pytest.raises(ObjectStoreAccessError) as err:
        bucket.status()
    assert secret not in str(err.value)


deltalake = pytest.importorskip("deltalake")


def test_versions_whose_commits_log_cleanup_deleted_are_recoverable(s3, prefix) -> None:
    """Commits 0 to 2 deleted (as log cleanup does, behind a checkpoint at 3): versions 0 to 2
    cannot be rebuilt now, and can be once the commits' noncurrent versions are back; version
    1 needs commits 0 and 1, and its data file (present)."""
    from deltalake import DeltaTable, write_deltalake

    uri, opts = f"s3://{BUCKET}/{prefix}", {**s3.env(), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    for i in range(4):
        write_deltalake(uri, pa.table({"id": pa.array([i], pa.int64())}), mode="overwrite", storage_options=opts)
    DeltaTable(uri, storage_options=opts).create_checkpoint()
    client = s3.boto3()
    for v in range(3):
        client.delete_object(Bucket=BUCKET, Key=f"{prefix}/_delta_log/{v:020d}.json")
    storage = as_storage(uri)
    now = reachability(storage, NOW)
    assert [v.version for v in now.versions if not v.readable] == [2, 1, 0]

    bucket = versioned_bucket(storage)
    found = recoverable_objects(storage, bucket)
    assert found.log_keys() == [f"_delta_log/{v:020d}.json" for v in range(3)]
    view = RecoveryView(storage, bucket, found)
    state = recovery_state(reach_state(storage), view, found.objects)
    mark_recoverable(now, answer(state, view, NOW))
    assert {v.version: v.recoverable for v in now.versions} == {3: False, 2: True, 1: True, 0: True}
    needs = recovery_needs(state, view, 1)
    assert {k for k in needs if k in found.objects} == {f"_delta_log/{v:020d}.json" for v in (0, 1)}
    assert any(not k.startswith("_delta_log/") for k in needs)  # its data file, present
