"""PostgreSQL restarted while syncs run and restores are approved, against the whole
deployment: a private PostgreSQL cluster of the test's own (scripts/postgres.sh with PG_ROOT
and PG_PORT), gunicorn serving the app, a real Celery worker, the session's redis-server.

While the database is down, requests fail cleanly: 503 `database_unavailable` with
Retry-After, in the API's shape, never a traceback. Once it is back, the same requests
succeed on retry; a sync the restart interrupted is failed with a reason (or finishes), the
next one completes the history; the approved restore commits exactly once; nothing is left
half-written (every job and request ends terminal, the history equals the log)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port, stop_process
from tests.core.builders import file_table
from tests.faults import RUNS, wait_until
from tests.web.restore_tables import log_versions, restore_table

deltalake = pytest.importorskip("deltalake")
requests = pytest.importorskip("requests")
pytestmark = pytest.mark.slow

COMMITS = 20_000  # a sync of a few seconds: the restart lands inside it


class PrivatePostgres:
    def __init__(self, root: Path) -> None:
        self.root, self.port = root, free_port()
        self.env = {**os.environ, "PG_ROOT": str(root), "PG_PORT": str(self.port)}

    def start(self) -> str:
        out = subprocess.run(
            [str(REPO / "scripts" / "postgres.sh"), "start"], env=self.env, capture_output=True, text=True, timeout=180
        )
        if out.returncode != 0:
            pytest.skip(f"cannot start a private PostgreSQL: {out.stderr.strip()[-300:]}")
        return out.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        subprocess.run([str(REPO / "scripts" / "postgres.sh"), "stop"], env=self.env, capture_output=True, timeout=120)


@pytest.fixture
def deployment(redis_url):
    if not shutil.which("pg_ctl") and not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        pytest.skip("PostgreSQL is not installed (make test installs it)")
    work = Path(tempfile.mkdtemp(prefix="deltaweb-pg-fault-"))
    os.chmod(work, 0o755)  # the server runs as the postgres user when the tests run as root
    pg = PrivatePostgres(work / "pg")
    url = pg.start()
    tables = work / "tables"
    tables.mkdir()
    file_table(tables / "long", [1_700_000_000_000 + v * 1000 for v in range(COMMITS)])
    restore_table(tables / "events")
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": redis_url,
        "DELTAWEB_ALLOWED_ROOTS": str(tables),
        "DELTAWEB_SECRET_KEY": "fault-test-only-secret-key-0123456789",
        "DELTAWEB_RESTORE_ENGINE": "local",
        "DELTAWEB_JOB_HEARTBEAT_SECONDS": "1",
        "DELTAWEB_RESTORE_HEARTBEAT_SECONDS": "1",
        "SPARK_START_WITH_WORKER": "0",
        "PYTHONUNBUFFERED": "1",
    }
    info = _setup(env, tables)
    port = free_port()
    logs = open(work / "servers.log", "w")
    procs = [
        subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "deltaweb.wsgi", "-w", "2", "--threads", "2",
             "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
            cwd=REPO, env=env, stdout=logs, stderr=subprocess.STDOUT, start_new_session=True,
        ),
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "deltaweb", "worker", "--concurrency=2", "--loglevel=info",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", "pgfault@%h"],
            cwd=REPO, env=env, stdout=logs, stderr=subprocess.STDOUT, start_new_session=True,
        ),
    ]  # fmt: skip
    base = f"http://127.0.0.1:{port}/api"
    wait_until(lambda: _get(base + "/", {}) is not None, "gunicorn", 60)
    yield {"base": base, "pg": pg, "env": env, "tables": tables, "log": work / "servers.log", **info}
    for proc in procs:
        stop_process(proc, grace=20)
    logs.close()
    pg.stop()
    shutil.rmtree(work, ignore_errors=True)


def _setup(env: dict[str, str], tables: Path) -> dict:
    script = f"""
import django, json; django.setup()
from django.core.management import call_command
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from tables.services.catalog import registration
call_command("migrate", verbosity=0)
call_command("create_roles", verbosity=0)
tokens = {{}}
for name, group in (("ana", "analyst"), ("apo", "approver")):
    u = User.objects.create_user(name, password="x-" + name)
    u.groups.add(Group.objects.get(name=group))
    tokens[name] = Token.objects.create(user=u).key
ids = {{n: registration.register_table(n, {str(tables)!r} + "/" + n).pk for n in ("long", "events")}}
print("SETUP " + json.dumps({{"tokens": tokens, "ids": ids}}))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("SETUP "))[6:])


def _get(url: str, headers: dict[str, str]):
    try:
        return requests.get(url, headers=headers, timeout=30)
    except requests.RequestException:
        return None


