"""Tables in Google Cloud Storage against a real GCS emulator (fake-gcs-server, from PyPI, on
loopback): golden tables uploaded with the emulator's JSON API read as their local copies and
as delta-rs reads them, with the same history; commit times are the objects' times; the log's
tail is listed from an offset; the credentials come from the GOOGLE_* environment (the
emulator's service-account key, or a service-account key file in
GOOGLE_APPLICATION_CREDENTIALS) or from per-location options; the `delta` command works with
only the GOOGLE_* variables set; a missing bucket is a one-line error.

Writes are not tested here: the emulator does not take the XML API upload (PUT) that obstore's
GCS store sends (fake-gcs-server answers 400 "invalid uploadType", fsouza/fake-gcs-server#331)."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa
import pytest

from tables.delta.errors import BucketNotFoundError, NotADeltaTableError, StorageUnavailableError
from tables.delta.history.timeline import history_rows
from tables.delta.history.timestamps import commit_times
from tables.delta.log.listing import list_log_from
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.objectstore import ObjectStoreStorage
from tables.delta.storage.opening import open_storage
from tests.conftest import delta_snapshot_cli, golden_path, use_store_environment

pytest.importorskip("obstore")
deltalake = pytest.importorskip("deltalake")

BUCKET = "lake"
# classic and v2 checkpoints, deletion vectors in partitions, escaped partition directories,
# and 14 commits with a checkpoint at 10 (the tail listing)
GOLDEN_ON_GCS = [
    "checkpoint",
    "dv-partitioned-with-checkpoint",
    "v2-checkpoint-parquet",
    "data-reader-escaped-chars",
    "basic-with-inserts-deletes-checkpoint",
]
TAIL = "basic-with-inserts-deletes-checkpoint"


@pytest.fixture(scope="module")
def bucket(gcs_server):
    """One bucket, the golden tables uploaded into it with the emulator's JSON API."""
    gcs_server.create_bucket(BUCKET)
    for name in GOLDEN_ON_GCS:
        gcs_server.upload_tree(golden_path(name), BUCKET, f"golden/{name}")
    return gcs_server


@pytest.fixture
def gcs(bucket, monkeypatch):
    """The standard GOOGLE_* environment pointing at the server (and no allowed roots)."""
    use_store_environment(monkeypatch, bucket.env())
    return bucket


def file_rows(snap: Snapshot) -> list[tuple]:
    return sorted((d["path"], d["size"], json.dumps(d["deletionVector"], sort_keys=True)) for d in snap.file_dicts())


def files_of(snap: Snapshot) -> list[tuple[str, int]]:
    return sorted(zip(snap.files.column("path").to_pylist(), snap.files.column("size").to_pylist(), strict=True))


def adds_of(dt) -> list[tuple[str, int]]:
    adds = pa.table(dt.get_add_actions(flatten=True))
    return sorted(zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True))


def without_file_times(rows: list[dict]) -> list[dict]:
    """History rows but for the times taken from the commit files (objects have their own)."""
    return [{k: v for k, v in r.items() if k not in ("timestamp", "fileModificationTime")} for r in rows]


@pytest.mark.parametrize("name", GOLDEN_ON_GCS)
def test_a_golden_table_on_gcs_reads_as_its_local_copy_and_as_deltars(gcs, name: str) -> None:
    location = f"gs://{BUCKET}/golden/{name}"
    remote = load_snapshot(location)
    local = load_snapshot(str(golden_path(name)))
    assert remote.version == local.version
    assert remote.protocol == local.protocol and remote.metadata == local.metadata
    assert file_rows(remote) == file_rows(local)
    assert remote.txns == local.txns and remote.domains == local.domains

    times, local_times = commit_times(location), commit_times(str(golden_path(name)))
    assert (times.versions, times.earliest, times.latest) == (
        local_times.versions,
        local_times.earliest,
        local_times.latest,
    )
    rows = history_rows(times)
    assert without_file_times(rows) == without_file_times(history_rows(local_times))
    # commit times on an object store are the objects' last-modified times: the XML listing
    # the store reads gives the emulator's in whole seconds
    updated = {
        o["name"].rsplit("/", 1)[-1]: datetime.fromisoformat(o["updated"]).timestamp()
        for o in gcs.objects(BUCKET, f"golden/{name}/_delta_log/")
    }
    for r in rows:
        assert r["fileModificationTime"] == int(updated[f"{r['version']:020d}.json"]) * 1000

    dt = deltalake.DeltaTable(location, storage_options=gcs.storage_options())
    assert dt.version() == remote.version and adds_of(dt) == files_of(remote)


