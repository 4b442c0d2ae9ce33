"""Shared fixtures: where the golden tables are, and copies of them to write into."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(os.environ.get("DELTAWEB_GOLDEN_TABLES", REPO.parent / "shared" / "delta-tables" / "golden"))


def golden_names() -> list[str]:
    if not GOLDEN.is_dir():
        return []
    return sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def golden_path(name: str) -> Path:
    path = GOLDEN / name
    if not path.is_dir():
        pytest.skip(f"golden table {name} not found under {GOLDEN} (set DELTAWEB_GOLDEN_TABLES)")
    return path


@pytest.fixture
def golden_copy(tmp_path):
    """Copy a golden table to a temporary directory (never write into the originals)."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(golden_path(name), dst)
        return dst

    return copy


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url():
    """A real redis-server on a free loopback port for the whole test session."""
    import subprocess
    import time

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (make test installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not start")
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def celery_worker_factory(redis_url, transactional_db, settings, tmp_path):
    """Start real Celery worker processes on the real broker, sharing the test database file:
    start(name, env) -> Popen. Each runs in its own process group (its pool children and a
    Spark JVM with it), so a test can SIGKILL a whole worker; all are stopped afterwards."""
    import signal
    import subprocess
    import sys
    import time

    from django.db import connection

    from deltaweb.celery import app

    db_name = connection.settings_dict["NAME"]
    app.conf.broker_url = redis_url
    app.conf.task_always_eager = False
    app._pool = None  # connections made before (to another broker) must not be reused
    app.amqp._producer_pool = None
    started: list[tuple[subprocess.Popen, object]] = []

    def start(name: str = "worker", env: dict[str, str] | None = None, concurrency: int = 2) -> subprocess.Popen:
        full_env = {
            **os.environ,
            "CELERY_BROKER_URL": redis_url,
            "DATABASE_URL": f"sqlite:///{db_name}",
            "DELTAWEB_ALLOWED_ROOTS": ",".join(settings.DELTAWEB_ALLOWED_ROOTS),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        path = tmp_path / f"{name}.log"
        log = open(path, "w")  # closed below, after the worker stops
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "deltaweb", "worker", f"--concurrency={concurrency}",
             "--loglevel=info", "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{name}@%h"],
            cwd=REPO,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        started.append((proc, log))
        deadline = time.time() + 60
        while time.time() < deadline:
            if "ready" in path.read_text():
                return proc
            if proc.poll() is not None:
                pytest.fail(f"celery worker {name} exited:\n" + path.read_text()[-2000:])
            time.sleep(0.2)
        pytest.fail(f"celery worker {name} did not become ready:\n" + path.read_text()[-2000:])

    yield start
    for proc, log in started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the worker left in its group
        except (ProcessLookupError, PermissionError):
            pass
        log.close()


@pytest.fixture
def celery_worker_process(celery_worker_factory):
    """A real Celery worker process on the real broker, sharing the test database file."""
    return celery_worker_factory()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Cached pages and charts are keyed by table and sync; tests reuse ids, so start empty."""
    try:
        from django.core.cache import cache

        cache.clear()
    except Exception:
        pass
    yield


@pytest.fixture(autouse=True)
def _table_root_confinement(request):
    """Core and Spark tests read tables they build under tmp paths: each is confined to its own
    root (as the `delta` command is), not to the web app's allowed roots."""
    from tables.delta import storage

    if not {"core", "spark"} & set(Path(str(request.node.fspath)).parts):
        yield
        return
    saved = storage._roots_provider
    storage.set_roots_provider(None)
    yield
    storage.set_roots_provider(saved)
