"""Workers SIGKILLed at named points (tables/services/jobs/faults.py) of a sync and of a restore's commit:
real Celery worker processes on a real redis-server, SQLite shared with them.

The promises checked after every kill: the job is failed with a reason (a sync) or queued
again and finished by another worker (a restore), never left running; the cached history has
no gap and no duplicate version, and a new sync completes it to the log; a restore is
committed exactly once (the log gains one version, whose state is the target's, as delta-rs
reads it).
"""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tables.models import Commit, Job, JobStatus, RestoreRequest, RestoreStatus, SyncState, Table
from tables.services.catalog import registration
from tables.services.jobs import lifecycle as jobs
from tables.services.restores import requests as restore_requests
from tables.services.restores import runs as restore_runs
from tables.services.sync import store as sync
from tests.core.builders import file_table
from tests.faults import RUNS, wait_until
from tests.web.restore_tables import log_versions, people, restore_table, rs_ids

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.slow

COMMITS = 4500  # three batches of the sync's 2,000 rows


def fault_env(tmp_path: Path, point: str) -> dict[str, str]:
    return {
        "DELTAWEB_FAULT_POINTS": point,
        "DELTAWEB_FAULT_DIR": str(tmp_path),
        "DELTAWEB_JOB_HEARTBEAT_SECONDS": "1",
        "DELTAWEB_RESTORE_HEARTBEAT_SECONDS": "1",
        "DELTAWEB_RESTORE_ENGINE": "local",
    }


def kill_at(worker, marker: Path, timeout: float = 180) -> None:
    """SIGKILL the worker's whole process group once it waits at the point `marker` names."""
    deadline = time.time() + timeout
    while not marker.exists():
        if worker.poll() is not None or time.time() > deadline:
            pytest.fail(f"the worker never reached {marker.name}")
        time.sleep(0.05)
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)


def stored_versions(table: Table) -> list[int]:
    return list(Commit.objects.filter(table=table).order_by("version").values_list("version", flat=True))


@pytest.fixture
def long_log(settings, tmp_path) -> Table:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    base = 1_700_000_000_000
    path = file_table(tmp_path / "long", [base + v * 1000 for v in range(COMMITS)])
    return registration.register_table("long", str(path))


@RUNS
@pytest.mark.parametrize("point", ["sync-batch-stored", "sync-stored"])
def test_a_sync_killed_mid_way_is_failed_with_a_reason_and_the_next_one_completes(
    celery_worker_factory, long_log, tmp_path, point, run
) -> None:
    doomed = celery_worker_factory("doomed", fault_env(tmp_path, point))
    job = sync.start_sync(long_log)
    kill_at(doomed, tmp_path / point)

    # the dead worker's job still says running; a heartbeat kept it fresh until the kill
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    assert jobs.sweep_silent_jobs(older_than=timedelta(seconds=60)) == {"failed": [], "resent": []}
    time.sleep(1.5)
    assert jobs.sweep_silent_jobs(older_than=timedelta(seconds=1))["failed"] == [job.pk]
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "stopped" in job.error and "storing history rows" in job.error
    long_log.refresh_from_db()
    assert long_log.sync_state == SyncState.ERROR and long_log.sync_lease_until is None

    # what was stored is a prefix of the log: no gap, no duplicate
    partial = stored_versions(long_log)
    assert partial == list(range(len(partial))) and len(partial) >= 2000

    celery_worker_factory("replacement")
    again = sync.start_sync(long_log)
    again = wait_until(lambda: Job.objects.filter(pk=again.pk, status__in=JobStatus.terminal()).first(), "the sync")
    assert again.status == JobStatus.SUCCEEDED, again.error
    assert stored_versions(long_log) == list(range(COMMITS))
    long_log.refresh_from_db()
    dt = deltalake.DeltaTable(long_log.location)
    assert long_log.last_synced_version == dt.version() == COMMITS - 1
    assert long_log.num_files == len(dt.file_uris()) == COMMITS


@pytest.fixture
def restorable(settings, tmp_path) -> Table:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_RESTORE_ENGINE = "local"
    path = restore_table(tmp_path / "events")
    t = registration.register_table("events", str(path))
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


