"""Push: the bucket's S3 event notifications go to an SQS queue (both on a real S3/SQS server on
loopback); the listener turns a new commit's event into that table's sync, through a real
Celery worker, and deletes what it handled. Events for data files, unregistered tables and
bodies that are not S3 events start nothing. A batch mixing hostile bodies with good events is
handled message by message: the good ones sync, the bad ones are counted on /metrics and
deleted, and a database that is down leaves the messages to be received again."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pyarrow as pa
import pytest
from django.core.cache import caches
from django.db import IntegrityError, OperationalError, connection

from tables.models import Commit, Job, JobKind, Table
from tables.services.catalog.registration import register_table
from tables.services.sync import events, store
from tables.services.sync.store import sync_table
from tests.web.pages.test_ops import samples, value

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
    settings.DELTAWEB_SQS_ENDPOINT_URL = s3_server.endpoint  # AWS_ENDPOINT_URL is the store's only
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


def test_the_listeners_lag_is_the_age_of_the_oldest_message_it_received(queue) -> None:
    sqs, url = queue
    drain(sqs, url)
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"Event": "s3:TestEvent"}))
    time.sleep(1.0)  # the message waits in the queue this long at least
    client = events.sqs_client(url)
    got = events.receive_once(client, url, 1)
    assert got["messages"] == 1 and events.counts()["lag"] >= 0.9
    assert events.receive_once(client, url, 0)["messages"] == 0 and events.counts()["lag"] == 0.0


def test_the_queue_is_never_asked_at_the_object_stores_endpoint(monkeypatch, settings) -> None:
    """AWS_ENDPOINT_URL names the object store (MinIO in docker-compose.yml): the SQS client
    goes to its own setting, else to AWS's regional endpoint, as a deployment needs."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://minio:9000")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://minio:9000")
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/commits"
    settings.DELTAWEB_SQS_ENDPOINT_URL = ""
    assert events.sqs_client(url).meta.endpoint_url == "https://sqs.eu-west-1.amazonaws.com"
    settings.DELTAWEB_SQS_ENDPOINT_URL = "http://moto:5000"
    assert events.sqs_client(url).meta.endpoint_url == "http://moto:5000"


# Bodies a hostile sender can put on the queue; none is an S3 event.
BAD_BODIES = [
    json.dumps({"Records": 5}),
    json.dumps({"Records": None}),
    json.dumps({"Records": [5, None, {"s3": 7}]}),
    "not json",
    json.dumps({"Type": "Notification", "Message": 12}),
]
MESSAGES = "deltaweb_events_messages_total"


def record(**s3: object) -> str:
    return json.dumps({"Records": [{"eventName": "ObjectCreated:Put", "s3": s3}]})


def test_bodies_that_are_not_s3_events_name_no_table() -> None:
    log_key = "t/_delta_log/00000000000000000001.json"
    hostile = [
        *BAD_BODIES,
        json.dumps({"Records": "abc"}),
        json.dumps({"Records": {"s3": {}}}),
        json.dumps({"Records": [[], "x", 1.5, True]}),
        json.dumps([{"Records": []}]),
        json.dumps(None),
        json.dumps({}),
        "[" * 200_000,  # nested past Python's recursion limit
        "1" * 5_000,  # past the integer digit limit
        record(bucket={"name": "b"}, object={"key": 7}),
        record(bucket={"name": ["b"]}, object={"key": log_key}),
        record(bucket="b", object={"key": log_key}),
        record(bucket={"name": "b"}, object=None),
        record(bucket={"name": "b/c"}, object={"key": log_key}),
        record(bucket={"name": "b"}, object={"key": "t\u0000x/_delta_log/00000000000000000001.json"}),
        record(bucket={"name": "b"}, object={"key": "t\ud800/_delta_log/00000000000000000001.json"}),
        json.dumps({"Records": [{"eventName": 5, "s3": {"bucket": {"name": "b"}, "object": {"key": log_key}}}]}),
        json.dumps({"Message": None}),
        json.dumps({"Message": {"Records": []}}),
        json.dumps({"Message": json.dumps({"Message": record(bucket={"name": "b"}, object={"key": log_key})})}),
        None,
        b"bytes",
    ]
    for body in hostile:
        assert events.table_roots(body) == set(), body if body is None or len(body) < 100 else body[:20]
        assert events.read_event(body) == ("malformed", set())
    assert events.read_event(json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent"})) == ("ignored", set())
    assert events.read_event(json.dumps({"Records": []})) == ("ignored", set())
    # a message with a good and a bad record: malformed, and its good record still counts
    mixed = json.dumps(
        {"Records": [5, json.loads(record(bucket={"name": "b"}, object={"key": log_key}))["Records"][0]]}
    )
    assert events.read_event(mixed) == ("malformed", {"s3://b/t"})


def test_a_logged_excerpt_is_bounded_and_printable() -> None:
    shown = events.excerpt("line one\nFORGED line\u202e" + "x" * 1_000_000)
    assert "\n" not in shown and "\u202e" not in shown and shown.isprintable()
    assert len(shown) < 300 and shown.endswith("(1000021 characters)")
    assert events.excerpt(None) == "<NoneType>"


def test_the_counts_are_kept_without_expiring() -> None:
    events.count("ignored", 1)
    events.count("ignored", 2)
    assert events.counts() == {"handled": 0, "ignored": 3, "malformed": 0}
    shared = caches["shared"]
    if not hasattr(shared, "_table"):  # Redis: incr keeps the key's (absent) expiry
        return
    # the database cache's incr would store the sum for the default 300 s; the count must stay
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT expires FROM {connection.ops.quote_name(shared._table)} WHERE cache_key = %s",
            [shared.make_key("events:messages:ignored")],
        )
        (expires,) = cursor.fetchone()
    assert str(expires).startswith("9999")


