"""Data jobs through the API: cancelling one (POST /api/jobs/{id}/cancel/), and an identical
change-data or row-diff request reusing a finished result while the table has not changed.

No Spark here: the jobs are rows (queued, running, succeeded) as the worker leaves them; the
worker's side of a cancel (its Spark work interrupted) is tests/spark/test_cancel.py's.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from tables.models import Job, JobStatus, Table
from tables.services.access import roles
from tables.services.data import jobs as data_jobs
from tables.services.jobs import lifecycle as jobs

from ..pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


@pytest.fixture
def table(tmp_path, settings) -> Table:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    root = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(root), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    return Table.objects.create(name="t", slug="t", location=str(root), last_synced_version=2, last_commit_ms=1000)


@pytest.fixture
def client_of():
    """One token client per user in a test (a user has one API token)."""
    made: dict[int, APIClient] = {}

    def get(user) -> APIClient:
        if user.pk not in made:
            made[user.pk] = token_client(user)
        return made[user.pk]

    return get


def test_a_queued_job_is_cancelled_at_once_by_its_user(table, client_of) -> None:
    ana = make_user("ana")
    job = Job.objects.create(kind="rowdiff", table=table, params={"keys": ["id"]}, created_by=ana)
    r = client_of(ana).post(f"/api/jobs/{job.pk}/cancel/")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["status"] == "failed" and body["stage"] == "cancelled" and body["isTerminal"]
    assert body["result"]["cancelledBy"] == "ana" and "Cancelled by ana" in body["error"]
    assert jobs.claim(job.pk, data_jobs.DATA_KINDS) is False  # the worker's claim finds nothing to run
    again = client_of(ana).post(f"/api/jobs/{job.pk}/cancel/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"


def test_a_running_job_is_marked_and_only_its_user_an_approver_or_staff_may_cancel(table, client_of) -> None:
    ana, bob = make_user("ana"), make_user("bob")
    approver = make_user("ida")
    approver.groups.add(Group.objects.get_or_create(name=roles.APPROVER)[0])
    job = Job.objects.create(kind="changes", table=table, params={"from": 0, "to": 1}, created_by=ana)
    assert jobs.claim(job.pk)
    r = client_of(bob).post(f"/api/jobs/{job.pk}/cancel/")
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = client_of(approver).post(f"/api/jobs/{job.pk}/cancel/")
    assert r.status_code == 202, r.content
    assert r.json()["status"] == "running" and r.json()["stage"].startswith("cancelling")
    assert jobs.cancel_request(job.pk)["by"] == "ida"  # what the worker's watcher looks for
    sync = Job.objects.create(kind="sync", table=table)
    r = client_of(approver).post(f"/api/jobs/{sync.pk}/cancel/")
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_cancellable"
    assert client_of(ana).post("/api/jobs/999999/cancel/").status_code == 404


def _finished(table: Table, kind: str, params: dict, tmp_path) -> Job:
    out = tmp_path / f"result-{kind}"
    out.mkdir()
    result = {"path": str(out), "params": params, "tableState": data_jobs.table_state(table)}
    return Job.objects.create(kind=kind, table=table, params=params, status=JobStatus.SUCCEEDED, result=result)


@pytest.mark.parametrize(
    ("kind", "url", "params"),
    [
        ("changes", "changes/?from=0&to=2", {"from": 0, "to": 2}),
        ("rowdiff", "diff/rows/?from=0&to=2&keys=id", {"from": 0, "to": 2, "keys": ["id"]}),
    ],
)
def test_an_identical_request_reuses_the_result_while_the_table_has_not_changed(
    table, tmp_path, client_of, kind, url, params
) -> None:
    done = _finished(table, kind, params, tmp_path)
    api = client_of(make_user("reader"))
    r = api.post(f"/api/tables/{table.pk}/{url}")
    assert r.status_code == 200, r.content
    assert r.json()["id"] == done.pk and r.json()["reused"] is True and r.json()["status"] == "succeeded"
    assert Job.objects.filter(kind=kind).count() == 1  # nothing started

    # a new commit synced: the table changed since, so the request starts a job
    Table.objects.filter(pk=table.pk).update(last_synced_version=3, last_commit_ms=2000)
    r = api.post(f"/api/tables/{table.pk}/{url}")
    assert r.status_code == 202 and r.json()["reused"] is False and r.json()["id"] != done.pk


def test_a_result_whose_files_are_gone_is_not_reused(table, tmp_path, client_of) -> None:
    import shutil

    done = _finished(table, "changes", {"from": 0, "to": 1}, tmp_path)
    shutil.rmtree(done.result["path"])
    r = client_of(make_user("reader")).post(f"/api/tables/{table.pk}/changes/?from=0&to=1")
    assert r.status_code == 202 and r.json()["id"] != done.pk


def test_a_finished_job_shows_where_to_page_its_rows_not_a_server_path(table, tmp_path, client_of, settings) -> None:
    """A job run as the worker runs it (its result written under the results directory): the
    job's answer names no directory of the server, only the API address that pages its rows."""
    import pyarrow.parquet as pq

    def compute(location, params, out_dir, progress) -> dict:
        path = out_dir / "changes"
        path.mkdir()
        pq.write_table(pa.table({"id": [1, 2, 3]}), path / "part-00000.parquet")
        return {"path": str(path), "total": 3, "counts": [{"version": 1, "changeType": "insert", "rows": 3}]}

    ana = make_user("ana")
    job = Job.objects.create(kind="changes", table=table, params={"from": 0, "to": 2}, created_by=ana)
    data_jobs.run_job(job.pk, compute)
    api = client_of(ana)
    r = api.get(f"/api/jobs/{job.pk}/")
    assert r.status_code == 200 and r.json()["status"] == "succeeded", r.content
    body = r.content.decode()
    assert settings.DELTAWEB_RESULTS_DIR not in body and str(tmp_path) not in body
    result = r.json()["result"]
    assert "path" not in result and result["total"] == 3
    assert result["resultsUrl"] == f"/api/jobs/{job.pk}/results/"
    page = api.get(result["resultsUrl"], {"limit": 2})
    assert page.status_code == 200 and [row["id"] for row in page.json()["rows"]] == [1, 2]
    assert page.json()["total"] == 3


