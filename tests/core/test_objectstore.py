"""Tables in S3-compatible object storage, against a real server on loopback (moto, with
authentication on): snapshots equal the local copy's and delta-rs's, history and commit times
come from the objects, commits are conditional puts, confinement holds for every path the log
names, and failures are named errors without secrets. Azure and GCS: location parsing and
store construction only (no server)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.errors import (
    BucketNotFoundError,
    CommitConflictError,
    ConditionalPutUnsupportedError,
    NotADeltaTableError,
    ObjectStoreAccessError,
    PathOutsideRootsError,
    StorageError,
    StorageUnavailableError,
)
from tables.delta.history.timeline import history_rows
from tables.delta.history.timestamps import commit_times, resolve_timestamp
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage import api as storage_module
from tables.delta.storage.api import allowed_roots
from tables.delta.storage.local import LocalStorage
from tables.delta.storage.objectstore import ObjectStoreStorage
from tables.delta.storage.objectstore_config import parse_location
from tables.delta.storage.opening import open_storage
from tables.delta.write.commit import commit, enable_ict, write_commit
from tests.conftest import REPO, delta_snapshot_cli, free_port, golden_path, use_store_environment

pytest.importorskip("obstore")
deltalake = pytest.importorskip("deltalake")

BUCKET = "golden"
# checkpoints (classic, multi-part, v2 parquet and json), deletion vectors, column mapping,
# special characters and escaped partition directories, cleaned-up logs, type widening, vacuumed files
GOLDEN_ON_S3 = [
    "checkpoint",
    "multi-part-checkpoint",
    "v2-checkpoint-parquet",
    "v2-checkpoint-json",
    "dv-with-columnmapping",
    "dv-partitioned-with-checkpoint",
    "table-with-columnmapping-mode-name",
    "data-reader-escaped-chars",
    "data-reader-partition-values",
    "basic-with-inserts-deletes-checkpoint",
    "only-checkpoint-files",
    "log-replay-dv-key-cases",
    "type-widening",
    "snapshot-vacuumed",
]


def upload_tree(client, root: Path, bucket: str, prefix: str) -> None:
    for f in sorted(root.rglob("*")):
        if f.is_file():
            client.upload_file(str(f), bucket, f"{prefix}/{f.relative_to(root).as_posix()}")


@pytest.fixture(scope="module")
def golden_bucket(s3_server):
    """The golden tables (those present) uploaded once into one bucket, key for key."""
    client = s3_server.boto3()
    client.create_bucket(Bucket=BUCKET)
    client.create_bucket(Bucket="other-bucket")
    uploaded = []
    for name in GOLDEN_ON_S3:
        root = Path(os.environ.get("DELTAWEB_GOLDEN_TABLES", REPO.parent / "shared" / "delta-tables" / "golden")) / name
        if root.is_dir():
            upload_tree(client, root, BUCKET, name)
            uploaded.append(name)
    return uploaded


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The standard AWS_* environment pointing at the server (and no allowed roots)."""
    use_store_environment(monkeypatch, s3_server.env())
    return s3_server


@pytest.fixture
def s3_table(s3, golden_bucket, request):
    """A writable copy of a golden table under a prefix of its own: copy(name) -> s3 location."""
    client = s3.boto3()

    def copy(name: str) -> str:
        root = golden_path(name)
        prefix = f"copies/{request.node.name[:40]}-{name}"
        upload_tree(client, root, BUCKET, prefix)
        return f"s3://{BUCKET}/{prefix}"

    return copy


def file_rows(snap: Snapshot) -> list[tuple]:
    return sorted((d["path"], d["size"], json.dumps(d["deletionVector"], sort_keys=True)) for d in snap.file_dicts())


def deltars_table(s3, location: str) -> deltalake.DeltaTable:
    return deltalake.DeltaTable(location, storage_options=s3.storage_options())


# --- (a) snapshots: the same as the local copy, the same as delta-rs ------------------------------


