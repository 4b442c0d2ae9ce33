"""Push: S3 event notifications delivered to an SQS queue start the sync of the table they name,
within seconds of the commit. Polling (the probe) stays the safety net: a lost or late event
costs at most one probe interval.

An event counts when its object key is a commit or checkpoint of a table's log
(`<table>/_delta_log/<name>`); the table is `s3://<bucket>/<table>`, matched against the
registered locations (and their `s3a://` spelling). Other objects (data files, staged commits)
are acknowledged and ignored, as are events for tables nobody registered. A message is deleted
once handled; a body that is not an S3 event (SQS's own test event included) is deleted too,
after a log line. `manage.py listen_events` runs `listen` in its own process.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_plus

from django.conf import settings
from django.db import transaction

from tables.models import Table

logger = logging.getLogger("tables.events")

_LOG_FILE = re.compile(r"^(?P<root>.+?)/_delta_log/(?:\d{20}\.json|\d{20}\.checkpoint[^/]*\.parquet|_last_checkpoint)$")


def table_roots(body: str) -> set[str]:
    """The `s3://bucket/table` roots whose logs an S3 event message names (none for other events)."""
    try:
        message = json.loads(body)
    except ValueError:
        return set()
    if isinstance(message, dict) and "Message" in message and "Records" not in message:  # through SNS
        try:
            message = json.loads(message["Message"])
        except (TypeError, ValueError):
            return set()
    roots = set()
    for record in message.get("Records", []) if isinstance(message, dict) else []:
        try:
            bucket = record["s3"]["bucket"]["name"]
            key = unquote_plus(record["s3"]["object"]["key"])  # S3 sends keys URL-encoded
        except (KeyError, TypeError):
            continue
        match = _LOG_FILE.match(key)
        if match and str(record.get("eventName", "")).startswith("ObjectCreated"):
            roots.add(f"s3://{bucket}/{match['root']}")
    return roots


def sync_tables_at(roots: Iterable[str]) -> list[int]:
    """Start a sync of each registered table at these roots (an identical queued or running
    sync is joined, not repeated)."""
    from tables.services.sync.store import start_sync

    wanted = set(roots) | {"s3a://" + r[len("s3://") :] for r in roots}
    started = []
    for table in Table.objects.filter(location__in=wanted):
        with transaction.atomic():
            start_sync(table)
        started.append(table.pk)
    return started


def sqs_client(queue_url: str) -> Any:
    import boto3

    region = re.search(r"sqs[.-]([a-z0-9-]+)\.", queue_url)
    return boto3.client("sqs", region_name=settings.DELTAWEB_SQS_REGION or (region[1] if region else "us-east-1"))


def receive_once(client: Any, queue_url: str, wait_seconds: int = 10) -> dict[str, int]:
    """One long poll: the messages received handled and deleted."""
    answer = client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_seconds)
    messages = answer.get("Messages", [])
    roots: set[str] = set()
    for m in messages:
        found = table_roots(m.get("Body", ""))
        if not found:
            logger.info("ignored an event that names no table log: %s", m.get("Body", "")[:200])
        roots |= found
    started = sync_tables_at(roots) if roots else []
    if messages:
        client.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
    return {"messages": len(messages), "tables": len(roots), "syncs": len(started)}


def listen(
    queue_url: str, wait_seconds: int = 10, should_stop: Callable[[], bool] = lambda: False, client: Any = None
) -> None:
    """Receive until `should_stop()`: each long poll's events turned into syncs. A failing queue
    is retried after a pause that grows to a minute, with the reason logged."""
    client = client or sqs_client(queue_url)
    pause = 1.0
    while not should_stop():
        try:
            receive_once(client, queue_url, wait_seconds)
            pause = 1.0
        except Exception as exc:  # the queue or the database is down: say so, wait, go on
            logger.warning("receiving from %s failed (%s); retrying in %.0f s", queue_url, exc, pause)
            time.sleep(pause)
            pause = min(pause * 2, 60.0)
