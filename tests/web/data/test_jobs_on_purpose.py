"""Jobs start only on purpose: a POST starts a job, a GET or a page poll never does.

Identical jobs already queued or running are joined (one row, also when requests race on the
live server), a failed job stays failed until a user starts it again, and the database's rule
(one active job per kind, table and parameters) holds even for writes that bypass the app.
No Spark here: the jobs are only created (the broker is a real Redis without a worker, or the
transaction's on-commit hooks are not run), which is what these rules are about.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pyarrow as pa
import pytest
import requests
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from tables.models import Job, JobKind, JobStatus, Table
from tables.services.catalog import registration
from tables.services.data import jobs as data_jobs
from tables.services.jobs import lifecycle as jobs
from tables.services.sync import store as sync

from ..pages.test_api import assert_error, make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402


def _write(path) -> None:
    for i in range(3):  # versions 0..2
        write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")


@pytest.fixture
def table(tmp_path, settings) -> Table:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    _write(tmp_path / "t")
    return registration.register_table("t", str(tmp_path / "t"))


@pytest.fixture
def api():
    return token_client(make_user("reader"))


@pytest.mark.django_db
def test_reading_never_starts_a_job(table, api) -> None:
    base = f"/api/tables/{table.pk}"
    assert_error(api.get(f"{base}/versions/1/rows/"), 404, "no_preview")
    assert_error(api.get(f"{base}/versions/9/rows/"), 404, "version_not_found")
    assert api.get(f"{base}/changes/?from=0&to=1").status_code == 405
    assert api.get(f"{base}/diff/rows/?from=0&to=1&keys=id").status_code == 405
    assert Job.objects.count() == 0

    r = api.post(f"{base}/versions/1/rows/")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    job = r.json()["id"]
    # polling the preview answers with the job computing it, and creates nothing
    for _ in range(3):
        r = api.get(f"{base}/versions/1/rows/")
        assert r.status_code == 202 and r.json()["id"] == job
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_identical_active_jobs_are_joined(table, api) -> None:
    base = f"/api/tables/{table.pk}"
    ids = {api.post(f"{base}/changes/?from=0&to=2").json()["id"] for _ in range(5)}
    assert len(ids) == 1
    ids |= {api.post(f"{base}/diff/rows/?from=0&to=2&keys=id").json()["id"] for _ in range(3)}
    ids |= {api.post(f"{base}/diff/rows/?from=0&to=2&keys=%20id,id").json()["id"]}  # the same keys
    assert len(ids) == 2
    other = api.post(f"{base}/changes/?from=1&to=2").json()["id"]
    assert other not in ids and Job.objects.count() == 3
    # a running job is joined too; a finished one is not
    Job.objects.filter(pk=other).update(status=JobStatus.RUNNING, started_at=timezone.now())
    assert api.post(f"{base}/changes/?from=1&to=2").json()["id"] == other
    Job.objects.filter(pk=other).update(status=JobStatus.SUCCEEDED)
    assert api.post(f"{base}/changes/?from=1&to=2").json()["id"] != other
    # a sync requested twice while queued is one job
    assert sync.start_sync(table).pk == sync.start_sync(table).pk


@pytest.mark.django_db
def test_a_failed_preview_is_not_rerun_by_polling_but_by_a_post(table, api) -> None:
    url = f"/api/tables/{table.pk}/versions/2/rows/"
    first = api.post(url).json()["id"]
    jobs.fail(Job.objects.get(pk=first), "the executor went away")
    for _ in range(3):
        msg = assert_error(api.get(url), 409, "job_failed")
        assert "the executor went away" in msg and "POST" in msg
    assert Job.objects.count() == 1
    retry = api.post(url)
    assert retry.status_code == 202 and retry.json()["id"] != first and retry.json()["status"] == "queued"
    assert Job.objects.filter(status=JobStatus.QUEUED).count() == 1


@pytest.mark.django_db
def test_a_job_left_behind_by_a_dead_worker_does_not_block_its_successors(table) -> None:
    stuck = data_jobs.start_changes(table, 0, 1)
    Job.objects.filter(pk=stuck.pk).update(
        status=JobStatus.RUNNING, started_at=timezone.now() - jobs.ABANDONED_AFTER - timedelta(minutes=1)
    )
    fresh = data_jobs.start_changes(table, 0, 1)
    assert fresh.pk != stuck.pk and fresh.status == JobStatus.QUEUED
    stuck.refresh_from_db()
    assert stuck.status == JobStatus.FAILED and "Start it again" in stuck.error


@pytest.mark.django_db
def test_the_database_holds_the_rule(table) -> None:
    Job.objects.create(kind=JobKind.CHANGES, table=table, params={"from": 0, "to": 1})
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(kind=JobKind.CHANGES, table=table, params={"to": 1, "from": 0})
    # finished jobs and other parameters are outside the rule
    Job.objects.create(kind=JobKind.CHANGES, table=table, params={"from": 0, "to": 1}, status=JobStatus.FAILED)
    Job.objects.create(kind=JobKind.CHANGES, table=table, params={"from": 0, "to": 2})
    assert Job.objects.count() == 3


@pytest.mark.django_db
def test_the_change_data_page_reloads_into_its_results_when_the_job_ends(table, client) -> None:
    client.force_login(make_user("viewer"))
    r = client.post(f"/t/{table.slug}/diff/rows/", {"from": 0, "to": 2, "kind": "changes"})
    assert r.status_code == 302 and "rowjob=" in r["Location"]
    again = client.post(f"/t/{table.slug}/diff/rows/", {"from": 0, "to": 2, "kind": "changes"})
    assert again["Location"] == r["Location"] and Job.objects.count() == 1
    html = client.get(r["Location"]).content.decode()
    job = Job.objects.get()
    # the progress box polls the job and, when it succeeds, reloads the page that shows its rows
    assert f'data-url="/jobs/{job.pk}.json"' in html
    assert f"rowjob={job.pk}" in html.split('data-reload="', 1)[1].split('"', 1)[0]
    assert client.get(r["Location"]).status_code == 200 and Job.objects.count() == 1
    assert client.get(f"/t/{table.slug}/diff/rows/").status_code == 405


@pytest.mark.django_db(transaction=True)
def test_racing_identical_requests_make_one_job(live_server, redis_url, table) -> None:
    """12 clients POST the same change-data request at once (real threads, real HTTP, a real
    broker without a worker, so the job stays queued): one job, everyone gets its id."""
    from deltaweb.celery import app

    old = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = redis_url, False
    app._pool = None
    app.amqp._producer_pool = None
    token = Token.objects.create(user=make_user("ana")).key
    clients = 12
    barrier = threading.Barrier(clients)
    answers: list[tuple[int, int | None]] = []

    def post() -> None:
        barrier.wait()
        r = requests.post(
            f"{live_server.url}/api/tables/{table.pk}/changes/?from=0&to=2",
            headers={"Authorization": f"Token {token}"},
            timeout=120,
        )
        answers.append((r.status_code, r.json().get("id") if r.status_code == 202 else None))

    try:
        threads = [threading.Thread(target=post) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        app.conf.broker_url, app.conf.task_always_eager = old
        app._pool = None
        app.amqp._producer_pool = None
    assert [s for s, _ in answers] == [202] * clients, answers
    assert len({i for _, i in answers}) == 1
    assert Job.objects.filter(kind=JobKind.CHANGES).count() == 1
    assert Job.objects.get().status == JobStatus.QUEUED


@pytest.mark.django_db(transaction=True)
def test_the_migration_applies_over_existing_duplicate_active_jobs() -> None:
    """0009 on a database that already holds two identical queued jobs (possible before it):
    it applies, the newest keeps its hash (inside the rule), the older one stays outside it."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("tables", "0008_restore_txn_id_unique")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    table = old.get_model("tables", "Table").objects.create(name="m", slug="m", location="/nowhere/m")
    OldJob = old.get_model("tables", "Job")
    older, newer = (OldJob.objects.create(kind="changes", table_id=table.pk, params={"from": 0, "to": 1}) for _ in "ab")
    done = OldJob.objects.create(kind="changes", table_id=table.pk, params={"to": 1, "from": 0}, status="failed")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    hashes = dict(Job.objects.values_list("pk", "params_hash"))
    assert hashes[newer.pk] == hashes[done.pk] != "" and hashes[older.pk] == ""
    # the rule holds from now on: the identical request joins the newest
    assert jobs.create_or_join("changes", Table.objects.get(pk=table.pk), None, {"from": 0, "to": 1}) == (
        Job.objects.get(pk=newer.pk),
        False,
    )