@pytest.mark.parametrize("name", GOLDEN_ON_S3)
def test_a_golden_table_on_s3_reads_as_its_local_copy_and_as_deltars(s3, golden_bucket, name: str) -> None:
    local = golden_path(name)
    remote = load_snapshot(f"s3://{BUCKET}/{name}")
    ours = load_snapshot(str(local))
    assert remote.version == ours.version
    assert remote.protocol == ours.protocol
    assert remote.metadata == ours.metadata
    assert file_rows(remote) == file_rows(ours)
    assert remote.txns == ours.txns and remote.domains == ours.domains

    dt = deltars_table(s3, f"s3://{BUCKET}/{name}")
    adds = pa.table(dt.get_add_actions(flatten=True))
    assert dt.version() == remote.version
    theirs = sorted(zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True))
    mine = zip(remote.files.column("path").to_pylist(), remote.files.column("size").to_pylist(), strict=True)
    assert sorted(mine) == theirs


def test_an_s3a_location_and_a_trailing_slash_name_the_same_table(s3, golden_bucket) -> None:
    golden_path("checkpoint")
    a = load_snapshot(f"s3a://{BUCKET}/checkpoint/")
    b = load_snapshot(f"s3://{BUCKET}/checkpoint")
    assert a.version == b.version and file_rows(a) == file_rows(b)
    assert open_storage(f"s3a://{BUCKET}/checkpoint/").uri("_delta_log/x.json") == (
        f"s3a://{BUCKET}/checkpoint/_delta_log/x.json"
    )


def test_time_travel_on_s3(s3, golden_bucket) -> None:
    local = golden_path("basic-with-inserts-deletes-checkpoint")
    for v in (0, 5, 10, 12):
        assert file_rows(load_snapshot(f"s3://{BUCKET}/basic-with-inserts-deletes-checkpoint", v)) == file_rows(
            load_snapshot(str(local), v)
        )


def test_listing_starts_at_an_offset_and_sizes_come_from_the_listing(s3, golden_bucket) -> None:
    golden_path("basic-with-inserts-deletes-checkpoint")
    st = open_storage(f"s3://{BUCKET}/basic-with-inserts-deletes-checkpoint")
    after = list(st.list_from("_delta_log", start_after="_delta_log/00000000000000000010.json"))
    names = [f.path.rsplit("/", 1)[-1] for f in after]
    assert names and all(n > "00000000000000000010.json" for n in names) and names == sorted(names)
    names_all = st.list_names("_delta_log")
    before = st.requests
    info = st.stat("_delta_log/00000000000000000003.json")
    assert st.requests == before and info.size > 0  # no HEAD: the listing said it
    assert "00000000000000000003.json" in names_all
    assert st.is_dir("_delta_log") and not st.is_dir("no-such-dir")
    keys = set(st.list_tree("", exclude=("_delta_log",)))
    assert keys and not any(k.startswith("_delta_log/") for k in keys)
    assert (
        st.read("_delta_log/00000000000000000000.json", (0, 10)) == st.read("_delta_log/00000000000000000000.json")[:10]
    )


# --- (b) history and commit timestamps -------------------------------------------------------------


def test_history_and_commit_times_come_from_the_objects(s3, golden_bucket) -> None:
    name = "basic-with-inserts-deletes-checkpoint"
    local = golden_path(name)
    times = commit_times(f"s3://{BUCKET}/{name}")
    local_times = commit_times(str(local))
    assert times.versions == local_times.versions
    rows = history_rows(times)
    local_rows = history_rows(local_times)
    same = ("version", "operation", "operationParameters", "commitInfoTimestamp", "inCommitTimestamp")
    assert [{k: r[k] for k in same} for r in rows] == [{k: r[k] for k in same} for r in local_rows]
    # commit file times on an object store are the objects' last-modified times
    listed = s3.boto3().list_objects_v2(Bucket=BUCKET, Prefix=f"{name}/_delta_log/")["Contents"]
    modified = {
        o["Key"].rsplit("/", 1)[-1]: int(o["LastModified"].timestamp() * 1000)
        for o in listed
        if o["Key"].endswith(".json")
    }
    for r in rows:
        assert r["fileModificationTime"] == modified[f"{r['version']:020d}.json"]
    found = resolve_timestamp(times, rows[0]["timestamp"], allow_latest=True)
    assert found["version"] == times.latest
    page = history_rows(commit_times(f"s3://{BUCKET}/{name}"), offset=2, limit=3)
    assert [r["version"] for r in page] == [r["version"] for r in rows[2:5]]


