"""The task queue's Redis stopped and restarted (without persistence, as `make run` starts it)
while jobs are queued: nothing is lost (the sweep sends again what the restart forgot, and the
claim runs each job once), and meanwhile the pages answer and say that background work is
paused. A real redis-server of the test's own, real Celery workers."""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tables.models import Commit, Job, JobStatus, Table
from tables.services.catalog import registration
from tables.services.jobs import broker
from tables.services.jobs import lifecycle as jobs
from tables.services.sync import store as sync
from tests.conftest import free_port, stop_process, use_broker
from tests.core.builders import file_table
from tests.faults import RUNS, wait_until

pytestmark = pytest.mark.slow


class Redis:
    """A redis-server on a fixed port that the test stops and starts again."""

    def __init__(self) -> None:
        self.exe = shutil.which("redis-server")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                client.ping()
                return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        pytest.fail("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


@pytest.fixture
def own_redis(redis_url, settings):
    """redis_url first: the session's server is not this one, but the fixture skips without it."""
    r = Redis()
    r.start()

    settings.CELERY_BROKER_URL = r.url
    yield r
    r.stop()
    broker.forget()


def terminal(job: Job) -> Job | None:
    return Job.objects.filter(pk=job.pk, status__in=JobStatus.terminal()).first()


def three_tables(root: Path) -> list[Table]:
    base = 1_700_000_000_000
    out = []
    for name in ("a", "b", "c"):
        path = file_table(root / name, [base + v * 1000 for v in range(20)])
        out.append(registration.register_table(name, str(path)))
    return out


@RUNS
def test_queued_jobs_survive_a_broker_restart_and_pages_say_work_is_paused(
    own_redis, celery_worker_factory, settings, tmp_path, client, django_user_model, run
) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    tables = three_tables(tmp_path)
    late = registration.register_table("late", str(file_table(tmp_path / "late", [1_700_000_000_000])))
    use_broker(own_redis.url)  # after the factory's set-up, which names the session's broker
    queued = [sync.start_sync(t) for t in tables]  # no worker yet: they wait in Redis
    assert all(Job.objects.get(pk=j.pk).status == JobStatus.QUEUED for j in queued)

    own_redis.stop()
    user = django_user_model.objects.create_user("ana", password="secret-pass-1")
    client.force_login(user)
    broker.forget()
    page = client.get("/")
    assert page.status_code == 200 and "Background work is paused" in page.content.decode()
    # a sync asked for again joins its queued job; a new one fails at once, saying why
    assert sync.start_sync(tables[0]).pk == queued[0].pk
    refused = Job.objects.get(pk=sync.start_sync(late).pk)
    assert refused.status == JobStatus.FAILED and "task queue is unreachable" in refused.error

    own_redis.start()  # empty: the queued messages are gone with the old process
    broker.forget()
    assert "Background work is paused" not in client.get("/").content.decode()
    celery_worker_factory("after-restart", {"CELERY_BROKER_URL": own_redis.url})
    time.sleep(1.0)
    assert all(Job.objects.get(pk=j.pk).status == JobStatus.QUEUED for j in queued)  # lost messages
    resent = jobs.sweep_silent_jobs(older_than=timedelta(seconds=0))["resent"]
    assert sorted(resent) == sorted(j.pk for j in queued)
    for job in queued:
        done = wait_until(lambda job=job: terminal(job), f"job {job.pk}")
        assert done.status == JobStatus.SUCCEEDED, done.error
    for t in tables:
        assert list(Commit.objects.filter(table=t).order_by("version").values_list("version", flat=True)) == list(
            range(20)
        )


def test_a_sync_asked_for_while_the_broker_is_down_is_a_503_and_leaves_no_queued_job(
    own_redis, transactional_db, settings, tmp_path, client
) -> None:
    """The API answers 503 with Retry-After at once (not 202 for a job that fails a moment
    later); the job is ended with the reason, the table's state is as before, and the page's
    sync button says why instead of an error page. Once the broker is back, a sync is queued."""
    from tables.models import JobKind, SyncState
    from tests.web.pages.test_api import make_user, token_client

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("t", str(file_table(tmp_path / "t", [1_700_000_000_000])))
    Table.objects.filter(pk=table.pk).update(sync_state=SyncState.OK)
    use_broker(own_redis.url)
    own_redis.stop()
    user = make_user("ana", group="analyst")
    api = token_client(user)
    r = api.post(f"/api/tables/{table.pk}/sync/")
    assert r.status_code == 503, r.content[:300]
    assert int(r["Retry-After"]) > 0
    error = r.json()["error"]
    assert error["code"] == "broker_unavailable" and "not started" in error["message"]
    assert "Traceback" not in r.content.decode() and "\n" not in error["message"]
    assert not Job.objects.filter(kind=JobKind.SYNC, status__in=JobStatus.active()).exists()
    ended = Job.objects.get(kind=JobKind.SYNC)
    assert ended.status == JobStatus.FAILED and "task queue" in ended.error
    assert Table.objects.get(pk=table.pk).sync_state == SyncState.OK

    client.force_login(user)
    page = client.post(f"/t/{table.slug}/sync/", follow=True)
    assert page.status_code == 200 and "could not start" in page.content.decode()

    # registering is done (201) whatever the broker; its first sync is shown as it ended
    location = str(file_table(tmp_path / "u", [1_700_000_000_000]))
    r = api.post("/api/tables/", {"name": "u", "location": location}, format="json")
    assert r.status_code == 201 and r.json()["syncJob"]["status"] == "failed", r.content[:300]
    assert "task queue" in r.json()["syncJob"]["error"]

    own_redis.start()
    broker.forget()
    r = api.post(f"/api/tables/{table.pk}/sync/")
    assert r.status_code == 202 and r.json()["status"] == "queued", r.content[:300]