@pytest.mark.django_db(transaction=True)
def test_a_cancel_asked_before_the_spark_work_starts_stops_the_work_that_starts_after(table, monkeypatch) -> None:
    """The worker may still be starting Spark when the cancel comes: nothing runs to interrupt
    then. The watcher keeps interrupting until the job's body ends, so the Spark work that
    starts after the ask is stopped too (here: a body that "starts" its work 2.5 s in and
    counts the interrupts it sees after that)."""
    import threading
    import time

    monkeypatch.setattr(jobs, "CANCEL_POLL_SECONDS", 0.2)
    ana = make_user("ana")
    job = Job.objects.create(kind="changes", table=table, params={"from": 0, "to": 1}, created_by=ana)
    assert jobs.claim(job.pk)
    jobs.request_cancel(job, ana)  # asked while nothing runs yet
    started, stopped = threading.Event(), threading.Event()

    def interrupt() -> None:
        if started.is_set():
            stopped.set()

    with jobs.cancellable(job.pk, interrupt):
        time.sleep(1.0)  # starting the session: the first interrupts find nothing
        started.set()  # the Spark work starts
        assert stopped.wait(5), "the work that started after the ask was never interrupted"


def test_a_cancel_asked_while_uninterruptible_work_runs_ends_the_job_cancelled(table, client_of, settings) -> None:
    """Work with nothing to interrupt (a keyed diff read by pyarrow in the worker) runs to its
    end; a cancel its user asked meanwhile still ends the job cancelled, with no result kept."""
    ana = make_user("ana")
    job = Job.objects.create(kind="rowdiff", table=table, params={"from": 0, "to": 1, "key": ["id"]}, created_by=ana)
    written = []

    def compute(location, params, out_dir, progress) -> dict:
        jobs.request_cancel(Job.objects.get(pk=job.pk), ana)  # the user's click, mid-run
        (out_dir / "part-00000.parquet").write_bytes(b"x")
        written.append(out_dir)
        return {"path": str(out_dir), "total": 1}

    data_jobs.run_job(job.pk, compute)
    body = client_of(ana).get(f"/api/jobs/{job.pk}/").json()
    assert body["status"] == "failed" and body["stage"] == "cancelled", body
    assert "Cancelled by ana" in body["error"]
    assert written and not written[0].exists()  # the result files are gone
