"""Faults between deltaweb's object-store backend and a real S3 server: moto on loopback
behind a fault-injecting proxy (tests/faults/proxy.py) that answers 500, 503 or SlowDown,
resets connections before or after forwarding, cuts bodies short or adds latency, at a chosen
request of a read or a write.

What must hold: a transient fault (fewer failures than RETRY_CONFIG's max_retries) changes
nothing a read returns, only how many requests it took; a persistent one ends, after the
bounded retries, in the named StorageUnavailableError, never a raw obstore exception; a body
cut short is never parsed as a shorter commit or checkpoint; and a conditional write whose
answer was lost is resolved by reading the object back, never by writing a second version.
Results are compared with the same read without faults and with delta-rs reading the bucket
directly.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

from tables.delta.errors import CommitConflictError, StorageError, StorageUnavailableError
from tables.delta.log.listing import list_log
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage import api as storage_api
from tables.delta.storage.objectstore_config import RETRY_CONFIG
from tables.delta.storage.opening import open_storage
from tables.delta.write.commit import commit, write_commit
from tests.conftest import S3Server, golden_path, use_store_environment
from tests.faults.proxy import FaultProxy

obstore = pytest.importorskip("obstore")
deltalake = pytest.importorskip("deltalake")

BUCKET = "faults"
GOLDEN = "checkpoint"  # 15 versions, a classic checkpoint at 10, commits 11-14 after it, no data files
BASE = f"s3://{BUCKET}/base"
MAX_RETRIES = RETRY_CONFIG["max_retries"]
# each kind a client must survive when it happens fewer times than the retries allow
TRANSIENT = ("status500", "status503", "slowdown", "reset", "reset_after", "truncate")
# the requests of a latest-snapshot read, in the order they are sent (the commits after the
# checkpoint go out together, so the fourth is whichever commit arrives first)
SNAPSHOT_REQUESTS = {1: "last_checkpoint", 2: "listing", 3: "checkpoint", 4: "commit"}
COMMIT_14 = "_delta_log/00000000000000000014.json"
CHECKPOINT_10 = "_delta_log/00000000000000000010.checkpoint.parquet"


# --- fixtures ----------------------------------------------------------------------------------------


def upload_table(client: Any, prefix: str) -> str:
    root = golden_path(GOLDEN)
    for f in sorted(root.rglob("*")):
        if f.is_file():
            client.upload_file(str(f), BUCKET, f"{prefix}/{f.relative_to(root).as_posix()}")
    return f"s3://{BUCKET}/{prefix}"


@pytest.fixture(scope="module")
def proxy(s3_server: S3Server) -> Iterator[FaultProxy]:
    """The proxy in front of moto, and the store environment pointing at it, for the module:
    the standard AWS_* variables (endpoint: the proxy), no allowed roots or stored options
    (a table is confined to its own location), and retry backoffs in milliseconds so that
    exhausting the retries takes a moment (the number of retries stays the production one)."""

    client = s3_server.boto3()
    client.create_bucket(Bucket=BUCKET)
    upload_table(client, "base")
    saved_roots, saved_options = storage_api.roots_provider(), storage_api.options_provider()
    with FaultProxy(s3_server.endpoint, seed=20240611) as px, pytest.MonkeyPatch.context() as mp:
        use_store_environment(mp, {**s3_server.env(), "AWS_ENDPOINT_URL": px.url})
        fast = {"init_backoff": timedelta(milliseconds=5), "max_backoff": timedelta(milliseconds=50), "base": 2}
        mp.setitem(RETRY_CONFIG, "backoff", fast)
        storage_api.set_roots_provider(None)
        storage_api.set_options_provider(None)
        try:
            yield px
        finally:
            storage_api.set_roots_provider(saved_roots)
            storage_api.set_options_provider(saved_options)


@pytest.fixture(autouse=True)
def _no_rules(proxy: FaultProxy) -> Iterator[None]:
    proxy.reset()
    yield
    proxy.reset()


def summary(snap: Snapshot) -> dict[str, Any]:
    files = sorted(
        (d["path"], d["size"], json.dumps(d.get("deletionVector"), sort_keys=True)) for d in snap.file_dicts()
    )
    return {
        "version": snap.version,
        "protocol": snap.protocol,
        "metadata": snap.metadata,
        "files": files,
        "txns": snap.txns,
        "domains": snap.domains,
    }


def deltars_view(s3_server: S3Server, location: str, version: int | None = None) -> tuple[int, list[tuple[str, int]]]:
    """(version, sorted (path, size) of the adds) as delta-rs reads the bucket, past the proxy."""
    dt = deltalake.DeltaTable(location, version=version, storage_options=s3_server.storage_options())
    adds = pa.table(dt.get_add_actions(flatten=True))
    files = zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True)
    return dt.version(), sorted(files)


@pytest.fixture(scope="module")
def baseline(proxy: FaultProxy, s3_server: S3Server) -> dict[str, Any]:
    """Each read once without faults: its result and the number of requests it took."""
    out: dict[str, Any] = {}
    proxy.reset()
    out["snapshot"] = summary(load_snapshot(BASE))
    out["snapshot_requests"] = len(proxy.seen())
    for op in READS:
        proxy.reset()
        out[op] = READS[op](open_storage(BASE))
        out[f"{op}_requests"] = len(proxy.seen())
    version, files = deltars_view(s3_server, BASE)
    assert version == out["snapshot"]["version"] == 14
    assert files == sorted((p, s) for p, s, _dv in out["snapshot"]["files"])
    return out


@pytest.fixture
def writable(s3_server: S3Server, request: pytest.FixtureRequest) -> str:
    """A fresh copy of the table under a prefix of its own (uploaded past the proxy)."""
    return upload_table(s3_server.boto3(), f"copies/{request.node.name[:60]}-{uuid.uuid4().hex[:8]}")


def log_versions(s3_server: S3Server, location: str) -> list[int]:
    """The versions whose commit files the bucket holds, listed past the proxy."""
    prefix = location.split(f"s3://{BUCKET}/", 1)[1] + "/_delta_log/"
    keys = [o["Key"] for o in s3_server.boto3().list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]
    names = [k.rsplit("/", 1)[1] for k in keys]
    return sorted(int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json"))


def object_bytes(s3_server: S3Server, location: str, key: str) -> bytes:
    path = location.split(f"s3://{BUCKET}/", 1)[1]
    return s3_server.boto3().get_object(Bucket=BUCKET, Key=f"{path}/{key}")["Body"].read()


# the reads below a snapshot, one request each or a few at once
READS = {
    "list_log": lambda st: [(f.version, f.path) for f in list_log(st).commits],
    "read_commit": lambda st: st.read(COMMIT_14),
    "read_range": lambda st: st.read(COMMIT_14, (10, 200)),
    "read_many": lambda st: st.read_many([f"_delta_log/{v:020d}.json" for v in range(11, 15)]),
}


def assert_named_unavailable(exc: BaseException) -> None:
    """The named error of a store that did not answer: one line, the bounded retries said,
    no obstore exception raised or chained."""
    assert isinstance(exc, StorageUnavailableError), repr(exc)
    assert not isinstance(exc, obstore.exceptions.BaseError)
    assert exc.__cause__ is None and exc.__suppress_context__
    text = str(exc)
    assert f"did not answer after {MAX_RETRIES} retries" in text and "\n" not in text


# --- (a) transient faults on reads ---------------------------------------------------------------------


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("nth", list(SNAPSHOT_REQUESTS), ids=list(SNAPSHOT_REQUESTS.values()))
@pytest.mark.parametrize("fault", TRANSIENT)
def test_a_transient_fault_at_any_request_of_a_snapshot_read_changes_nothing(
    proxy: FaultProxy, baseline: dict[str, Any], fault: str, nth: int, times: int
) -> None:
    proxy.add(fault, skip=nth - 1, times=times)
    snap = load_snapshot(BASE)
    assert summary(snap) == baseline["snapshot"]
    assert len(proxy.faults()) == times
    assert len(proxy.seen()) > baseline["snapshot_requests"]  # the retries went out


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("fault", TRANSIENT)
@pytest.mark.parametrize("op", list(READS))
def test_a_transient_fault_on_a_listing_or_a_commit_read_changes_nothing(
    proxy: FaultProxy, baseline: dict[str, Any], op: str, fault: str, times: int
) -> None:
    proxy.add(fault, times=times)
    assert READS[op](open_storage(BASE)) == baseline[op]
    assert len(proxy.faults()) == times
    assert len(proxy.seen()) > baseline[f"{op}_requests"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_faults_fewer_than_the_retries_change_nothing(
    proxy: FaultProxy, baseline: dict[str, Any], seed: int
) -> None:
    """Faults of mixed kinds at random requests (a seeded draw), at most MAX_RETRIES in all."""
    proxy.reset(seed=seed)
    for fault in ("status503", "reset", "truncate")[:MAX_RETRIES]:
        proxy.add(fault, probability=0.3, times=1)
    assert summary(load_snapshot(BASE)) == baseline["snapshot"]
    assert 1 <= len(proxy.faults()) <= MAX_RETRIES  # these seeds draw faults within the first requests
    assert len(proxy.seen()) > baseline["snapshot_requests"]


# --- (b) persistent faults ---------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["status500", "status503", "slowdown", "reset", "reset_after"])
def test_a_store_that_keeps_failing_is_a_named_error_after_the_bounded_retries(proxy: FaultProxy, fault: str) -> None:
    proxy.add(fault, times=None)
    with pytest.raises(StorageError) as info:
        load_snapshot(BASE)
    assert_named_unavailable(info.value)
    listings = proxy.seen("GET", f"/{BUCKET}")
    assert len([s for s in listings if s.path == f"/{BUCKET}"]) == MAX_RETRIES + 1


@pytest.mark.parametrize("fault", ["status503", "reset", "truncate"])
@pytest.mark.parametrize("key", [COMMIT_14, CHECKPOINT_10], ids=["commit", "checkpoint"])
def test_a_log_file_that_keeps_failing_is_a_named_error(proxy: FaultProxy, fault: str, key: str) -> None:
    proxy.add(fault, path=key, times=None)
    with pytest.raises(StorageError) as info:
        load_snapshot(BASE)
    assert_named_unavailable(info.value)
    assert key in str(info.value)
    # each read of the file gives up after the bounded retries (the checkpoint reader tries a
    # failed part once more when the load reaches it, so a checkpoint may take two rounds)
    tries = len(proxy.seen("GET", key))
    assert tries % (MAX_RETRIES + 1) == 0 and 1 <= tries // (MAX_RETRIES + 1) <= 2


# --- (c) bodies cut short --------------------------------------------------------------------------


@pytest.mark.parametrize("times", [1, 2, None], ids=["once", "twice", "always"])
def test_a_commit_cut_at_a_line_end_is_never_read_as_a_shorter_commit(
    proxy: FaultProxy, s3_server: S3Server, baseline: dict[str, Any], times: int | None
) -> None:
    """Cut after the commitInfo line, what is left parses as a valid commit of fewer actions:
    the client must notice the missing bytes (Content-Length) and fetch them, or give up."""
    whole = object_bytes(s3_server, BASE, COMMIT_14)
    assert whole.count(b"\n") > 1
    proxy.add("truncate", path=COMMIT_14, times=times, cut=whole.index(b"\n") + 1)
    if times is None:
        with pytest.raises(StorageError) as info:
            open_storage(BASE).read(COMMIT_14)
        assert_named_unavailable(info.value)
        with pytest.raises(StorageError) as info:
            load_snapshot(BASE)
        assert_named_unavailable(info.value)
        return
    assert open_storage(BASE).read(COMMIT_14) == whole
    assert len(proxy.seen("GET", COMMIT_14)) == 1 + times
    proxy.reset()
    proxy.add("truncate", path=COMMIT_14, times=times, cut=whole.index(b"\n") + 1)
    assert summary(load_snapshot(BASE)) == baseline["snapshot"]


@pytest.mark.parametrize("times", [1, 2, None], ids=["once", "twice", "always"])
def test_a_checkpoint_cut_short_is_fetched_whole_or_a_named_error(
    proxy: FaultProxy, s3_server: S3Server, baseline: dict[str, Any], times: int | None
) -> None:
    whole = object_bytes(s3_server, BASE, CHECKPOINT_10)
    proxy.add("truncate", path=CHECKPOINT_10, times=times, cut=len(whole) - 8)  # the footer missing
    if times is None:
        with pytest.raises(StorageError) as info:
            load_snapshot(BASE)
        assert_named_unavailable(info.value)
        return
    assert summary(load_snapshot(BASE)) == baseline["snapshot"]
    assert len(proxy.seen("GET", CHECKPOINT_10)) == 1 + times


# --- (d) conditional writes whose answer is lost -------------------------------------------------------


def our_commit() -> tuple[list[dict[str, Any]], str]:
    """A commit's actions (a file of its own) and the txnId that marks it as ours."""
    name = f"fault-{uuid.uuid4().hex}.parquet"
    add = {"path": name, "size": 123, "partitionValues": {}, "modificationTime": 1, "dataChange": True}
    return [{"add": add}], str(uuid.uuid4())


