"""Silence without a new commit: tables written by delta-rs whose commit files carry
modification times in the past (hourly), synced, then checked by the periodic silence check
with an injected clock. One alert per silence, none for a table on its usual rate, the
per-table switch and factor obeyed, delivered like any other alert."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from django.conf import settings
from django.core import mail

from alerts import services
from alerts.detect import silence
from alerts.models import Alert, Delivery, Notification, RuleSetting, Severity
from alerts.notify import delivery
from tables.models import Table
from tables.services.sync import store as sync
from tests.alerts.conftest import register_and_sync
from tests.alerts.receivers import verify, wait_until

deltalake = pytest.importorskip("deltalake")

HOUR = 3_600_000
COMMITS = 8  # versions 0..7: seven hourly intervals, enough to tell what is usual


def hourly_table(roots, name: str, start_ms: int, commits: int = COMMITS):
    """A delta-rs table of `commits` appends whose commit files were written one hour apart
    from `start_ms` (their modification times: the tables have no In-Commit Timestamps)."""
    path = roots / name
    for i in range(commits):
        deltalake.write_deltalake(str(path), pa.table({"id": [i]}), mode="append")
    set_times(path, start_ms, range(commits))
    return path


def set_times(path, start_ms: int, versions) -> None:
    for v in versions:
        t = (start_ms + v * HOUR) / 1000
        os.utime(path / "_delta_log" / f"{v:020d}.json", (t, t))


@pytest.fixture
def ops(django_user_model):
    return django_user_model.objects.create_user("ops", email="ops@example.com", password="secret-pass-1")


def silences(table) -> list[Alert]:
    return list(Alert.objects.filter(table=table, rule=silence.SILENCE_RULE))


@pytest.mark.django_db
def test_one_alert_per_silence_none_on_the_usual_rate(roots, ops) -> None:
    start = int(time.time()) * 1000 - 30 * 24 * HOUR  # a month ago
    # checked 11 hours after quiet's last commit (10x its hourly median is 10 hours) ...
    now = start + (COMMITS - 1) * HOUR + 11 * HOUR
    quiet = register_and_sync("quiet", hourly_table(roots, "quiet", start))
    # ... when busy committed half an hour before: on its usual rate
    busy = register_and_sync("busy", hourly_table(roots, "busy", now - (COMMITS - 1) * HOUR - HOUR // 2))
    latest = dict(quiet.commits.values_list("version", "timestamp"))
    assert latest[COMMITS - 1] == start + (COMMITS - 1) * HOUR  # the file times the sync read
    assert deltalake.DeltaTable(str(roots / "quiet")).version() == COMMITS - 1  # the peer sees the same log
    services.subscribe(ops, quiet, "in_app", Severity.INFO)
    services.subscribe(ops, quiet, "email", Severity.INFO)

    assert silence.check_tables(now_ms=now)["alerts"] == 1
    assert silence.check_tables(now_ms=now + HOUR)["alerts"] == 0  # the same silence, checked again

    [alert] = silences(quiet)
    assert alert.version == COMMITS - 1 and alert.severity == Severity.INFO
    assert alert.explanation == "after version 7: no commit for 39600 s (usually one every 3600 s; 10x)"
    assert silences(busy) == []
    # delivered like any other alert: an in-app notification and a mail
    assert Notification.objects.filter(user=ops, alert=alert).count() == 1
    d = Delivery.objects.get(alert=alert, channel="email")
    delivery.deliver(d.pk)
    assert len(mail.outbox) == 1 and "no commit for 39600 s" in mail.outbox[0].body

    # a new commit ends the silence; the next one beyond 10x is a new alert, once
    deltalake.write_deltalake(str(roots / "quiet"), pa.table({"id": [99]}), mode="append")
    set_times(roots / "quiet", now - COMMITS * HOUR, [COMMITS])  # version 8, at `now`
    sync.sync_table(quiet.pk)
    assert silence.check_tables(now_ms=now + 2 * HOUR)["alerts"] == 0  # two hours: usual enough
    later = now + 12 * HOUR
    assert silence.check_tables(now_ms=later)["alerts"] == 2  # busy has been silent 12.5 hours too
    assert silence.check_tables(now_ms=later + HOUR)["alerts"] == 0
    assert [a.version for a in silences(busy)] == [COMMITS - 1]
    assert [a.version for a in silences(quiet)] == [COMMITS, COMMITS - 1]


@pytest.mark.django_db
def test_switch_factor_and_severity_of_the_commit_rate_rule(roots) -> None:
    start = int(time.time()) * 1000 - 30 * 24 * HOUR
    table = register_and_sync("tuned", hourly_table(roots, "tuned", start))
    now = start + (COMMITS - 1) * HOUR + 11 * HOUR

    setting = RuleSetting.objects.create(table=table, rule="commit_rate", enabled=False)
    assert silence.check_tables(now_ms=now) == {"checked": 0, "alerts": 0}
    setting.enabled, setting.threshold = True, 20.0  # 20x: 11 hours is not silence yet
    setting.save()
    assert silence.check_tables(now_ms=now)["alerts"] == 0
    setting.severity = Severity.WARNING
    setting.save()
    assert silence.check_tables(now_ms=now + 10 * HOUR)["alerts"] == 1  # 21 hours
    assert silences(table)[0].severity == Severity.WARNING
    assert "20x" in silences(table)[0].explanation


@pytest.mark.django_db
def test_too_few_commits_or_a_stalled_sync_tell_nothing_and_the_beat_runs_the_check(roots) -> None:
    start = int(time.time()) * 1000 - 30 * 24 * HOUR
    table = register_and_sync("young", hourly_table(roots, "young", start, commits=4))
    assert silence.check_tables(now_ms=start + 1000 * HOUR)["alerts"] == 0  # 3 intervals: no usual yet
    assert silences(table) == []

    # a table whose sync stopped right after its last commit: silent only as far as we know
    stalled = register_and_sync("stalled", hourly_table(roots, "stalled", start))
    last_commit = start + (COMMITS - 1) * HOUR
    Table.objects.filter(pk=stalled.pk).update(last_synced_at=datetime.fromtimestamp(last_commit / 1000 + 60, UTC))
    assert silence.check_tables(now_ms=last_commit + 100 * HOUR)["alerts"] == 0
    assert silences(stalled) == []
    entry = settings.CELERY_BEAT_SCHEDULE["alerts-silence"]
    assert entry["task"] == "alerts.check_silence"
    from alerts import tasks

    assert tasks.check_silence.name == entry["task"]


def test_the_beat_task_on_a_real_worker_delivers_one_signed_webhook(
    roots, receiver, settings, celery_worker_factory, django_user_model
) -> None:
    """The beat's entry sent twice to a real Celery worker (two processes, so the checks may
    overlap): one alert, one signed delivery to a loopback receiver."""
    from deltaweb.celery import app

    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    start = int(time.time()) * 1000 - 30 * 24 * HOUR
    table = register_and_sync("stale", hourly_table(roots, "stale", start))
    user = django_user_model.objects.create_user("ops", password="secret-pass-1")
    endpoint, secret = services.create_endpoint(user, "ops hook", receiver.url)
    services.subscribe(user, table, "webhook", Severity.INFO, endpoint.pk)
    celery_worker_factory(env={"DELTAWEB_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"})

    task = settings.CELERY_BEAT_SCHEDULE["alerts-silence"]["task"]
    app.send_task(task)
    app.send_task(task)
    log = roots / "worker.log"

    def done(name: str) -> int:
        return len(re.findall(rf"Task {re.escape(name)}\[[^]]+\] succeeded", log.read_text()))

    # both checks ran, and the one delivery they made was sent
    assert wait_until(lambda: done(task) == 2 and done("alerts.deliver") >= 1, timeout=60), log.read_text()[-2000:]
    assert done("alerts.deliver") == 1 and len(receiver.accepted()) == 1
    [alert] = silences(table)
    assert alert.version == COMMITS - 1
    [received] = receiver.requests
    assert verify(secret, received)
    body = json.loads(received.body)
    assert body["alert"]["rule"] == "silence" and body["table"]["slug"] == "stale" and body["version"] == COMMITS - 1