def test_the_tail_of_the_log_is_listed_from_an_offset(gcs, monkeypatch) -> None:
    """The emulator ignores a listing's offset (start-after) and lists the whole directory:
    the storage keeps only what lies after it, as GCS itself returns."""
    st, local = open_storage(f"gs://{BUCKET}/golden/{TAIL}"), open_storage(str(golden_path(TAIL)))

    def names_after(storage, start_after: str) -> list[str]:
        return [f.path.rsplit("/", 1)[-1] for f in storage.list_from("_delta_log", start_after)]

    after = names_after(st, "_delta_log/00000000000000000010.json")
    assert after == names_after(local, "_delta_log/00000000000000000010.json")
    assert after == [f"{v:020d}.json" for v in (11, 12, 13)] + ["_last_checkpoint"]
    tail, local_tail = list_log_from(st, 10), list_log_from(local, 10)
    assert [c.version for c in tail.commits] == [c.version for c in local_tail.commits] == [10, 11, 12, 13]

    def checkpoints(listing) -> dict[int, list[str]]:
        return {v: sorted(c.path for c in parts) for v, parts in listing.checkpoints.items()}

    assert checkpoints(tail) == checkpoints(local_tail) == {10: ["_delta_log/00000000000000000010.checkpoint.parquet"]}

    # the latest snapshot lists only the log from the checkpoint _last_checkpoint names
    calls: list[str | None] = []
    real_from = ObjectStoreStorage.list_from
    monkeypatch.setattr(
        ObjectStoreStorage,
        "list_from",
        lambda self, prefix, start_after=None: calls.append(start_after) or real_from(self, prefix, start_after),
    )
    snap = load_snapshot(f"gs://{BUCKET}/golden/{TAIL}")
    assert calls == ["_delta_log/00000000000000000010"]
    assert snap.version == 13 and file_rows(snap) == file_rows(load_snapshot(str(golden_path(TAIL))))


def test_a_service_account_key_in_google_application_credentials_reaches_the_server(gcs, monkeypatch, tmp_path) -> None:
    """The production route: a service-account key file (a real RSA key: the store signs its
    own tokens) named by GOOGLE_APPLICATION_CREDENTIALS, the server by GOOGLE_BASE_URL."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    key = tmp_path / "key.json"
    key.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "deltaweb-test",
                "private_key_id": "test-key",
                "private_key": pem.decode(),
                "client_email": "deltaweb@deltaweb-test.iam.gserviceaccount.com",
                "token_uri": f"{gcs.endpoint}/token",
            }
        )
    )
    monkeypatch.delenv("GOOGLE_SERVICE_ACCOUNT")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    monkeypatch.setenv("GOOGLE_BASE_URL", gcs.endpoint)
    name = "checkpoint"
    assert file_rows(load_snapshot(f"gs://{BUCKET}/golden/{name}")) == file_rows(load_snapshot(str(golden_path(name))))

    # without GOOGLE_ALLOW_HTTP, plain HTTP is refused before any request leaves
    monkeypatch.delenv("GOOGLE_ALLOW_HTTP")
    with pytest.raises(StorageUnavailableError, match=f"gs://{BUCKET}/golden/{name}"):
        load_snapshot(f"gs://{BUCKET}/golden/{name}")


def test_per_location_options_reach_the_server_without_the_environment(gcs, monkeypatch) -> None:
    for name in gcs.env():
        monkeypatch.delenv(name)
    name = "data-reader-escaped-chars"
    st = open_storage(f"gs://{BUCKET}/golden/{name}", options=gcs.storage_options())
    assert file_rows(load_snapshot(st)) == file_rows(load_snapshot(str(golden_path(name))))


def test_a_missing_bucket_and_a_missing_table_are_named_errors(gcs) -> None:
    with pytest.raises(NotADeltaTableError, match=f"gs://{BUCKET}/no-such-table: not a Delta table"):
        load_snapshot(f"gs://{BUCKET}/no-such-table")
    # GCS answers the listing of a missing bucket 404 NoSuchBucket (BucketNotFoundError); the
    # emulator answers 500 "no bucket named ...", which the store retries, then names
    with pytest.raises((BucketNotFoundError, StorageUnavailableError), match="gs://no-such-bucket/t") as info:
        load_snapshot("gs://no-such-bucket/t")
    assert "\n" not in str(info.value)


def test_the_command_line_reads_a_gcs_table_with_only_the_environment(gcs) -> None:
    run = delta_snapshot_cli

    name = "dv-partitioned-with-checkpoint"
    remote = run(f"gs://{BUCKET}/golden/{name}", gcs.env())
    assert remote.returncode == 0, remote.stderr
    local = run(str(golden_path(name)), {})
    assert local.returncode == 0, local.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout)

    missing = run("gs://no-such-bucket/t", gcs.env())
    assert missing.returncode == 2 and missing.stderr.startswith("error: gs://no-such-bucket/t")
    assert len(missing.stderr.splitlines()) == 1 and "Traceback" not in missing.stderr