def assert_committed_once(
    proxy: FaultProxy, s3_server: S3Server, location: str, version: int, txn: str, operation: str
) -> None:
    """The log holds exactly versions 0..version (no gap, no second copy of ours), the last is
    ours, nothing was even tried at the version after it, and delta-rs reads the same files."""
    assert log_versions(s3_server, location) == list(range(version + 1))
    assert not proxy.seen("PUT", f"/_delta_log/{version + 1:020d}.json")
    lines = [
        json.loads(line) for line in object_bytes(s3_server, location, f"_delta_log/{version:020d}.json").splitlines()
    ]
    info = lines[0]["commitInfo"]
    assert info["operation"] == operation and info["txnId"] == txn
    theirs_version, theirs = deltars_view(s3_server, location)
    assert theirs_version == version
    assert sorted(p for p, _size in theirs) == sorted(load_snapshot(location).file_paths())


# The PUTs of a first commit through a storage: the conditional-put probe's two (the second
# one refused with 412), then the commit itself.
PUTS = {1: "probe", 2: "probe_refused", 3: "commit"}


@pytest.mark.parametrize("nth", list(PUTS), ids=list(PUTS.values()))
@pytest.mark.parametrize("fault", ["reset_after", "error_after", "reset"])
def test_a_commit_whose_put_is_dropped_before_or_after_it_lands_is_written_once(
    proxy: FaultProxy, s3_server: S3Server, writable: str, fault: str, nth: int
) -> None:
    """reset_after and error_after: the PUT landed and the client never heard (obstore repeats
    the one answered 500 and gets 412); reset: it never arrived. Either way the object is read
    back and the commit is written exactly once."""
    proxy.add(fault, method="PUT", skip=nth - 1, times=1)
    actions, txn = our_commit()
    result = commit(writable, actions, "WRITE", txn_id=txn)
    assert result.version == 15
    faulted = [s for s in proxy.seen("PUT") if s.fault]
    assert [s.fault for s in faulted] == [fault]
    assert proxy.seen("GET", faulted[0].path)  # read back
    assert_committed_once(proxy, s3_server, writable, 15, txn, "WRITE")
    snap = load_snapshot(writable)
    assert snap.version == 15 and actions[0]["add"]["path"] in snap.file_paths()


