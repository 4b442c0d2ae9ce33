"""Push: S3 event notifications delivered to an SQS queue start the sync of the table they name,
within seconds of the commit. Polling (the probe) stays the safety net: a lost or late event
costs at most one probe interval.

An event counts when its object key is a commit or checkpoint of a table's log
(`<table>/_delta_log/<name>`); the table is `s3://<bucket>/<table>`, matched against the
registered locations (and their `s3a://` spelling). Other objects (data files, staged commits)
are acknowledged and ignored, as are events for tables nobody registered.
`manage.py listen_events` runs `listen` in its own process.

A message body is hostile input: anyone who may send to the queue chooses it. Each message of a
poll is handled on its own, with one of three outcomes, counted in the shared cache (so that
every process's `/metrics` sees the listener's counts) under `deltaweb_events_messages_total`:
- `handled`: an S3 event naming a table's log; the syncs of the registered tables it names
  were started;
- `ignored`: a valid S3 event naming no table log, or S3's own test event;
- `malformed`: not an S3 event (not JSON, `Records` not a list of S3 records, ...), or starting
  the syncs it names failed (one table's row broken, say).

Every message is deleted once handled, malformed ones included, after a log line with a bounded,
printable excerpt of the body. Leaving a malformed message for the queue's dead-letter policy
would only delay that: SQS moves a message there after it was received `maxReceiveCount` times
without being deleted, and a body that is not an S3 event never becomes one, so each retry
would fail the same way while holding up nothing but the listener's attention.

One exception: when the database itself fails (`OperationalError`, `InterfaceError`: it is down
or restarting), the message being handled and the rest of the poll are not deleted. They come
back after the queue's visibility timeout, and `listen` retries after a growing pause. The
messages of that poll already handled are deleted and counted first.
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
from django.core.cache import caches
from django.db import InterfaceError, OperationalError, close_old_connections, transaction

from tables.delta.storage.backends import spelled
from tables.models import Table
from tables.services.catalog import aws

logger = logging.getLogger("tables.events")

_LOG_FILE = re.compile(r"^(?P<root>.+?)/_delta_log/(?:\d{20}\.json|\d{20}\.checkpoint[^/]*\.parquet|_last_checkpoint)$")
OUTCOMES = ("handled", "ignored", "malformed")
EXCERPT = 200  # characters of a body a log line shows: a body may be up to 1 MiB
_COUNT_KEY = "events:messages:{}"
_LAST_POLL_KEY = "events:last-poll"
_LAG_KEY = "events:lag"  # seconds behind at the last poll (metrics: deltaweb_events_lag_seconds)
# The database is unreachable, not the message wrong: the message is kept to be received again.
_INFRASTRUCTURE = (OperationalError, InterfaceError)


class Malformed(ValueError):
    """A message body that is not an S3 event notification."""


def excerpt(text: object, limit: int = EXCERPT) -> str:
    """A log line's view of untrusted text: its first `limit` characters, the unprintable ones
    (newlines, controls, bidi overrides) escaped so that a body cannot forge log lines, and its
    length when cut."""
    if not isinstance(text, str):
        return f"<{type(text).__name__}>"
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[:limit])
    return shown if len(text) <= limit else f"{shown}... ({len(text)} characters)"


def read_event(body: object) -> tuple[str, set[str]]:
    """The message's outcome before any sync (`handled`, `ignored` or `malformed`) and the
    `s3://bucket/table` roots whose logs it names. Never raises, whatever the body."""
    try:
        records = _records(body)
    except Malformed:
        return "malformed", set()
    roots, bad = set(), 0
    for record in records:
        try:
            root = _record_root(record)
        except Malformed:
            bad += 1
            continue
        if root is not None:
            roots.add(root)
    # the valid records of a message with some bad ones still start their syncs: a sync is harmless
    return ("malformed" if bad else "handled" if roots else "ignored"), roots


def table_roots(body: object) -> set[str]:
    """The `s3://bucket/table` roots whose logs an S3 event message names (none for other events
    or for bodies that are not S3 events). Never raises."""
    return read_event(body)[1]


def _records(body: object) -> list[Any]:
    """The body's S3 event records, through an SNS envelope if it came that way."""
    message = _json(body)
    if isinstance(message, dict) and "Message" in message and "Records" not in message:  # through SNS
        message = _json(message["Message"])
    if not isinstance(message, dict):
        raise Malformed("not a JSON object")
    if "Records" not in message and message.get("Event") == "s3:TestEvent":  # sent when the notification is set up
        return []
    records = message.get("Records")
    if not isinstance(records, list):
        raise Malformed("Records is not a list")
    return records


