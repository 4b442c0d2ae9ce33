"""An incremental sync of a table in S3 (moto in server mode, behind a recording proxy) costs
the new commits' reads and at most 3 other requests: the log is listed from the last synced
version (`start_after`), once, whatever its length."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest

from tables.models import Commit
from tables.services.catalog.registration import register_table
from tables.services.chain import look as chain
from tables.services.sync.store import sync_table
from tests.conftest import use_store_environment
from tests.faults.proxy import FaultProxy

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("obstore")

pytestmark = pytest.mark.django_db
BUCKET = "incremental-tables"
NEW = 100


def put_commits(client, key_prefix: str, first: int, count: int, add: dict) -> None:
    """`count` commits from version `first`, each adding the data file delta-rs wrote (written
    directly: a hundred delta-rs appends would take most of the test's time)."""
    for v in range(first, first + count):
        lines = [
            {"commitInfo": {"timestamp": 1_700_000_000_000 + v, "operation": "WRITE",
                            "operationParameters": {"mode": "Append"}}},
            {"add": {**add, "modificationTime": 1_700_000_000_000 + v}},
        ]  # fmt: skip
        body = "\n".join(json.dumps(line) for line in lines).encode()
        client.put_object(Bucket=BUCKET, Key=f"{key_prefix}/_delta_log/{v:020d}.json", Body=body)


def test_an_incremental_sync_of_100_commits_costs_their_reads_and_at_most_3_requests(
    s3_server, monkeypatch, settings
) -> None:
    client = s3_server.boto3()
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{BUCKET}/"]
    settings.DELTAWEB_CHAIN_SYNC_WINDOW = 50  # the log is longer than the chain's window at each sync
    uri = f"s3://{BUCKET}/events"
    for i in range(2):
        deltalake.write_deltalake(
            uri, pa.table({"id": pa.array([i], pa.int64())}), mode="append", storage_options=s3_server.storage_options()
        )
    log = client.get_object(Bucket=BUCKET, Key="events/_delta_log/00000000000000000001.json")["Body"].read()
    add = next(json.loads(line)["add"] for line in log.splitlines() if b'"add"' in line)
    put_commits(client, "events", 2, 198, add)  # versions 0..199
    # past the chain's racy window (S3 gives whole seconds): a commit written within it of the
    # sync's look is read again at the next one, which is not what this test counts
    time.sleep(chain.RACY_MS / 1000 + 1.5)
    with FaultProxy(s3_server.endpoint) as px:
        use_store_environment(monkeypatch, {**s3_server.env(), "AWS_ENDPOINT_URL": px.url})
        table = register_table("events", uri)
        assert sync_table(table.pk)["latestVersion"] == 199
        put_commits(client, "events", 200, NEW, add)
        px.clear_record()
        result = sync_table(table.pk)
        seen = [(s.method, s.path, s.query) for s in px.seen()]
    assert result["newCommits"] == NEW and result["latestVersion"] == 299, result
    new_reads = [s for s in seen if s[0] == "GET" and s[1].endswith(".json") and "/_delta_log/000" in s[1]
                 and 200 <= int(s[1].rsplit("/", 1)[-1][:20]) < 300]  # fmt: skip
    others = [s for s in seen if s not in new_reads]
    assert len(new_reads) == NEW, seen
    assert len(others) <= 3, others
    listings = [s for s in others if "list-type=2" in s[2]]
    assert len(listings) == 1 and "start-after=" in listings[0][2], others  # the tail only
    # and the history is delta-rs's
    peer = deltalake.DeltaTable(uri, storage_options=s3_server.storage_options())
    assert peer.version() == 299
    assert Commit.objects.filter(table=table).count() == 300