def _lost_on_the_commit_put(proxy: FaultProxy, fault: str) -> None:
    proxy.add(fault, method="PUT", path="/_delta_log/0", times=1)


@pytest.mark.parametrize("fault", ["reset_after", "error_after"])
def test_a_restore_whose_commit_answer_is_lost_is_committed_once(
    proxy: FaultProxy, s3_server: S3Server, writable: str, fault: str
) -> None:
    from tables.delta.restore.commit import commit_restore
    from tables.delta.restore.plan import plan_restore

    plan = plan_restore(writable, version=12, check_files=False, with_row_impact=False)
    _lost_on_the_commit_put(proxy, fault)
    out = commit_restore(writable, plan, recheck_files=False)
    assert out["version"] == 15 and not out["alreadyCommitted"]
    assert [s.fault for s in proxy.seen("PUT")].count(fault) == 1
    assert_committed_once(proxy, s3_server, writable, 15, out["txnId"], "RESTORE")
    assert sorted(load_snapshot(writable).file_paths()) == sorted(load_snapshot(writable, 12).file_paths())


@pytest.mark.parametrize("fault", ["status503", "error_after"])
def test_another_writers_version_is_still_a_conflict(
    proxy: FaultProxy, s3_server: S3Server, writable: str, fault: str
) -> None:
    """The read-back tells our write from another's: different bytes there are a conflict."""
    theirs = b'{"commitInfo":{"operation":"THEIRS"}}\n'
    key = writable.split(f"s3://{BUCKET}/", 1)[1] + "/_delta_log/00000000000000000015.json"
    s3_server.boto3().put_object(Bucket=BUCKET, Key=key, Body=theirs)
    storage = open_storage(writable)
    _lost_on_the_commit_put(proxy, fault)
    with pytest.raises(CommitConflictError, match="version 15 was committed by another writer first"):
        write_commit(storage, 15, [], {"operation": "OURS"}, None)
    assert object_bytes(s3_server, writable, "_delta_log/00000000000000000015.json") == theirs
    assert log_versions(s3_server, writable) == list(range(16))


