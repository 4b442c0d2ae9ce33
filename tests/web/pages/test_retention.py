"""Retention: finished jobs (with their result files) and alerts' finished scans older than
DELTAWEB_RETENTION_DAYS are pruned by the daily task; active jobs, recent ones, restore
requests and the history are kept."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tables.models import Commit, Job, JobKind, JobStatus, RestoreRequest, RestoreStatus, Table
from tables.services.catalog.registration import register_table
from tables.services.data.jobs import results_dir
from tables.services.sync.store import sync_table
from tests.web.ui_tables import history_table

pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db


def job(table: Table, status: str, days_ago: float, kind: str = JobKind.PREVIEW) -> Job:
    at = timezone.now() - timedelta(days=days_ago)
    j = Job.objects.create(kind=kind, table=table, status=status, params={"version": int(days_ago * 10)})
    finished = at if status in JobStatus.terminal() else None
    Job.objects.filter(pk=j.pk).update(created_at=at, finished_at=finished)
    return j


def test_old_finished_jobs_and_scans_go_the_record_stays(roots, settings, tmp_path) -> None:
    settings.DELTAWEB_RETENTION_DAYS = 30
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    table = register_table("events", str(history_table(roots / "events")))
    sync_table(table.pk)
    old_ok, _old_failed = job(table, JobStatus.SUCCEEDED, 40), job(table, JobStatus.FAILED, 31, JobKind.SYNC)
    recent, old_running = job(table, JobStatus.SUCCEEDED, 5), job(table, JobStatus.RUNNING, 40, JobKind.CHANGES)
    Path(results_dir(old_ok)).mkdir(parents=True)
    (Path(results_dir(old_ok)) / "part-0.parquet").write_bytes(b"x")
    Path(results_dir(recent)).mkdir(parents=True)
    request = RestoreRequest.objects.create(
        table=table, reason="old", status=RestoreStatus.SUCCEEDED, resolved_version=1
    )
    RestoreRequest.objects.filter(pk=request.pk).update(created_at=timezone.now() - timedelta(days=400))
    commits = Commit.objects.filter(table=table).count()

    from alerts.models import Scan, ScanStatus

    old_scan = Scan.objects.create(table=table, first_version=1, last_version=2, status=ScanStatus.DONE)
    Scan.objects.filter(pk=old_scan.pk).update(finished_at=timezone.now() - timedelta(days=45))
    new_scan = Scan.objects.create(table=table, first_version=3, last_version=3, status=ScanStatus.DONE)
    Scan.objects.filter(pk=new_scan.pk).update(finished_at=timezone.now())

    from tables.tasks import prune_operational

    counts = prune_operational.apply().get()
    assert counts == {"jobs": 2, "alert_scans": 1, "alert_deliveries": 0}
    assert set(Job.objects.values_list("pk", flat=True)) == {recent.pk, old_running.pk}
    assert not Path(results_dir(old_ok)).exists() and Path(results_dir(recent)).exists()
    assert set(Scan.objects.values_list("pk", flat=True)) == {new_scan.pk}
    assert RestoreRequest.objects.filter(pk=request.pk).exists()
    assert Commit.objects.filter(table=table).count() == commits
    assert prune_operational.apply().get()["jobs"] == 0  # nothing left to prune