def _json(text: object) -> Any:
    if not isinstance(text, str):
        raise Malformed("not a string")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested thousands deep
        raise Malformed("not JSON") from exc


def _record_root(record: Any) -> str | None:
    """The table root a record's new log object belongs to; None for other objects and events."""
    s3 = record.get("s3") if isinstance(record, dict) else None
    bucket = s3.get("bucket") if isinstance(s3, dict) else None
    obj = s3.get("object") if isinstance(s3, dict) else None
    name = bucket.get("name") if isinstance(bucket, dict) else None
    key = obj.get("key") if isinstance(obj, dict) else None
    event = record.get("eventName", "") if isinstance(record, dict) else None
    if not (_sane(name) and "/" not in name and _sane(key) and isinstance(event, str)):
        raise Malformed("not an S3 record")
    key = unquote_plus(key)  # S3 sends keys URL-encoded
    match = _LOG_FILE.match(key)
    if not match or not event.startswith("ObjectCreated") or not _sane(match["root"]):
        return None
    return f"s3://{name}/{match['root']}"


def _sane(value: object) -> bool:
    """A non-empty string the database can store: no NUL, no lone surrogate."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def sync_tables_at(roots: Iterable[str]) -> list[int]:
    """Start a sync of each registered table at these roots (an identical queued or running
    sync is joined, not repeated)."""
    from tables.services.sync.store import start_sync

    wanted = {spelling for r in roots for spelling in spelled(r)}  # s3a:// too (the backend's spellings)
    started = []
    for table in Table.objects.filter(location__in=wanted):
        with transaction.atomic():
            start_sync(table)
        started.append(table.pk)
    return started


def sqs_client(queue_url: str) -> Any:
    """The queue's client: its region from the URL (else DELTAWEB_SQS_REGION), at
    DELTAWEB_SQS_ENDPOINT_URL or AWS's own endpoint, never the object store's AWS_ENDPOINT_URL."""
    region = re.search(r"sqs[.-]([a-z0-9-]+)\.", queue_url)
    region_name = settings.DELTAWEB_SQS_REGION or (region[1] if region else "us-east-1")
    return aws.client("sqs", region_name, settings.DELTAWEB_SQS_ENDPOINT_URL)


def receive_once(client: Any, queue_url: str, wait_seconds: int = 10) -> dict[str, int]:
    """One long poll: each message received handled on its own and deleted, and counted by
    outcome. A database failure is raised after the messages handled before it were deleted."""
    answer = client.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_seconds, AttributeNames=["SentTimestamp"]
    )
    messages = answer.get("Messages", [])
    lag = _lag(messages, time.time())
    tally = dict.fromkeys(OUTCOMES, 0)
    done: list[dict[str, Any]] = []
    synced: set[str] = set()  # roots whose syncs this poll started: six events of one commit, one start
    started: set[int] = set()
    try:
        for m in messages:
            tally[_handle(m, synced, started)] += 1
            done.append(m)
    finally:
        _delete(client, queue_url, done)
        for outcome, n in tally.items():
            count(outcome, n)
    _mark_poll(lag)
    return {"messages": len(messages), "tables": len(synced), "syncs": len(started), **tally}


def _handle(message: dict[str, Any], synced: set[str], started: set[int]) -> str:
    """One message's outcome, its syncs started. Raises only when the database fails."""
    body = message.get("Body")
    ident = excerpt(message.get("MessageId"), 100)
    outcome, roots = read_event(body)
    if outcome == "malformed":
        logger.warning("deleting event message %s: not an S3 event: %s", ident, excerpt(body))
    elif outcome == "ignored":
        logger.info("ignored event message %s: it names no table log: %s", ident, excerpt(body))
    if not roots - synced:
        return outcome
    try:
        started.update(sync_tables_at(roots - synced))
    except _INFRASTRUCTURE:
        raise
    except Exception as exc:  # one table's row or its job broken: the other messages go on
        logger.warning(
            "deleting event message %s: starting its syncs failed (%s): %s", ident, excerpt(str(exc)), excerpt(body)
        )
        return "malformed"
    synced.update(roots)
    return outcome


