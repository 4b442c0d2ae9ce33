"""What operators ask of a process: /healthz, /readyz (tested by stopping a real redis-server
under a real Celery worker: 503 naming the broker and the workers), and /metrics, parsed with
prometheus-client's own parser, answering only the configured scrapers, its values moving
with requests, syncs and restore requests."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tables.models import RestoreRequest, RestoreStatus
from tables.services.catalog.registration import register_table
from tables.services.sync.store import start_sync
from tables.spark.engine.conf import driver_memory
from tests.conftest import use_broker
from tests.faults.test_broker_restart import own_redis as own_redis  # the fixture, shared
from tests.web.sync.test_probe import small_table

pytestmark = pytest.mark.django_db(transaction=True)


def samples(client, **extra) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = client.get("/metrics", **extra)
    assert r.status_code == 200 and r["Content-Type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.content.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_healthz_answers_without_a_session(client) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.content == b"ok\n"


def test_readyz_names_what_is_down_when_redis_stops(client, own_redis, celery_worker_factory, settings, roots) -> None:
    celery_worker_factory("ready", {"CELERY_BROKER_URL": own_redis.url})
    use_broker(own_redis.url)
    up = client.get("/readyz")
    assert up.status_code == 200, up.json()
    body = up.json()
    assert body["status"] == "ok" and body["down"] == []
    assert set(body["checks"]) == {"database", "cache", "broker", "workers", "spark", "roots"}
    assert body["checks"]["workers"]["detail"] == "1 answering"
    assert body["checks"]["spark"]["detail"] == f"local, driver heap {driver_memory()}"

    own_redis.stop()
    down = client.get("/readyz")
    assert down.status_code == 503
    assert down.json()["status"] == "unavailable" and {"broker", "workers"} <= set(down.json()["down"])
    assert "127.0.0.1" not in down.content.decode()  # no host in the answer

    settings.DELTAWEB_ALLOWED_ROOTS = ["/no/such/root"]
    assert "roots" in client.get("/readyz").json()["down"]


def test_metrics_only_for_scrapers_and_their_values_move(client, browser, roots, settings, eager_celery) -> None:
    assert client.get("/metrics", REMOTE_ADDR="10.9.8.7").status_code == 403
    settings.DELTAWEB_METRICS_TOKEN = "scrape-token-123"
    assert client.get("/metrics", REMOTE_ADDR="10.9.8.7", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert samples(client, REMOTE_ADDR="10.9.8.7", HTTP_AUTHORIZATION="Bearer scrape-token-123")

    before = samples(client)
    for _ in range(3):
        assert browser.get("/").status_code == 200
    table = register_table("events", str(small_table(roots / "events", 2)))
    start_sync(table)  # eager: runs now
    RestoreRequest.objects.create(table=table, reason="m", status=RestoreStatus.PENDING, resolved_version=0)
    after = samples(client)

    listed = ("deltaweb_http_requests_total", {"method": "GET", "view": "tables:table_list", "status": "200"})
    assert value(after, listed[0], **listed[1]) - value(before, listed[0], **listed[1]) == 3
    assert value(after, "deltaweb_jobs", kind="sync", state="succeeded") == 1
    assert value(after, "deltaweb_sync_seconds_count") == 1
    assert value(after, "deltaweb_restore_requests", state="pending") == 1
    assert value(after, "deltaweb_tables", state="ok") == 1
    # fleet-level by default: no series per table, whatever the fleet's size
    assert 0 <= value(after, "deltaweb_tables_sync_lag_max_seconds") < 600
    assert value(after, "deltaweb_tables_failing") == 0
    assert not [name for name, labels in after if "table" in dict(labels)]
    settings.DELTAWEB_METRICS_PER_TABLE = True
    assert 0 <= value(samples(client), "deltaweb_table_sync_lag_seconds", table="events") < 600
    assert ("deltaweb_catalog_commits_total", ()) in after


def test_readyz_answers_by_its_deadline_whatever_hangs(client, monkeypatch, settings, roots, eager_celery) -> None:
    """A dependency that never answers (a check blocked until the test ends) is reported as not
    answering, and the other checks' answers still come."""
    import threading

    from tables.services.ops import health

    release = threading.Event()

    def hangs() -> str:
        release.wait(30)
        return "late"

    monkeypatch.setitem(health.CHECKS, "spark", hangs)
    try:
        r = client.get("/readyz")
    finally:
        release.set()
    body = r.json()
    assert r.status_code == 503 and body["down"] == ["spark"]
    assert body["checks"]["spark"]["detail"] == f"no answer within {health.DEADLINE:g} s"
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["detail"] == "eager"


