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
from tables.services import broker, jobs, registration
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