def log_events(sqs, url) -> dict[str, list[str]]:
    """The bodies of the queue's messages by the table root they name ("" for none)."""
    out: dict[str, list[str]] = {}
    for m in drain(sqs, url):
        found = events.table_roots(m["Body"])
        out.setdefault(next(iter(found)) if found else "", []).append(m["Body"])
    return out


def receive_all(client, url) -> dict[str, int]:
    totals: dict[str, int] = {}
    while True:
        got = events.receive_once(client, url, 1)
        totals = {k: totals.get(k, 0) + got[k] for k in got}
        if got["messages"] == 0:
            return totals


def registered(s3_server, name: str, commits: int) -> Table:
    uri = f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"
    for i in range(commits):
        deltalake.write_deltalake(uri, pa.table({"x": [i]}), mode="append", storage_options=s3_server.storage_options())
    table = register_table(f"{name}-{uuid.uuid4().hex[:6]}", uri)
    sync_table(table.pk)
    return table


def test_bad_messages_are_counted_and_deleted_and_the_good_ones_sync(
    queue, s3_server, client, eager_celery, monkeypatch
) -> None:
    sqs, url = queue
    a, b, broken = (registered(s3_server, name, 2) for name in ("a", "b", "broken"))
    drain(sqs, url)
    for table in (a, b, broken):  # a new commit each, for the events to sync
        deltalake.write_deltalake(
            table.location, pa.table({"x": [9]}), mode="append", storage_options=s3_server.storage_options()
        )
    sent = log_events(sqs, url)
    good = [sent[a.location][0], sent[a.location][0], sent[b.location][0]]  # a twice: one sync
    ignored = sent[""][:1]  # a data file's event
    assert ignored and all(len(sent[t.location]) == 1 for t in (a, b, broken))
    bad = [*BAD_BODIES, sent[broken.location][0]]  # the last: starting its table's sync fails

    real_start = store.start_sync

    def start_sync(table, user=None):
        if table.pk == broken.pk:
            raise IntegrityError("the table's row is broken")
        return real_start(table, user)

    monkeypatch.setattr(store, "start_sync", start_sync)
    for body in [bad[0], good[0], bad[1], bad[2], ignored[0], bad[3], good[1], bad[4], good[2], bad[5]]:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    before = samples(client)

    totals = receive_all(events.sqs_client(url), url)

    assert totals["messages"] == 10 and totals["syncs"] == 2
    for table in (a, b):
        assert Job.objects.filter(table=table, kind=JobKind.SYNC).exists()
        assert Table.objects.get(pk=table.pk).last_synced_version == 2, "the event did not sync the table"
    assert not Job.objects.filter(table=broken, kind=JobKind.SYNC).exists()
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", []) == []
    after = samples(client)
    moved = {o: value(after, MESSAGES, outcome=o) - value(before, MESSAGES, outcome=o) for o in events.OUTCOMES}
    assert moved == {"handled": len(good), "ignored": len(ignored), "malformed": len(bad)}
    assert time.time() - 60 < value(after, "deltaweb_events_last_poll_timestamp_seconds") <= time.time()


def test_a_database_that_is_down_leaves_the_messages_to_be_received_again(queue, s3_server, monkeypatch) -> None:
    sqs, url = queue
    table = registered(s3_server, "down", 1)
    drain(sqs, url)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "1"})
    key = table.location[len(f"s3://{BUCKET}/") :] + "/_delta_log/00000000000000000001.json"
    good = record(bucket={"name": BUCKET}, object={"key": key})
    for body in (good, BAD_BODIES[0]):
        sqs.send_message(QueueUrl=url, MessageBody=body)

    def down(table, user=None):
        raise OperationalError("connection refused")

    client = events.sqs_client(url)
    with monkeypatch.context() as patch:
        patch.setattr(store, "start_sync", down)
        failed = False
        for _ in range(5):  # until the poll that receives the messages
            try:
                events.receive_once(client, url, 1)
            except OperationalError:
                failed = True
                break
        assert failed, "a database that is down did not fail the poll"
    assert not Job.objects.filter(table=table, kind=JobKind.SYNC).exists()
    assert "last_poll" not in events.counts()

    time.sleep(1.5)  # the good message comes back after the visibility timeout
    totals = receive_all(client, url)
    assert Job.objects.filter(table=table, kind=JobKind.SYNC).exists()
    assert totals["handled"] == 1
    assert events.counts()["handled"] == 1 and events.counts()["malformed"] == 1  # counted once, either poll
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", []) == []