@pytest.mark.parametrize("fault", ["reset", "status503"])
def test_a_commit_put_that_never_lands_is_a_named_error_and_writes_nothing(
    proxy: FaultProxy, s3_server: S3Server, writable: str, fault: str
) -> None:
    storage = open_storage(writable)
    storage._check_conditional_put()  # the probe's PUTs are not what this test is about
    proxy.add(fault, method="PUT", times=None)
    with pytest.raises(StorageError) as info:
        write_commit(storage, 15, [], {"operation": "WRITE"}, None)
    assert_named_unavailable(info.value)
    assert log_versions(s3_server, writable) == list(range(15))
    # obstore repeats a PUT answered 503; one whose connection dropped is repeated by the
    # storage after reading back that nothing landed: either way MAX_RETRIES more, no more
    assert len(proxy.seen("PUT", "/_delta_log/00000000000000000015.json")) == MAX_RETRIES + 1


def test_a_commit_whose_every_put_answer_is_lost_is_still_written_once(
    proxy: FaultProxy, s3_server: S3Server, writable: str
) -> None:
    proxy.add("reset_after", method="PUT", times=None)
    actions, txn = our_commit()
    assert commit(writable, actions, "WRITE", txn_id=txn).version == 15
    assert_committed_once(proxy, s3_server, writable, 15, txn, "WRITE")


# --- (e) latency ---------------------------------------------------------------------------------


def test_a_slow_store_still_answers(proxy: FaultProxy, baseline: dict[str, Any]) -> None:
    proxy.add("latency", delay=0.3, times=None)
    assert summary(load_snapshot(BASE)) == baseline["snapshot"]
    assert {s.fault for s in proxy.seen()} == {"latency"}


def test_a_slow_commit_is_written_once(proxy: FaultProxy, s3_server: S3Server, writable: str) -> None:
    proxy.add("latency", method="PUT", path="/_delta_log/0", delay=0.3, times=None)
    actions, txn = our_commit()
    assert commit(writable, actions, "WRITE", txn_id=txn).version == 15
    assert_committed_once(proxy, s3_server, writable, 15, txn, "WRITE")


def test_the_proxy_forwards_signed_requests_unchanged(proxy: FaultProxy, s3_server: S3Server) -> None:
    """Without rules the proxy is transparent: what our storage reads through it is what
    boto3 reads from moto directly (SigV4 signatures verified with the client's Host)."""
    st = open_storage(BASE)
    assert st.read(COMMIT_14) == object_bytes(s3_server, BASE, COMMIT_14)
    assert {(s.method, s.status) for s in proxy.seen()} == {("GET", 200)}
