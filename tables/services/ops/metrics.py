"""deltaweb's metrics in the Prometheus text format.

Two kinds:
- **Requests**, counted by the web process as they are served (`observe_request`): requests by
  method, view and status, and their duration. With several processes (gunicorn workers), set
  PROMETHEUS_MULTIPROC_DIR to a directory they share and every scrape sees them all.
- **State**, read from the database at scrape time, so that every process answers the same
  (`StateCollector`): each table's sync lag, jobs by kind and state, syncs' and Spark jobs'
  durations (cumulative histograms counted as each job ends, Spark's by kind), restore requests by state, catalog commits and refused commits, recipients' sharing
  queries, and what the
  plug-ins collect (tables.plugins).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Min, Q, Sum
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from tables import plugins
from tables.models import Job, JobKind, OwnerRefusal, RatifiedCommit, RecipientQuery, RestoreRequest, Table
from tables.services.jobs import durations
from tables.services.ops.beat import last_tick
from tables.services.ops.http_labels import method_label
from tables.services.sync import events

REQUESTS = Counter("deltaweb_http_requests", "HTTP requests served", ["method", "view", "status"])
LATENCY = Histogram(
    "deltaweb_http_request_seconds",
    "HTTP request duration",
    ["view"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
SPARK_KINDS = JobKind.data_kinds()


def observe_request(method: str, view: str, status: int, seconds: float) -> None:
    REQUESTS.labels(method_label(method), view, str(status) if 100 <= status <= 599 else "other").inc()
    LATENCY.labels(view).observe(seconds)


class StateCollector:
    """What the database says now; collected at each scrape."""

    def collect(self) -> Iterator[object]:
        yield from _tables()
        yield from _jobs()
        yield from _restores()
        yield from _catalog()
        yield from _sharing()
        for collector in plugins.collectors():  # the plug-ins' own (tables.plugins)
            yield from collector.collect()
        yield from _queue()
        yield from _events()


def _tables() -> Iterator[object]:
    """The fleet's sync lag and failures (two aggregates); per table only with
    DELTAWEB_METRICS_PER_TABLE (a series per table is unbounded: 100,000 tables, 200,000 series)."""
    now = timezone.now()
    # a table's last look: the later of its probe and its sync (either may be missing)
    seen = Greatest(Coalesce("checked_at", "last_synced_at"), Coalesce("last_synced_at", "checked_at"))
    fleet = Table.objects.aggregate(oldest=Min(seen), failing=Count("id", filter=Q(failures__gt=0)))
    worst = max(0.0, (now - fleet["oldest"]).total_seconds()) if fleet["oldest"] is not None else 0.0
    yield GaugeMetricFamily(
        "deltaweb_tables_sync_lag_max_seconds", "the largest sync lag of any table (seconds)", value=worst
    )
    yield GaugeMetricFamily("deltaweb_tables_failing", "tables whose last probe or sync failed", value=fleet["failing"])
    if settings.DELTAWEB_METRICS_PER_TABLE:
        lag = GaugeMetricFamily(
            "deltaweb_table_sync_lag_seconds",
            "seconds since a probe or a sync last found the table as cached",
            labels=["table"],
        )
        failing = GaugeMetricFamily("deltaweb_table_failures", "probes or syncs failed in a row", labels=["table"])
        for slug, last, failures in Table.objects.annotate(seen=seen).values_list("slug", "seen", "failures"):
            if last is not None:
                lag.add_metric([slug], max(0.0, (now - last).total_seconds()))
            failing.add_metric([slug], failures)
        yield lag
        yield failing
    states = GaugeMetricFamily("deltaweb_tables", "registered tables by sync state", labels=["state"])
    for state, n in Table.objects.values_list("sync_state").annotate(n=Count("id")):
        states.add_metric([state], n)
    yield states


def _jobs() -> Iterator[object]:
    jobs = GaugeMetricFamily(
        "deltaweb_jobs", "jobs by kind and state (finished ones until pruned)", labels=["kind", "state"]
    )
    for kind, state, n in Job.objects.values_list("kind", "status").annotate(n=Count("id")):
        jobs.add_metric([kind, state], n)
    yield jobs
    found = durations.histograms()  # cumulative, counted as jobs end (services/job_durations.py)
    sync = found.get(JobKind.SYNC)
    if sync is not None:
        yield HistogramMetricFamily(
            "deltaweb_sync_seconds", "sync jobs finished, by duration", buckets=sync[0], sum_value=sync[1]
        )
    spark = HistogramMetricFamily(
        "deltaweb_spark_job_seconds", "Spark jobs finished, by kind and duration", labels=["kind"]
    )
    for kind in SPARK_KINDS:
        if kind in found:
            spark.add_metric([kind], buckets=found[kind][0], sum_value=found[kind][1])
    yield spark


def _restores() -> Iterator[object]:
    restores = GaugeMetricFamily("deltaweb_restore_requests", "restore requests by state", labels=["state"])
    for state, n in RestoreRequest.objects.values_list("status").annotate(n=Count("id")):
        restores.add_metric([state], n)
    yield restores


def _catalog() -> Iterator[object]:
    yield CounterMetricFamily(
        "deltaweb_catalog_commits", "commits ratified as commit owner", value=RatifiedCommit.objects.count()
    )
    refused = CounterMetricFamily(
        "deltaweb_catalog_refused_commits", "commits refused (conflicts, policy)", labels=["code"]
    )
    for code, n in OwnerRefusal.objects.values_list("code").annotate(n=Count("id")):
        refused.add_metric([code], n)
    yield refused


def _sharing() -> Iterator[object]:
    """Recipients' Delta Sharing queries by kind and outcome, and the files and bytes served
    (the record of every query: RecipientQuery rows are never rewritten, so these only grow)."""
    queries = CounterMetricFamily(
        "deltaweb_sharing_queries", "Delta Sharing recipient queries", labels=["kind", "outcome"]
    )
    served = RecipientQuery.objects.values_list("kind", "refused").annotate(
        n=Count("id"), files=Coalesce(Sum("files"), 0), size=Coalesce(Sum("bytes"), 0)
    )
    files = bytes_served = 0
    outcomes: dict[tuple[str, str], int] = {}
    for kind, refused, n, f, b in served:
        key = (kind, "refused" if refused else "served")
        outcomes[key] = outcomes.get(key, 0) + n
        files, bytes_served = files + f, bytes_served + b
    for (kind, outcome), n in sorted(outcomes.items()):
        queries.add_metric([kind, outcome], n)
    yield queries
    yield CounterMetricFamily("deltaweb_sharing_files_served", "files listed to recipients", value=files)
    yield CounterMetricFamily(
        "deltaweb_sharing_bytes_served", "bytes of the files listed to recipients", value=bytes_served
    )


def _events() -> Iterator[object]:
    found = events.counts()  # from the shared cache: the listener runs in its own process
    if not found:
        return  # the cache did not answer: no sample rather than a false reset to 0
    messages = CounterMetricFamily(
        "deltaweb_events_messages", "SQS event messages received by the listener, by outcome", labels=["outcome"]
    )
    for outcome in events.OUTCOMES:
        messages.add_metric([outcome], found.get(outcome, 0))
    yield messages
    if "last_poll" in found:
        yield GaugeMetricFamily(
            "deltaweb_events_last_poll_timestamp_seconds",
            "unix time of the listener's last poll of its queue that succeeded",
            value=found["last_poll"],
        )
    if "lag" in found:
        yield GaugeMetricFamily(
            "deltaweb_events_lag_seconds",
            "age of the oldest message of the listener's last poll when handled (0 for an empty poll)",
            value=found["lag"],
        )


WORKER_PING_SECONDS = 0.5


def _queue() -> Iterator[object]:
    """The Celery side: the beat's last tick, the messages waiting in the task queue (a Redis
    broker only: one LLEN, its own short timeout, nothing when it does not answer), and the
    workers alive."""
    from celery import current_app

    tick = last_tick()
    if tick is not None:
        yield GaugeMetricFamily(
            "deltaweb_beat_last_tick_timestamp_seconds", "unix time of the beat's last tick", value=tick
        )
    url = str(current_app.conf.broker_url or "")
    if current_app.conf.task_always_eager or not url.startswith(("redis://", "rediss://")):
        return
    import redis

    queue = current_app.conf.task_default_queue or "celery"
    try:
        client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        waiting = client.llen(queue)
    except redis.RedisError:
        return
    depth = GaugeMetricFamily("deltaweb_task_queue_messages", "task messages waiting, by queue", labels=["queue"])
    depth.add_metric([queue], waiting)
    yield depth
    try:  # every worker answers a broadcast ping within half a second (a scrape waits that long)
        alive = len(current_app.control.ping(timeout=WORKER_PING_SECONDS) or [])
    except Exception:  # the broker answered the LLEN above: a failure here is no count, not 0
        return
    yield GaugeMetricFamily("deltaweb_workers_alive", "Celery workers answering a ping", value=alive)


def exposition() -> bytes:
    """The text a scrape gets: the requests (of every process, in multiprocess mode) and the state."""
    registry = CollectorRegistry()
    # the answering process's own: memory, CPU, open files (process_*), the interpreter (python_*)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        registry.register(_ProcessRequests())
    registry.register(StateCollector())
    return generate_latest(registry)


class _ProcessRequests:
    """This process's request metrics (the default registry's), without its other collectors."""

    def collect(self) -> Iterator[object]:
        yield from REQUESTS.collect()
        yield from LATENCY.collect()