def _retry(call, ok=(200, 201, 202), timeout: float = 60):
    """The same request again until it succeeds: each failure must be a clean 503."""
    failures = []

    def once():
        r = call()
        if r.status_code in ok:
            return r
        failures.append(r)
        return None

    r = wait_until(once, "a request to succeed after the restart", timeout)
    for bad in failures:
        assert bad.status_code == 503, bad.text[:300]
        assert bad.json()["error"]["code"] == "database_unavailable" and "Traceback" not in bad.text
    return r


def _terminal_job(d: dict, headers: dict, job_id: int, sweep: bool = False) -> dict:
    """The job once it has ended; with `sweep`, the beat's sweep runs meanwhile (every few
    seconds here): a job whose worker lost the database is failed with a reason, one that
    survived the restart goes on (slowly, on a busy machine) and ends by itself."""

    def done():
        if sweep:
            _sweep(d)
        r = _get(f"{d['base']}/jobs/{job_id}/", headers)
        body = r.json() if r is not None and r.status_code == 200 else {}
        return body if body.get("status") in ("succeeded", "failed", "skipped") else None

    try:
        return wait_until(done, f"job {job_id}", timeout=600)
    except pytest.fail.Exception:
        r = _get(f"{d['base']}/jobs/{job_id}/", headers)
        # the servers' log without traceback frames: what each task did, in order
        lines = [x for x in d["log"].read_text(errors="replace").splitlines() if x[:1] not in (" ", "")]
        tail = "\n".join(lines[-80:])
        pytest.fail(f"job {job_id} did not end: {r.text[:600] if r is not None else 'no answer'}\n{tail}")


@RUNS
def test_requests_fail_cleanly_while_postgres_restarts_and_nothing_is_half_written(deployment, run) -> None:
    d = deployment
    ana = {"Authorization": f"Token {d['tokens']['ana']}"}
    apo = {"Authorization": f"Token {d['tokens']['apo']}"}
    long_id, events_id = d["ids"]["long"], d["ids"]["events"]
    events = d["tables"] / "events"
    before = log_versions(events)

    req = requests.post(f"{d['base']}/tables/{events_id}/restores/", json={"version": 2, "reason": "undo"}, headers=ana)
    assert req.status_code == 201, req.text
    sync = requests.post(f"{d['base']}/tables/{long_id}/sync/", headers=ana, timeout=30)
    assert sync.status_code == 202, sync.text
    wait_until(
        lambda: (_get(f"{d['base']}/jobs/{sync.json()['id']}/", ana).json() or {}).get("status") == "running", "sync"
    )

    d["pg"].stop()  # mid-sync
    down = requests.get(f"{d['base']}/tables/", headers=ana, timeout=30)
    assert down.status_code == 503 and down.json()["error"]["code"] == "database_unavailable", down.text[:300]
    assert int(down.headers["Retry-After"]) > 0 and "Traceback" not in down.text
    refused = requests.post(f"{d['base']}/restores/{req.json()['id']}/approve/", json={"comment": "ok"}, headers=apo)
    assert refused.status_code == 503 and "Traceback" not in refused.text
    d["pg"].start()

    _retry(lambda: requests.get(f"{d['base']}/tables/", headers=ana, timeout=30))
    _retry(
        lambda: requests.post(f"{d['base']}/restores/{req.json()['id']}/approve/", json={"comment": "ok"}, headers=apo)
    )
    first = _terminal_job(d, ana, sync.json()["id"], sweep=True)
    # finished, failed by the sweep (its worker lost the database), or failed by itself once the
    # database answered again: each says why
    reasons = ("stopped without finishing", "the database was unavailable during the sync")
    assert first["status"] == "succeeded" or any(r in first["error"] for r in reasons), first
    again = _retry(lambda: requests.post(f"{d['base']}/tables/{long_id}/sync/", headers=ana, timeout=30))
    assert _terminal_job(d, ana, again.json()["id"])["status"] == "succeeded"

    history = requests.get(f"{d['base']}/tables/{long_id}/history/?limit=1", headers=ana, timeout=30).json()
    assert history["count"] == COMMITS  # every version once: no gap, no duplicate
    restore = wait_until(
        lambda: (
            (r := _get(f"{d['base']}/restores/{req.json()['id']}/", ana)) is not None
            and r.json().get("status") in ("succeeded", "failed", "conflict")
            and r.json()
        ),
        "the restore",
    )
    assert restore["status"] == "succeeded", restore
    assert log_versions(events) == [*before, before[-1] + 1]  # committed exactly once


def _sweep(d: dict) -> None:
    """The beat's sweep of jobs silent for 2 s (their heartbeat beats every second)."""
    time.sleep(2)
    script = "import django; django.setup(); from datetime import timedelta; from tables.services.jobs import lifecycle as jobs; "
    script += "jobs.sweep_silent_jobs(timedelta(seconds=2))"
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=d["env"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