def test_history_reads_ahead_in_batches(s3, golden_bucket, monkeypatch) -> None:
    name = "basic-with-inserts-deletes-checkpoint"
    golden_path(name)
    times = commit_times(f"s3://{BUCKET}/{name}")
    singles, batches = [], []
    read, read_many = ObjectStoreStorage.read, ObjectStoreStorage.read_many
    monkeypatch.setattr(
        ObjectStoreStorage, "read", lambda self, path, range=None: singles.append(path) or read(self, path, range)
    )
    monkeypatch.setattr(
        ObjectStoreStorage, "read_many", lambda self, paths: batches.append(len(paths)) or read_many(self, paths)
    )
    rows = history_rows(times)
    assert len(rows) == len(times.versions) == 14
    # every commit read once: the first alone, the rest in batches that double (8, then the 5 left)
    assert times.reader.reads == len(times.versions)
    assert len(singles) == 1 and batches == [8, 5]


def test_history_after_the_snapshot_reads_each_commit_once(s3, golden_bucket, monkeypatch) -> None:
    """The table config's replay and the history's commitInfo share one GET per commit."""
    import collections

    import obstore

    fetched: collections.Counter = collections.Counter()
    real_get = obstore.get

    def counting_get(store, path, *args, **kwargs):
        fetched[path] += 1
        return real_get(store, path, *args, **kwargs)

    monkeypatch.setattr(obstore, "get", counting_get)
    name = "basic-with-inserts-deletes-checkpoint"
    times = commit_times(f"s3://{BUCKET}/{name}")
    rows = history_rows(times)
    commits = {k: n for k, n in fetched.items() if k.endswith(".json") and "/_delta_log/0" in k}
    assert len(rows) == len(times.versions) and commits
    assert max(commits.values()) == 1, commits
    assert len(commits) == len(times.versions)


def test_in_commit_timestamps_on_s3(s3_table) -> None:
    location = s3_table("basic-with-inserts-deletes-checkpoint")
    out = enable_ict(location)
    assert out["changed"]
    times = commit_times(location)
    ts, source = times.timestamp(out["version"])
    assert source == "ict" and ts == out["inCommitTimestamp"]
    assert history_rows(times, limit=1)[0]["inCommitTimestamp"] == out["inCommitTimestamp"]


# --- (c) commits are conditional puts ----------------------------------------------------------------


def test_a_commit_on_s3_is_read_back_by_us_and_by_deltars(s3, s3_table) -> None:
    location = s3_table("checkpoint")
    before = load_snapshot(location)
    path = before.files.column("path")[0].as_py()
    size = before.files.column("size")[0].as_py()
    result = commit(
        location, [{"remove": {"path": path, "deletionTimestamp": 1, "dataChange": True, "size": size}}], "DELETE"
    )
    assert result.version == before.version + 1
    after = load_snapshot(location)
    assert after.version == result.version and after.num_files == before.num_files - 1
    dt = deltars_table(s3, location)
    assert dt.version() == after.version
    assert pa.table(dt.get_add_actions(flatten=True)).num_rows == after.num_files


def test_a_put_if_absent_that_loses_the_race_is_a_conflict_not_an_overwrite(s3, s3_table) -> None:
    location = s3_table("checkpoint")
    a, b = open_storage(location), open_storage(location)  # two writers
    key = "_delta_log/00000000000000000015.json"
    assert a.put(key, b'{"first":1}\n') is True
    assert b.put(key, b'{"second":2}\n') is False
    assert b.read(key) == b'{"first":1}\n'
    with pytest.raises(CommitConflictError):
        b.put_if_absent(key, b'{"third":3}\n')
    assert a.read(key) == b'{"first":1}\n'
    with pytest.raises(CommitConflictError, match="committed by another writer first"):
        write_commit(b, 15, [], {"operation": "NOOP"}, None)
    # (a storage keeps the commit files it read: commits are immutable, so ask a new one)
    assert b.put(key, b'{"replaced":1}\n', overwrite=True) is True
    assert b.read(key) == open_storage(location).read(key) == b'{"replaced":1}\n'
    b.delete(key)
    assert not a.exists(key)