def _delete(client: Any, queue_url: str, messages: list[dict[str, Any]]) -> None:
    entries = [
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages) if m.get("ReceiptHandle")
    ]
    if not entries:
        return
    answer = client.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    for failed in answer.get("Failed", []) if isinstance(answer, dict) else []:
        # not deleted: received again after the visibility timeout, and handled again (harmless)
        logger.warning("deleting an event message failed: %s", excerpt(str(failed)))


def count(outcome: str, n: int = 1) -> None:
    """Add `n` messages to an outcome's cumulative count, in the shared cache every process
    reads. A cache that fails costs the count, never the message's handling."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}")
    if n <= 0:
        return
    cache, key = caches["shared"], _COUNT_KEY.format(outcome)
    try:
        cache.add(key, 0, None)
        cache.incr(key, n)
        # the database cache's incr stores the sum with the default timeout (300 s): keep it
        cache.touch(key, None)
    except Exception as exc:  # counting is best effort
        logger.warning("counting %d %s event messages failed: %s", n, outcome, exc)


def counts() -> dict[str, float]:
    """Every outcome's count (0 if never counted) and, under `last_poll`, the unix time of the
    last poll that succeeded (absent if none). Empty when the shared cache does not answer: a
    scrape then shows no count rather than a false reset to 0."""
    keys = {outcome: _COUNT_KEY.format(outcome) for outcome in OUTCOMES}
    try:
        found = caches["shared"].get_many([*keys.values(), _LAST_POLL_KEY, _LAG_KEY])
    except Exception as exc:  # the other metrics still answer
        logger.warning("reading the event message counts failed: %s", exc)
        return {}
    out: dict[str, float] = {outcome: int(found.get(key) or 0) for outcome, key in keys.items()}
    if found.get(_LAST_POLL_KEY) is not None:
        out["last_poll"] = float(found[_LAST_POLL_KEY])
    if found.get(_LAG_KEY) is not None:
        out["lag"] = float(found[_LAG_KEY])
    return out


def _lag(messages: list[dict[str, Any]], now: float) -> float:
    """Seconds from the oldest message's arrival in the queue (SQS's SentTimestamp) to now: how
    far behind the listener is; 0 for an empty poll (nothing is waiting)."""
    sent = []
    for m in messages:
        try:
            sent.append(int(m.get("Attributes", {}).get("SentTimestamp")) / 1000)
        except (TypeError, ValueError):  # a queue that does not say
            continue
    return max(0.0, now - min(sent)) if sent else 0.0


def _mark_poll(lag: float) -> None:
    try:
        caches["shared"].set_many({_LAST_POLL_KEY: time.time(), _LAG_KEY: lag}, None)
    except Exception as exc:  # best effort, as the counts
        logger.warning("recording the last poll failed: %s", exc)


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
            # a connection the database dropped stays broken until closed; the next query reconnects
            close_old_connections()
            time.sleep(pause)
            pause = min(pause * 2, 60.0)