def test_job_durations_are_cumulative_and_spark_jobs_carry_their_kind(client, roots, eager_celery) -> None:
    """Histograms counted as jobs end: deleting the finished jobs (as retention does) takes
    nothing back, so rate() and histogram_quantile hold; Spark's by kind; the process's own
    collectors are there."""
    from django.utils import timezone

    from tables.models import Job, JobKind, JobStatus
    from tables.services.jobs import lifecycle as jobs

    table = register_table("events", str(small_table(roots / "events", 2)))
    start_sync(table)  # eager: one real sync ends
    now = timezone.now()
    for kind, seconds in ((JobKind.PREVIEW, 3), (JobKind.PREVIEW, 40), (JobKind.ROWDIFF, 0.5)):
        job = Job.objects.create(
            table=table, kind=kind, status=JobStatus.RUNNING, started_at=now - timezone.timedelta(seconds=seconds)
        )
        jobs.succeed(job, {})
    before = samples(client)
    Job.objects.all().delete()
    after = samples(client)
    assert value(after, "deltaweb_sync_seconds_count") == value(before, "deltaweb_sync_seconds_count") == 1
    assert value(after, "deltaweb_spark_job_seconds_count", kind="preview") == 2
    assert value(after, "deltaweb_spark_job_seconds_bucket", kind="preview", le="5.0") == 1
    assert value(after, "deltaweb_spark_job_seconds_bucket", kind="preview", le="+Inf") == 2
    assert 42.9 < value(after, "deltaweb_spark_job_seconds_sum", kind="preview") < 43.5
    assert value(after, "deltaweb_spark_job_seconds_bucket", kind="rowdiff", le="1.0") == 1
    names = {name for name, _ in after}
    assert "process_resident_memory_bytes" in names and "python_info" in names


def test_the_beat_leaves_a_heartbeat_and_the_queue_depth_is_shown(
    client, redis_url, transactional_db, tmp_path
) -> None:
    """A real beat process: its heartbeat file (a container's liveness check) and its last tick
    in /metrics; tasks waiting in the real broker with no worker show as the queue's depth."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO, database_url, stop_process

    use_broker(redis_url)
    beat_file = tmp_path / "beat-heartbeat"
    env = {
        **os.environ,
        "CELERY_BROKER_URL": redis_url,
        "DATABASE_URL": database_url(),
        "DELTAWEB_BEAT_HEARTBEAT_FILE": str(beat_file),
        "PYTHONUNBUFFERED": "1",
    }
    log = open(tmp_path / "beat.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "deltaweb", "beat", "--loglevel=info",
         "--schedule", str(tmp_path / "schedule")],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not beat_file.exists():
            assert proc.poll() is None, (tmp_path / "beat.log").read_text()[-2000:]
            time.sleep(0.3)
        assert beat_file.exists(), (tmp_path / "beat.log").read_text()[-2000:]
        found = samples(client)
        assert time.time() - value(found, "deltaweb_beat_last_tick_timestamp_seconds") < 120
        # the beat sent its first tasks and nothing serves the queue: they wait there
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not value(
            samples(client), "deltaweb_task_queue_messages", queue="celery"
        ):
            time.sleep(0.5)
        assert value(samples(client), "deltaweb_task_queue_messages", queue="celery") >= 1
    finally:
        stop_process(proc)
        log.close()