def test_a_store_without_conditional_puts_is_refused_for_writing(s3, s3_table, monkeypatch) -> None:
    location = s3_table("checkpoint")
    disabled = ObjectStoreStorage(location, options={"aws_conditional_put": "disabled"})
    with pytest.raises(ConditionalPutUnsupportedError, match=location):
        disabled.put("_delta_log/00000000000000000015.json", b"{}\n")
    assert load_snapshot(disabled).version == 14  # reading still works

    # a server that ignores If-None-Match: found out before any commit is written
    import obstore

    real_put = obstore.put
    monkeypatch.setattr(
        obstore, "put", lambda store, path, data, **kw: real_put(store, path, data, use_multipart=False)
    )
    ignoring = open_storage(location)
    with pytest.raises(ConditionalPutUnsupportedError, match="ignored a conditional put"):
        commit(ignoring, [], "NOOP")
    monkeypatch.setattr(obstore, "put", real_put)
    assert load_snapshot(location).version == 14
    assert not [k for k in open_storage(location).list_names("_delta_log") if "probe" in k]


# --- (d) the command line ------------------------------------------------------------------------


def test_the_command_line_reads_an_s3_table_with_only_the_environment(s3, golden_bucket) -> None:
    local = golden_path("dv-partitioned-with-checkpoint")
    run = delta_snapshot_cli

    remote = run(f"s3://{BUCKET}/dv-partitioned-with-checkpoint", s3.env())
    assert remote.returncode == 0, remote.stderr
    ours = run(str(local), {})
    assert ours.returncode == 0, ours.stderr
    assert json.loads(remote.stdout) == json.loads(ours.stdout)

    wrong = run(
        f"s3://{BUCKET}/dv-partitioned-with-checkpoint", {**s3.env(), "AWS_SECRET_ACCESS_KEY": "wrong-secret-1234"}
    )
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: ") and len(wrong.stderr.splitlines()) == 1
    assert "access denied" in wrong.stderr and "wrong-secret-1234" not in wrong.stderr


# --- (e) confinement ---------------------------------------------------------------------------------


def test_log_paths_outside_the_table_are_refused(s3, s3_table) -> None:
    location = s3_table("checkpoint")
    st = open_storage(location)
    for path in (
        "s3://other-bucket/x.parquet",
        "../../x",
        "a/../../x.parquet",
        "%2E%2E/%2E%2E/x",
        "/etc/passwd",
        "file:///etc/passwd",
        "gs://golden/x.parquet",
        f"s3://{BUCKET}/elsewhere/x.parquet",
    ):
        with pytest.raises(PathOutsideRootsError):
            st.resolve(path)
    for key in ("../../x", "_delta_log/../../elsewhere/x.json"):
        with pytest.raises(PathOutsideRootsError):
            st.read(key)  # refused before any request: '..' is never sent
    assert st.resolve("a%20b/c.parquet") == "a b/c.parquet"
    assert st.resolve(f"{location}/part-1.parquet") == "part-1.parquet"
    assert st.read("x/../_delta_log/00000000000000000000.json") == st.read("_delta_log/00000000000000000000.json")


def test_a_log_naming_files_outside_the_table_is_refused_by_resolve(s3, s3_table) -> None:
    location = s3_table("checkpoint")
    hostile = ["s3://other-bucket/x.parquet", "../../x", "%2E%2E/%2E%2E/y"]
    adds = [
        {"add": {"path": p, "size": 1, "partitionValues": {}, "modificationTime": 1, "dataChange": True}}
        for p in hostile
    ]
    commit(location, adds, "WRITE")
    snap = load_snapshot(location)  # the log itself reads: its paths are only names
    st = open_storage(location)
    named = [p for p in snap.files.column("path").to_pylist() if p in hostile]
    assert sorted(named) == sorted(hostile)
    for p in named:
        with pytest.raises(PathOutsideRootsError, match="outside the allowed locations"):
            st.resolve(p)