@RUNS
@pytest.mark.parametrize("point", ["restore-committing", "restore-committed"])
def test_a_restore_killed_at_its_commit_is_committed_exactly_once(
    celery_worker_factory, restorable, tmp_path, point, run
) -> None:
    path = Path(restorable.location)
    before = log_versions(path)
    doomed = celery_worker_factory("doomed", fault_env(tmp_path, point))
    users = people()
    req = restore_requests.request_restore(restorable, users["analyst"], version=2, reason="undo the overwrite")
    req = restore_requests.approve_restore(req, users["approver"], "ok")
    kill_at(doomed, tmp_path / point)
    # killed before its commit the log is unchanged; after it, the commit is there once
    assert log_versions(path) == (before if point == "restore-committing" else [*before, before[-1] + 1])

    time.sleep(1.5)
    assert restore_runs.requeue_stuck_restores(older_than=timedelta(seconds=1)) == [req.pk]
    celery_worker_factory("replacement", {"DELTAWEB_RESTORE_ENGINE": "local"})
    req = wait_until(
        lambda: RestoreRequest.objects.filter(pk=req.pk, status__in=RestoreStatus.terminal()).first(), "the restore"
    )
    assert req.status == RestoreStatus.SUCCEEDED, req.error
    assert log_versions(path) == [*before, before[-1] + 1]  # exactly one new commit
    assert req.result_version == before[-1] + 1
    assert rs_ids(path) == rs_ids(path, 2)


# --- alert delivery ---------------------------------------------------------------------------


@RUNS
def test_a_delivery_killed_after_sending_is_sent_again_with_the_same_id(
    settings, tmp_path, receiver, django_user_model, celery_worker_factory, run
) -> None:
    import pyarrow as pa
    from django.contrib.auth.models import Group

    from alerts import services
    from alerts.models import Delivery, DeliveryStatus, Severity
    from alerts.notify import delivery
    from tables.services.access import roles
    from tests.alerts.conftest import register_and_sync

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    env = {"DELTAWEB_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1", "DELTAWEB_DELIVERY_LEASE_SECONDS": "1"}
    path = tmp_path / "orders"
    deltalake.write_deltalake(str(path), pa.table({"id": list(range(10))}))
    table = register_and_sync("orders", path)
    user = django_user_model.objects.create_user("ops", password="secret-pass-1")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    endpoint, _secret = services.create_endpoint(user, "ops hook", receiver.url)
    services.subscribe(user, table, "webhook", Severity.CRITICAL, endpoint.pk)

    # one thread: the kill finds exactly one delivery sent and not yet recorded
    doomed = celery_worker_factory("doomed", {**env, **fault_env(tmp_path, "delivery-sent")}, concurrency=1)
    deltalake.DeltaTable(str(path)).delete()  # every row: a critical alert
    sync.start_sync(table)
    kill_at(doomed, tmp_path / "delivery-sent")
    # the receiver has it, the database does not know yet
    sent = [str(d.key) for d in Delivery.objects.filter(status=DeliveryStatus.SENDING)]
    assert len(sent) == 1 and [r.headers["idempotency-key"] for r in receiver.accepted()] == sent

    time.sleep(1.5)  # the dead worker's lease runs out
    celery_worker_factory("replacement", env)
    assert delivery.sweep()["deliveries"] == Delivery.objects.count()
    wait_until(lambda: not Delivery.objects.exclude(status=DeliveryStatus.DELIVERED).exists(), "every delivery")
    keys = [r.headers["idempotency-key"] for r in receiver.accepted()]
    # none lost; the one whose worker died was sent twice, with the same id
    assert sorted(keys) == sorted([str(d.key) for d in Delivery.objects.all()] + sent)


@RUNS
def test_an_alert_scan_killed_mid_way_is_evaluated_again_and_alerts_stored_once(
    settings, tmp_path, celery_worker_factory, run
) -> None:
    import pyarrow as pa

    from alerts.models import Alert, Scan, ScanStatus
    from alerts.notify import delivery
    from tests.alerts.conftest import register_and_sync

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "orders"
    deltalake.write_deltalake(str(path), pa.table({"id": list(range(10))}))
    table = register_and_sync("orders", path)
    doomed = celery_worker_factory("doomed", fault_env(tmp_path, "scan-claimed"), concurrency=1)
    deltalake.DeltaTable(str(path)).delete()  # every row: alerts to raise
    sync.start_sync(table)
    kill_at(doomed, tmp_path / "scan-claimed")
    scan = Scan.objects.get(table=table)
    assert scan.status == ScanStatus.RUNNING and not Alert.objects.exists()

    settings.DELTAWEB_JOB_SILENT_MINUTES = 0.01  # the lease of a running scan, here 0.6 s
    time.sleep(1)
    celery_worker_factory("replacement")
    assert delivery.sweep()["scans"] == 1
    done = wait_until(lambda: Scan.objects.filter(pk=scan.pk, status=ScanStatus.DONE).first(), "the scan")
    rules = list(Alert.objects.filter(table=table).values_list("rule", flat=True))
    assert done.alerts == len(rules) > 0 and len(set(rules)) == len(rules)  # each alert once
