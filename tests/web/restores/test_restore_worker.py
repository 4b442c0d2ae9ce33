"""Approved restores through real Celery worker processes on the Spark engine: a real
redis-server, SQLite shared with the workers, a local Spark session in each worker.

Spark starts in about ten seconds per worker process, so this is one test: the worker is
SIGKILLed while the Spark job runs; the run is requeued by requeue_stuck_restores, a second
worker finishes it, exactly one commit lands, and what it leaves is what an undisturbed run
leaves (the history, after the sync the run starts, shows the RESTORE commit). The happy path
alone runs in the browser test (tests/e2e/test_browser.py) and the compose stack's."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tables.models import Commit, Job, RestoreRequest, RestoreStatus, Table
from tables.services.restores import requests as restore_requests
from tables.services.restores import runs as restore_runs
from tests.web.restore_tables import log_versions, people, rs_ids, rs_paths

pytest.importorskip("deltalake")
pytest.importorskip("pyspark")
pytestmark = pytest.mark.slow

S = RestoreStatus
SPARK_WORKER = {
    "DELTAWEB_RESTORE_ENGINE": "spark",
    "SPARK_MASTER": "local[2]",
    "DELTAWEB_RESTORE_HEARTBEAT_SECONDS": "1",
}
SPARK_STAGES = ("Spark job started", "loading snapshots", "comparing file lists", "checking files exist")


def wait_for(req: RestoreRequest, done, what: str, timeout: float = 180) -> RestoreRequest:
    deadline = time.time() + timeout
    while time.time() < deadline:
        req.refresh_from_db()
        if done(req):
            return req
        time.sleep(0.1)
    pytest.fail(f"restore #{req.pk} did not get {what}: {req.status} / {req.stage} / {req.error}")


def finished(req: RestoreRequest) -> RestoreRequest:
    return wait_for(req, lambda r: r.is_terminal or r.status == S.STALE, "to an end")


def approve(table: Table, users: dict) -> RestoreRequest:
    req = restore_requests.request_restore(table, users["analyst"], version=2, reason="undo the overwrite")
    return restore_requests.approve_restore(req, users["approver"], "ok")  # autocommit: enqueued at once


def test_a_worker_killed_during_the_spark_job_is_replaced_and_commits_once(celery_worker_factory, table) -> None:
    path = Path(table.location)
    first = celery_worker_factory("doomed", SPARK_WORKER)
    req = approve(table, people())
    req = wait_for(req, lambda r: r.status == S.RUNNING and r.stage.startswith(SPARK_STAGES), "into the Spark job")
    os.killpg(first.pid, signal.SIGKILL)  # the worker, its pool and its Spark JVM, mid-job
    first.wait(timeout=30)
    time.sleep(1.5)
    req.refresh_from_db()
    assert req.status == S.RUNNING and req.attempts == 1  # nobody is left to say otherwise

    # the heartbeat kept the row fresh while the worker lived: not stuck yet; silent for 3 s: stuck
    assert restore_runs.requeue_stuck_restores(older_than=timedelta(seconds=30)) == []
    time.sleep(3)
    assert restore_runs.requeue_stuck_restores(older_than=timedelta(seconds=3)) == [req.pk]
    req.refresh_from_db()
    assert req.status == S.QUEUED

    celery_worker_factory("replacement", SPARK_WORKER)
    req = finished(req)
    assert req.status == S.SUCCEEDED, req.error
    assert req.attempts == 2 and req.result_version == 6
    assert log_versions(path) == list(range(7))  # exactly one new commit
    assert rs_ids(path) == rs_ids(path, 2)
    steps = list(req.events.values_list("from_status", "to_status"))
    assert steps[-4:] == [(S.QUEUED, S.RUNNING), (S.RUNNING, S.QUEUED), (S.QUEUED, S.RUNNING), (S.RUNNING, S.SUCCEEDED)]

    # what the replacement's run leaves is what an undisturbed run leaves: Spark's plan verified,
    # the table as of version 2, and the history (after the sync the run starts) ending in it
    assert req.result["engine"] == "spark"
    assert req.verification["verified"] and req.verification["target"]["filesEqualTarget"]
    assert rs_paths(path) == rs_paths(path, 2)
    sync = Job.objects.get(pk=req.result["syncJob"])
    deadline = time.time() + 60
    while not sync.is_terminal and time.time() < deadline:
        time.sleep(0.2)
        sync.refresh_from_db()
    assert sync.status == "succeeded", sync.error
    latest = Commit.objects.filter(table=table).order_by("-version").first()
    assert latest.version == 6 and latest.operation == "RESTORE"
    assert latest.operation_metrics == req.plan["metrics"] and latest.commit_info["txnId"] == req.txn