def test_allowed_prefixes_confine_object_store_tables(s3, golden_bucket, tmp_path) -> None:
    golden_path("checkpoint")
    golden_path("multi-part-checkpoint")
    storage_module.set_roots_provider(lambda: [f"s3://{BUCKET}/checkpoint/", "s3://other-bucket/shared", str(tmp_path)])
    try:
        assert allowed_roots() == (f"s3://{BUCKET}/checkpoint", "s3://other-bucket/shared", os.path.realpath(tmp_path))
        assert load_snapshot(f"s3://{BUCKET}/checkpoint").version == 14
        with pytest.raises(PathOutsideRootsError):
            load_snapshot(f"s3://{BUCKET}/multi-part-checkpoint")
        st = open_storage(f"s3://{BUCKET}/checkpoint")
        assert st.resolve("s3://other-bucket/shared/x.parquet") == "s3://other-bucket/shared/x.parquet"
        assert st.uri("s3://other-bucket/shared/x.parquet") == "s3://other-bucket/shared/x.parquet"
        with pytest.raises(PathOutsideRootsError):
            st.resolve("s3://other-bucket/elsewhere/x.parquet")
        with pytest.raises(PathOutsideRootsError):
            st.resolve("s3://other-bucket/shared/../elsewhere/x.parquet")
        # only object-store prefixes configured: no local directory is allowed
        storage_module.set_roots_provider(lambda: [f"s3://{BUCKET}/checkpoint"])
        with pytest.raises(PathOutsideRootsError):
            load_snapshot(str(golden_path("checkpoint")))
        assert LocalStorage(str(tmp_path), roots=[str(tmp_path), "s3://x/y"]).roots == (os.path.realpath(tmp_path),)
    finally:
        storage_module.set_roots_provider(None)


# --- (f) failures are named, one line, without secrets ---------------------------------------------


def test_wrong_credentials_are_a_named_error_without_the_secret(s3, golden_bucket, monkeypatch) -> None:
    golden_path("checkpoint")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-9876")
    with pytest.raises(ObjectStoreAccessError) as info:
        load_snapshot(f"s3://{BUCKET}/checkpoint")
    text = str(info.value)
    assert "access denied" in text and f"s3://{BUCKET}/checkpoint" in text and "\n" not in text
    assert "not-the-secret-9876" not in text and s3.secret_access_key not in text
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNKEY00")
    with pytest.raises(ObjectStoreAccessError, match="InvalidAccessKeyId"):
        load_snapshot(f"s3://{BUCKET}/checkpoint")
    st = ObjectStoreStorage(f"s3://{BUCKET}/checkpoint", options={"aws_secret_access_key": "opt-secret-5555"})
    assert "opt-secret-5555" not in repr(st) and "opt-secret-5555" not in str(vars(st).get("location"))
    with pytest.raises(ObjectStoreAccessError) as info:
        load_snapshot(st)
    assert "opt-secret-5555" not in str(info.value)


def test_per_location_options_override_the_environment(s3, golden_bucket, monkeypatch) -> None:
    golden_path("checkpoint")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    options = {"AWS_SECRET_ACCESS_KEY": s3.secret_access_key, "AWS_ENDPOINT_URL": s3.endpoint, "AWS_ALLOW_HTTP": "true"}
    assert load_snapshot(open_storage(f"s3://{BUCKET}/checkpoint", options=options)).version == 14


def test_a_missing_bucket_and_a_missing_table_are_named_errors(s3, golden_bucket) -> None:
    with pytest.raises(BucketNotFoundError, match="'no-such-bucket' does not exist"):
        load_snapshot("s3://no-such-bucket/t")
    with pytest.raises(NotADeltaTableError, match=f"s3://{BUCKET}/no-such-table: not a Delta table"):
        load_snapshot(f"s3://{BUCKET}/no-such-table")


def test_an_unreachable_store_fails_after_bounded_retries(s3, monkeypatch) -> None:
    import time

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    start = time.monotonic()
    with pytest.raises(StorageUnavailableError, match="did not answer"):
        load_snapshot(f"s3://{BUCKET}/checkpoint")
    assert time.monotonic() - start < 30


