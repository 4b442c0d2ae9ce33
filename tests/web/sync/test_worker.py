"""The sync pipeline end to end: a real redis-server, a real Celery worker process, SQLite."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from tables.models import Anomaly, Commit, Job, JobStatus, SyncState, Table
from tables.services.catalog import registration
from tables.services.sync import store as sync

deltalake = pytest.importorskip("deltalake")


def wait_for(job: Job, timeout: float = 90) -> Job:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job.refresh_from_db()
        if job.is_terminal:
            return job
        time.sleep(0.2)
    pytest.fail(f"job {job.pk} did not finish: {job.status} {job.stage}")


@pytest.fixture
def table_dir(tmp_path: Path, settings) -> Path:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "events"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2], "kind": ["a", "b"]}), partition_by=["kind"])
    deltalake.write_deltalake(str(path), pa.table({"id": [3], "kind": ["a"]}), mode="append")
    deltalake.DeltaTable(str(path)).delete("id = 1")
    return path


def test_sync_through_a_real_worker(table_dir: Path, celery_worker_process) -> None:
    """table_dir first: it sets the allowed roots the worker process is started with."""
    table = registration.register_table("events", str(table_dir))
    job = sync.start_sync(table)  # enqueued on commit: autocommit here, so at once
    job = wait_for(job)
    assert job.status == JobStatus.SUCCEEDED, job.error
    table.refresh_from_db()
    assert table.sync_state == SyncState.OK and table.last_synced_version == 2
    history = deltalake.DeltaTable(str(table_dir)).history()
    rows = list(Commit.objects.filter(table=table).order_by("-version"))
    assert [r.version for r in rows] == [h["version"] for h in history]
    assert [r.operation for r in rows] == [h["operation"] for h in history]
    dt = deltalake.DeltaTable(str(table_dir))
    assert rows[0].num_files == len(dt.file_uris())

    # two more commits: the next sync reads only those
    deltalake.write_deltalake(str(table_dir), pa.table({"id": [4], "kind": ["c"]}), mode="append")
    deltalake.write_deltalake(str(table_dir), pa.table({"id": [5], "kind": ["c"]}), mode="append")
    job = wait_for(sync.start_sync(table))
    assert job.status == JobStatus.SUCCEEDED and job.result["newCommits"] == 2
    assert job.result["commitReads"] == 2
    assert Commit.objects.filter(table=table).count() == 5

    # two syncs at once: one wins or both run in turn; never a duplicated row
    deltalake.write_deltalake(str(table_dir), pa.table({"id": [6], "kind": ["d"]}), mode="append")
    jobs = [sync.start_sync(table), sync.start_sync(table)]
    jobs = [wait_for(j) for j in jobs]
    assert {j.status for j in jobs} <= {JobStatus.SUCCEEDED, JobStatus.SKIPPED}
    assert any(j.status == JobStatus.SUCCEEDED for j in jobs)
    assert list(Commit.objects.filter(table=table).values_list("version", flat=True).order_by("version")) == list(
        range(6)
    )

    # the log becomes unreadable: the cached history stays and the error shows
    (table_dir / "_delta_log" / f"{6:020d}.json").write_text('{"commitInfo": {"operation": "WRITE"}}\n{not json\n')
    job = wait_for(sync.start_sync(table))
    assert job.status == JobStatus.FAILED
    assert "00000000000000000006.json" in job.error and "line 2" in job.error
    table.refresh_from_db()
    assert table.sync_state == SyncState.ERROR and "line 2" in table.last_error
    assert Commit.objects.filter(table=table).count() == 6
    assert not Anomaly.objects.filter(table=table, kind="ict_missing").exists()


def test_sync_claim_lets_one_run(transactional_db, table_dir: Path) -> None:
    table = registration.register_table("claimed", str(table_dir))
    Table.objects.filter(pk=table.pk).update(sync_state=SyncState.SYNCING, sync_lease_until=None)
    assert sync.claim_lease(table.pk) is True  # a lease that never expires is not held
    assert sync.claim_lease(table.pk) is False  # now it is
    out = sync.sync_table(table.pk)
    assert out["skipped"] is True
    assert Commit.objects.filter(table=table).count() == 0
