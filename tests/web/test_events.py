"""Push: the bucket's S3 event notifications go to an SQS queue (both on a real S3/SQS server on
loopback); the listener turns a new commit's event into that table's sync, through a real
Celery worker, and deletes what it handled. Events for data files, unregistered tables and
bodies that are not S3 events start nothing."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pyarrow as pa
import pytest

from tables.models import Commit, Table
from tables.services.registration import register_table
from tables.services.sync import events
from tables.services.sync.store import sync_table

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db(transaction=True)
BUCKET = "pushed"


@pytest.fixture
def queue(s3_server, monkeypatch, settings):
    from tests.conftest import use_store_environment

    use_store_environment(monkeypatch, s3_server.env())
    s3, sqs = s3_server.boto3("s3"), s3_server.boto3("sqs")
    url = sqs.create_queue(QueueName=f"commits-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_notification_configuration(
        Bucket=BUCKET,
        NotificationConfiguration={"QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]},
    )
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{BUCKET}/"]
    return sqs, url


def drain(sqs, url) -> list[dict]:
    out = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
        if not got:
            return out
        out += got
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
        )


def test_the_roots_an_event_names() -> None:
    def event(key: str, name: str = "ObjectCreated:Put") -> str:
        return json.dumps({"Records": [{"eventName": name, "s3": {"bucket": {"name": "b"}, "object": {"key": key}}}]})

    assert events.table_roots(event("sales/orders/_delta_log/00000000000000000007.json")) == {"s3://b/sales/orders"}
    assert events.table_roots(event("t%3Dx/_delta_log/00000000000000000010.checkpoint.parquet")) == {"s3://b/t=x"}
    assert events.table_roots(event("sales/part-0001.parquet")) == set()
    assert events.table_roots(event("t/_delta_log/_staged_commits/00000000000000000003.uuid.json")) == set()
    assert events.table_roots(event("t/_delta_log/00000000000000000007.json", "ObjectRemoved:Delete")) == set()
    assert events.table_roots(json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent"})) == set()
    assert events.table_roots("not json") == set()
    sns = json.dumps({"Type": "Notification", "Message": event("a/_delta_log/00000000000000000001.json")})
    assert events.table_roots(sns) == {"s3://b/a"}


def test_a_commit_event_syncs_its_table_through_a_worker(queue, s3_server, celery_worker_factory) -> None:
    sqs, url = queue
    uri = f"s3://{BUCKET}/t-{uuid.uuid4().hex[:8]}"
    opts = s3_server.storage_options()
    for i in range(2):
        deltalake.write_deltalake(uri, pa.table({"x": [i]}), mode="append", storage_options=opts)
    table = register_table("pushed", uri)
    sync_table(table.pk)
    assert drain(sqs, url), "the bucket sent no event for the first commits"
    celery_worker_factory(env=s3_server.env())

    stop = threading.Event()
    listener = threading.Thread(target=events.listen, args=(url, 1, stop.is_set), daemon=True)
    listener.start()
    try:
        deltalake.write_deltalake(uri, pa.table({"x": [2]}), mode="append", storage_options=opts)
        written = time.monotonic()
        deadline = written + 120
        # the rows land first, the table's synced version when the sync ends: wait for both
        while time.monotonic() < deadline and Table.objects.get(pk=table.pk).last_synced_version != 2:
            time.sleep(0.2)
        assert Commit.objects.filter(table=table, version=2).exists(), "the event did not sync the table"
        assert Table.objects.get(pk=table.pk).last_synced_version == 2
    finally:
        stop.set()
        listener.join(timeout=30)


def test_events_for_unregistered_tables_and_data_files_start_nothing(queue, s3_server) -> None:
    sqs, url = queue
    opts = s3_server.storage_options()
    deltalake.write_deltalake(
        f"s3://{BUCKET}/nobody-{uuid.uuid4().hex[:6]}", pa.table({"x": [1]}), storage_options=opts
    )
    client = events.sqs_client(url)
    totals = {"messages": 0, "syncs": 0}
    for _ in range(5):
        got = events.receive_once(client, url, 1)
        totals = {k: totals[k] + got[k] for k in totals}
        if got["messages"] == 0 and totals["messages"]:
            break
    assert totals["messages"] >= 2 and totals["syncs"] == 0
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", []) == []  # deleted