# --- (g) locations of the other stores (no server) ---------------------------------------------------


def test_azure_and_gcs_locations_parse() -> None:
    loc = parse_location("abfss://container@account.dfs.core.windows.net/path/to/t")
    assert (loc.kind, loc.bucket, loc.account, loc.prefix) == ("az", "container", "account", "path/to/t")
    assert loc.uri("path/to/t/x.parquet") == "abfss://container@account.dfs.core.windows.net/path/to/t/x.parquet"
    assert loc.root == "az://container@account/path/to/t"
    loc = parse_location("az://container/path/")
    assert (loc.kind, loc.bucket, loc.account, loc.prefix) == ("az", "container", None, "path")
    loc = parse_location("gs://bucket/path/t")
    assert (loc.kind, loc.bucket, loc.prefix) == ("gs", "bucket", "path/t")
    loc = parse_location("s3a://bucket")
    assert (loc.scheme, loc.kind, loc.bucket, loc.prefix) == ("s3a", "s3", "bucket", "")
    with pytest.raises(StorageError, match="credentials in a location are not accepted") as info:
        parse_location("s3://AKIA:topsecret@bucket/t")
    assert "topsecret" not in str(info.value)
    with pytest.raises(PathOutsideRootsError):
        parse_location("s3://bucket/a/../../t")
    with pytest.raises(NotADeltaTableError, match="storage scheme 'hdfs' is not supported yet"):
        open_storage("hdfs://namenode/t")


def test_azure_and_gcs_stores_are_built_from_the_environment(monkeypatch, tmp_path) -> None:
    for name in list(os.environ):
        if name.startswith(("AWS_", "AZURE_", "GOOGLE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "c2VjcmV0LWtleQ==")
    st = open_storage("abfss://container@account.dfs.core.windows.net/path/t")
    assert isinstance(st, ObjectStoreStorage) and st.display("x.json").startswith("abfss://container@account")
    assert "AzureStore" in repr(st._store(st._loc.store_id)) and "c2VjcmV0" not in repr(st)

    # an Azure connection string (the emulator's form) gives account, key and endpoint
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_KEY")
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=c2VjcmV0LWtleQ==;"
        "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
    )
    st = open_storage("az://container/t")
    assert "devstoreaccount1" in repr(st._store(st._loc.store_id))

    creds = tmp_path / "missing.json"
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    st = open_storage("gs://bucket/path/t")
    assert st.uri("_delta_log/x.json") == "gs://bucket/path/t/_delta_log/x.json"
    with pytest.raises(StorageError, match="gs://bucket/path/t"):
        load_snapshot(st)


def test_a_registered_backend_serves_its_scheme_through_the_storage(monkeypatch) -> None:
    """The backend registry drives the object-store layer: one `register` call for a made-up
    `mem://` scheme over obstore's MemoryStore, and a golden table put through it reads as its
    local copy, writes are conditional puts, confinement holds for its prefixes, messages use
    its names; unregistered, the scheme is unknown again."""
    from obstore.store import MemoryStore

    from tables.delta.storage import backends
    from tables.delta.storage.objectstore_config import is_object_location
    from tables.delta.storage.opening import as_storage

    local = golden_path("checkpoint")
    ours = load_snapshot(str(local))
    stores: dict[str, MemoryStore] = {}  # one store per bucket, shared by every storage opened on it
    mem = backends.Backend(
        kind="mem",
        schemes=("mem", "memory"),
        container="shelf",
        build=lambda loc, config, client, retry: stores.setdefault(loc.bucket, MemoryStore()),
        spellings=("memory",),
        env_prefixes=("MEM_",),
    )
    monkeypatch.delenv(storage_module.ROOTS_ENV, raising=False)
    backends.register(mem)
    storage_module.set_roots_provider(lambda: ["mem://bucket/table"])
    try:
        assert backends.backend_for_scheme("mem") is mem and is_object_location("mem://bucket/table")
        st = as_storage("mem://bucket/table")
        assert isinstance(st, ObjectStoreStorage) and st.roots == ("mem://bucket/table",)
        for f in sorted(local.rglob("*")):
            if f.is_file():
                assert st.put(f.relative_to(local).as_posix(), f.read_bytes(), overwrite=True)
        remote = load_snapshot("mem://bucket/table")  # a new storage on the same store
        assert remote.version == ours.version and file_rows(remote) == file_rows(ours)
        assert st.put("extra/a.bin", b"1") and not st.put("extra/a.bin", b"2")  # put-if-absent
        assert as_storage("mem://bucket/table").read("extra/a.bin") == b"1"
        with pytest.raises(PathOutsideRootsError):
            st.resolve("mem://bucket/elsewhere/x.parquet")
        with pytest.raises(PathOutsideRootsError):  # another backend's scheme
            st.resolve("s3://bucket/table/x.parquet")
        assert "the shelf 'bucket' does not exist" in str(st._no_bucket())
        with pytest.raises(StorageError, match=r"\(s3://, s3a://, gs://, az://, abfss://, mem://, memory://\)"):
            parse_location("ftp://host/t")
        # its spellings are one location for events and discovery; its variables, its stores'
        assert backends.spelled("mem://bucket/t") == {"mem://bucket/t", "memory://bucket/t"}
        assert backends.named_schemes().endswith("mem://, memory://")
    finally:
        storage_module.set_roots_provider(None)
        backends.unregister("mem")
    assert backends.backend_for_scheme("mem") is None and not is_object_location("mem://bucket/table")
    with pytest.raises(NotADeltaTableError, match="storage scheme 'mem' is not supported yet"):
        open_storage("mem://bucket/table")


def test_reachability_on_s3_matches_the_local_copy(s3, golden_bucket) -> None:
    from tables.delta.history.reachability.compute import reachability

    name = "snapshot-vacuumed" if "snapshot-vacuumed" in golden_bucket else "basic-with-inserts-deletes-checkpoint"
    local = golden_path(name)
    now = 1_900_000_000_000

    def flags(loc: str) -> list[tuple]:
        return [(v.version, v.readable, v.restorable, v.reason) for v in reachability(loc, now).versions]

    assert flags(f"s3://{BUCKET}/{name}") == flags(str(local))


def test_the_latest_snapshot_lists_only_the_log_after_its_checkpoint(s3, golden_bucket, monkeypatch, tmp_path) -> None:
    """`_last_checkpoint` names the checkpoint: the listing starts there (a 10,000-commit log
    is not listed page after page), and the snapshot is delta-rs's. A hint whose checkpoint is
    missing falls back to the whole listing."""
    import shutil

    calls: list[tuple[str, str | None]] = []
    real_from, real_names = ObjectStoreStorage.list_from, ObjectStoreStorage.list_names

    def list_from(self, prefix, start_after=None):
        calls.append(("from", start_after))
        return real_from(self, prefix, start_after)

    def list_names(self, rel_dir):
        calls.append(("all", rel_dir))
        return real_names(self, rel_dir)

    monkeypatch.setattr(ObjectStoreStorage, "list_from", list_from)
    monkeypatch.setattr(ObjectStoreStorage, "list_names", list_names)
    name = "basic-with-inserts-deletes-checkpoint"
    snap = load_snapshot(f"s3://{BUCKET}/{name}")
    assert calls == [("from", "_delta_log/00000000000000000010")]
    theirs = deltalake.DeltaTable(str(golden_path(name)))
    assert snap.version == theirs.version() > 10
    assert sorted(p.rsplit("/", 1)[-1] for p in snap.file_paths()) == sorted(
        p.rsplit("/", 1)[-1] for p in theirs.file_uris()
    )

    local = tmp_path / name
    shutil.copytree(golden_path(name), local)
    (local / "_delta_log" / "_last_checkpoint").write_text('{"version": 7, "size": 13}')  # no checkpoint at 7
    stale = load_snapshot(str(local))
    assert stale.version == snap.version and sorted(stale.file_paths()) == sorted(
        load_snapshot(str(golden_path(name))).file_paths()
    )
