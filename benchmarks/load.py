"""Load: 50 concurrent API clients for 60 s while a sync and a restore run, on SQLite and on
PostgreSQL; optionally catalog writers, worker kills and the beat's sweeps (a sustained run
with faults), and the invariants checked at the end.

Usage: .venv/bin/python benchmarks/load.py [--db sqlite|postgres|both] [--clients 50]
       [--seconds 60] [--versions 200] [--workdir DIR] [--catalog-writers N]
       [--kill-worker-every S] [--kill-when-busy] [--beat] [--settle 150]

Per database, from scratch: a table written by delta-rs (`--versions` small commits) and a
second one that is restored, registered and synced; gunicorn (4 workers) serves the app on
loopback, a real Celery worker (Redis broker) runs the jobs. Then, for `--seconds`:
  - `--clients` threads, each with its own token session, loop over the history API (a page
    at a random offset), time travel (`resolve/?timestamp=`) and metadata diffs
    (`diff/?from=&to=`) of random versions;
  - a writer appends a commit to the table every second and asks for a sync (POST sync/),
    waiting for it at most 20 s (a sync held up by a killed worker does not stop the writer);
  - an analyst requests restores of the second table and an approver approves them, one
    after another (the worker plans and commits each); an approval whose connection was reset
    is sent again while the request is still pending.
With `--catalog-writers N`, a catalogManaged table of 100 versions is made as
benchmarks/owner.py makes it (`make_uc_table`) and N writer processes (owner.py's
`writer_process`: the official Unity Catalog SDK client each) commit to it for the run, while
owner.py's `Publisher` publishes ratified commits; both go on after an error (the commit's
outcome unknown: reported as unsure, its txnId never staged again). The server's backfill of
each ratified commit is off (DELTAWEB_OWNER_AUTO_BACKFILL=0), as in owner.py: publishing is the
client's duty; the beat's catch-up backfill still runs.
With `--kill-worker-every S`, every S seconds the Celery worker's whole process group gets
SIGKILL and a replacement starts at once; with `--kill-when-busy`, each kill first waits (up to
S/2) for a sync job or a restore to be running (asked of the database; restores and syncs in
turn): on a timer alone most kills find the worker idle. `--beat` (implied by the kills) runs
`celery beat` (schedule file in the workdir) with short thresholds, so that its sweeps act
within the run: job heartbeat 2 s, silent after 30 s; restore heartbeat 2 s, stuck after 30 s;
delivery lease 30 s; every table synced by the beat every 10 s; the sweeps' own period is 60 s
(fixed in settings).
After the load, the run waits up to `--settle` s for no job and no restore to be active (the
sweeps must fail or re-send what the kills left), syncs every table once more, and checks the
invariants of benchmarks/load_checks.py (jobs, restores, catalog, synced), each pass/fail.
Reported per request kind: count, errors (a 5xx, a connection error, or any status other
than 200), p50 and p95 latency in ms; how many syncs and restores finished; the catalog's
commits/s and commit latency; worker kills; the load average before and after. PostgreSQL is
Debian's, started by scripts/postgres.sh (a fresh database per run). Prints a table, then one
JSON line. The worker's log (all workers, one after another) is `<workdir>/<db>/worker.log`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import load_checks
from web import free_port  # the benchmarks' one way to pick a loopback port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV_BIN = Path(sys.executable).parent
sys.path.insert(1, str(ROOT))  # tests.web.uc_sdk, which owner.py's writers use
CATALOG_VERSIONS = 100
SYNC_WAIT_SECONDS = 20
# --beat: thresholds short enough for the sweeps to act within a run (deltaweb/settings.py)
BEAT_ENV = {
    "DELTAWEB_JOB_HEARTBEAT_SECONDS": "2",
    "DELTAWEB_JOB_SILENT_MINUTES": "0.5",
    "DELTAWEB_RESTORE_HEARTBEAT_SECONDS": "2",
    "DELTAWEB_RESTORE_STUCK_MINUTES": "0.5",
    "DELTAWEB_DELIVERY_LEASE_SECONDS": "30",
    "DELTAWEB_SYNC_INTERVAL_SECONDS": "10",
}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def write_table(path: Path, versions: int) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    for i in range(versions):
        data = pa.table({"id": pa.array([i], pa.int64()), "name": [f"row {i}"]})
        write_deltalake(str(path), data, mode="append")


def postgres_url(name: str) -> str:
    """A fresh database on the private PostgreSQL (scripts/postgres.sh)."""
    base = subprocess.run([str(ROOT / "scripts" / "postgres.sh"), "start"], check=True, capture_output=True,
                          text=True).stdout.strip().splitlines()[-1]  # fmt: skip
    server = base.rsplit("/", 1)[0]
    admin = f"{server}/postgres"
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True, capture_output=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
    return f"{server}/{name}"


def wait_http(url: str) -> None:
    import requests

    for _ in range(300):
        try:
            requests.get(url, timeout=2)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise SystemExit(f"the server at {url} did not answer")


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


# ------------------------------------------------------------------ set-up (a child with Django)


def setup_child(workdir: Path, catalog: bool) -> None:
    """Migrate, users and tokens, the two tables registered and synced; with `catalog`, the
    catalogManaged table too. Prints one line: SETUP {tokens, ids, catalog}."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from tables.services.catalog import registration
    from tables.services.sync import store as sync

    call_command("migrate", verbosity=0)
    call_command("create_roles", verbosity=0)
    tokens = {}
    for name, group in (("ana", "analyst"), ("apo", "approver")):
        u = User.objects.create_user(name, password="x-" + name)
        u.groups.add(Group.objects.get(name=group))
        tokens[name] = Token.objects.create(user=u).key
    ids = {}
    for name in ("events", "restored"):
        t = registration.register_table(name, str(workdir / name))
        sync.sync_table(t.pk)
        ids[name] = t.pk
    out = {"tokens": tokens, "ids": ids}
    if catalog:
        out["catalog"] = setup_catalog_table(tokens, ids)
    print("SETUP " + json.dumps(out))


def setup_catalog_table(tokens: dict, ids: dict) -> dict:
    """owner.py's catalogManaged table (created through the catalog, published versions), its
    writer's token, registered and synced like the others."""
    from django.contrib.auth.models import Group, User
    from owner import make_uc_table
    from rest_framework.authtoken.models import Token

    from tables.models import ManagedTable
    from tables.services.access.roles import WRITER
    from tables.services.sync import store as sync

    user = User.objects.create_user("ucw", password="x-ucw")
    user.groups.add(Group.objects.get_or_create(name=WRITER)[0])
    tokens["ucw"] = Token.objects.create(user=user).key
    table_id, uri, path = make_uc_table(user, "load", CATALOG_VERSIONS)
    ids["catalog"] = ManagedTable.objects.get(owner_table_id=table_id).table_id
    sync.sync_table(ids["catalog"])
    return {"tableId": table_id, "uri": uri, "path": str(path)}


def run_env(db: str, workdir: Path, args: argparse.Namespace) -> dict:
    url = f"sqlite:///{workdir / 'load.sqlite3'}" if db == "sqlite" else postgres_url("deltaweb_load")
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"],
        "DELTAWEB_ALLOWED_ROOTS": str(workdir),
        "DELTAWEB_RESULTS_DIR": str(workdir / "results"),
        "DELTAWEB_RESTORE_ENGINE": "local",  # the restore's plan without a JVM: this is about the web and DB
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "DELTAWEB_SECRET_KEY": "benchmark-only-secret-key-0123456789",
        "SPARK_START_WITH_WORKER": "0",
    }
    if args.beat:
        env.update(BEAT_ENV)
    if args.catalog_writers:
        env["DELTAWEB_OWNER_AUTO_BACKFILL"] = "0"  # the publisher publishes (owner.py does the same)
    return env


def setup(workdir: Path, env: dict, catalog: bool) -> dict:
    cmd = [sys.executable, __file__, "--child-setup", str(workdir)] + (["--catalog-writers", "1"] if catalog else [])
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("SETUP "))[6:])


# ------------------------------------------------------------------ the processes


class Services:
    """gunicorn, the Celery worker (replaced when killed) and, with `beat`, celery beat."""

    def __init__(self, workdir: Path, env: dict, beat: bool) -> None:
        self.workdir, self.env = workdir, env
        self.port = free_port()
        self.server = subprocess.Popen(
            [str(VENV_BIN / "gunicorn"), "deltaweb.wsgi", "-w", "4", "--threads", "4", "-b", f"127.0.0.1:{self.port}",
             "--log-level", "warning"],
            cwd=ROOT, env=env, start_new_session=True,
        )  # fmt: skip
        self.log = open(workdir / "worker.log", "a")  # every worker's output, one after another
        self.kills: list[float] = []  # when (time.time()) each worker was killed
        self.aims: list[str] = []  # what each kill waited for and found running (--kill-when-busy)
        self.workers = 0
        self.worker = self.start_worker()
        self.beat = None
        if beat:
            self.beat = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "deltaweb", "beat", "--loglevel=info",
                 "--schedule", str(workdir / "beat-schedule"), "--pidfile", str(workdir / "beat.pid")],
                cwd=ROOT, env=env, start_new_session=True, stdout=open(workdir / "beat.log", "w"),
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def start_worker(self) -> subprocess.Popen:
        self.workers += 1
        self.log.write(f"=== load.py: worker {self.workers} started at {time.strftime('%H:%M:%S')} ===\n")
        self.log.flush()
        # its own session (process group), so that a kill takes every process it started
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "deltaweb", "worker", "--concurrency=2", "--loglevel=info",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=self.env, start_new_session=True, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def kill_worker(self, during: str = "") -> None:
        try:
            os.killpg(self.worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.worker.wait()
        self.kills.append(time.time())
        self.aims.append(during)
        what = f" while a {during} ran" if during else ""
        self.log.write(
            f"=== load.py: worker {self.workers} killed (SIGKILL){what} at {time.strftime('%H:%M:%S')} ===\n"
        )
        self.worker = self.start_worker()

    def killer(self, every: float, end: float, running=None) -> None:
        """A kill every `every` seconds until `end` (time.monotonic()). With `running`
        (--kill-when-busy; `running(kind)`: a "sync" or a "restore" runs now, RunningProbe),
        each kill waits up to every/2 for work to hit, restores and syncs in turn: an idle worker
        dies without consequence, and a kill on a timer mostly finds one idle."""
        due, n = time.monotonic() + every, 0
        while due < end:
            time.sleep(max(0.0, due - time.monotonic()))
            during = ""
            if running is not None:
                during = self.wait_busy(running, ("restore", "sync")[n % 2], min(due + every / 2, end))
            self.kill_worker(during)
            due, n = due + every, n + 1

    @staticmethod
    def wait_busy(running, prefer: str, until: float) -> str:
        """The kind seen running (the preferred one only in the first half of the wait), or ""."""
        other = "sync" if prefer == "restore" else "restore"
        half = time.monotonic() + (until - time.monotonic()) / 2
        while time.monotonic() < until:
            for kind in (prefer,) if time.monotonic() < half else (prefer, other):
                if running(kind):
                    return kind
            time.sleep(0.1)
        return ""

    def stop(self) -> None:
        for proc in (self.server, self.worker, self.beat):
            if proc is not None:
                stop(proc)
        self.log.close()


class RunningProbe:
    """--kill-when-busy: whether a sync job or a restore runs now, asked of the run's database
    itself (the API lists no jobs); one connection, the killer thread's. An error is a no. Only a
    row that beat in the last 5 s counts (--beat: every 2 s): one whose worker an earlier kill
    took stays running until the sweep fails or requeues it."""

    QUERIES = {
        "sync": "SELECT count(*) FROM tables_job WHERE status = 'running' AND kind = 'sync' AND progress_at > {}",
        "restore": "SELECT count(*) FROM tables_restorerequest WHERE status = 'running' AND progress_at > {}",
    }

    def __init__(self, url: str) -> None:
        self.url, self.conn = url, None

    def __call__(self, kind: str) -> bool:
        try:
            if self.conn is None:
                if self.url.startswith("sqlite:///"):
                    import sqlite3

                    path = self.url.removeprefix("sqlite:///")
                    self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2, check_same_thread=False)
                else:
                    import psycopg

                    self.conn = psycopg.connect(self.url, autocommit=True)
            since = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=5)
            if self.url.startswith("sqlite:///"):  # Django stores naive UTC text there
                query, param = self.QUERIES[kind].format("?"), since.strftime("%Y-%m-%d %H:%M:%S.%f")
            else:
                query, param = self.QUERIES[kind].format("%s"), since.replace(tzinfo=UTC)
            return self.conn.execute(query, (param,)).fetchone()[0] > 0
        except Exception:  # a locked or busy database: not worth a kill's aim
            return False


class CatalogLoad:
    """--catalog-writers: owner.py's writer processes commit to the catalogManaged table through
    the catalog API with the official SDK; owner.py's Publisher publishes their commits."""

    def __init__(self, base_url: str, token: str, catalog: dict, writers: int) -> None:
        import multiprocessing

        from owner import Publisher, writer_process

        self.path = Path(catalog["path"])
        args = (base_url, token, catalog["tableId"], catalog["uri"], self.path)
        # forked before this process starts any thread (start() comes first)
        ctx = multiprocessing.get_context("fork")
        self.stop, self.out = ctx.Event(), ctx.Queue()
        self.procs = [
            ctx.Process(target=writer_process, args=(i, *args, self.stop, self.out, True), daemon=True)
            for i in range(writers)
        ]
        self.publisher = Publisher(*args, keep_going=True)
        self.accepted: dict[int, str] = {}  # version -> txnId, as the writers were told
        self.unsure: set[str] = set()

    def start(self) -> None:
        self.started = time.perf_counter()
        for proc in self.procs:
            proc.start()
        self.publisher.start()

    def finish(self) -> dict:
        self.stop.set()
        reports = [self.out.get(timeout=300) for _ in self.procs]
        for proc in self.procs:
            proc.join(timeout=30)
        elapsed = time.perf_counter() - self.started
        self.publisher.finish()
        latencies = [x for r in reports for x in r["latencies"]]
        accepted_at = {v: t for r in reports for v, t in r["accepted"].items()}
        for r in reports:
            self.accepted.update(r["txns"])
            self.unsure.update(r["unsure"])
        lags = [self.publisher.published[v] - t for v, t in accepted_at.items() if v in self.publisher.published]
        failures = [f for r in reports for f in r["failures"]]
        return {
            "writers": len(self.procs),
            "seconds": round(elapsed, 1),
            "commits": len(accepted_at),
            "commitsPerSecond": round(len(accepted_at) / elapsed, 1),
            "attempts": sum(r["attempts"] for r in reports),
            "conflicts": sum(r["conflicts"] for r in reports),
            "commitP50Ms": round(pct(latencies, 50) * 1000, 1),
            "commitP95Ms": round(pct(latencies, 95) * 1000, 1),
            "publishLagP95Ms": round(pct(lags, 95) * 1000, 1),
            "unsure": len(self.unsure),
            "errors": len(failures),
            "errorSamples": sorted(set(failures))[:3],
            "writersDied": [r["error"] for r in reports if r["error"]],
            "publisherErrors": len(self.publisher.errors),
            "publisherErrorSamples": sorted({f"{type(e).__name__}: {e}"[:200] for e in self.publisher.errors})[:3],
        }


# ------------------------------------------------------------------ the traffic


class _ok:
    """A response counted as a success (202/201 are what these calls answer)."""

    status_code = 200

    def __init__(self, response) -> None:
        self.text = response.text


class Traffic:
    """The API clients, the writer with its syncs and the restorer; their latencies and errors."""

    def __init__(self, base: str, info: dict, versions: int) -> None:
        import requests

        self.base, self.versions = base, versions
        self.events, self.restored = info["ids"]["events"], info["ids"]["restored"]
        self.analyst = {"Authorization": f"Token {info['tokens']['ana']}"}
        self.approver = {"Authorization": f"Token {info['tokens']['apo']}"}
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.samples: dict[str, list[str]] = defaultdict(list)
        self.lock = threading.Lock()
        self.done = {"syncs": 0, "sync_waits_cut": 0, "restores": 0, "restore_states": []}
        history = f"{base}/tables/{self.events}/history/?limit=1"
        oldest = requests.get(f"{history}&offset={versions - 1}", headers=self.analyst, timeout=30).json()
        newest = requests.get(history, headers=self.analyst, timeout=30).json()
        self.oldest, self.newest = oldest["results"][0]["timestamp"], newest["results"][0]["timestamp"]
        self.end = 0.0  # time.monotonic() when the load stops; set by run()

    def record(self, kind: str, started: float, response=None, exc: Exception | None = None) -> None:
        ms = (time.perf_counter() - started) * 1000
        with self.lock:
            self.latencies[kind].append(ms)
            if exc is not None or response is None or response.status_code != 200:
                self.errors[kind] += 1
                if len(self.samples[kind]) < 3:
                    self.samples[kind].append(str(exc) if exc else f"{response.status_code} {response.text[:200]}")

    def client(self, i: int) -> None:
        import requests

        rnd = random.Random(i)
        s = requests.Session()
        s.headers.update(self.analyst)
        base, events, versions = self.base, self.events, self.versions
        while time.monotonic() < self.end:
            kind = rnd.choice(("history", "resolve", "diff"))
            if kind == "history":
                url = f"{base}/tables/{events}/history/?limit=50&offset={rnd.randrange(0, versions)}"
            elif kind == "resolve":
                ts = rnd.randint(self.oldest, self.newest)  # inside the history: every answer is a version
                url = f"{base}/tables/{events}/resolve/?timestamp={ts}"
            else:
                a = rnd.randrange(0, versions - 1)
                url = f"{base}/tables/{events}/diff/?from={a}&to={rnd.randrange(a + 1, versions)}"
            t0 = time.perf_counter()
            try:
                r = s.get(url, timeout=30)
            except requests.RequestException as exc:
                self.record(kind, t0, exc=exc)
                continue
            self.record(kind, t0, r)

    def writer(self, path: Path) -> None:
        """A commit a second on the table the clients read, and a sync asked for each time."""
        import requests

        s = requests.Session()
        s.headers.update(self.analyst)
        while time.monotonic() < self.end:
            write_table(path, 1)
            t0 = time.perf_counter()
            try:
                r = s.post(f"{self.base}/tables/{self.events}/sync/", timeout=30)
                self.record("sync-start", t0, r if r.status_code != 202 else _ok(r))
                job = r.json().get("id")
                status, give_up = None, min(self.end, time.monotonic() + SYNC_WAIT_SECONDS)
                while job and time.monotonic() < give_up:
                    status = s.get(f"{self.base}/jobs/{job}/", timeout=30).json().get("status")
                    if status in ("succeeded", "failed", "skipped"):
                        self.done["syncs"] += status == "succeeded"
                        break
                    time.sleep(0.2)
                else:
                    self.done["sync_waits_cut"] += time.monotonic() < self.end  # not the run's end
            except requests.RequestException as exc:
                self.record("sync-start", t0, exc=exc)
            time.sleep(1)

    def restorer(self) -> None:
        """Restore requests, approved by another user, one after another."""
        import requests

        a, b = requests.Session(), requests.Session()
        a.headers.update(self.analyst)
        b.headers.update(self.approver)
        target = 1
        while time.monotonic() < self.end:
            t0 = time.perf_counter()
            try:
                r = a.post(f"{self.base}/tables/{self.restored}/restores/",
                           json={"version": target, "reason": "load test"}, timeout=60)  # fmt: skip
                self.record("restore-request", t0, r if r.status_code != 201 else _ok(r))
                if r.status_code != 201:
                    time.sleep(1)
                    continue
            except requests.RequestException as exc:
                self.record("restore-request", t0, exc=exc)
                time.sleep(0.5)
                continue
            try:
                self.approve(b, r.json()["id"])
            except requests.RequestException as exc:  # the wait's polls: the next request goes on
                self.record("restore-wait", time.perf_counter(), exc=exc)
            target = 1 + target % 8

    def approve(self, session, rid: int) -> None:
        """Approve, then wait for the run. An approval whose connection broke (gunicorn closing an
        idle kept-alive connection as the request goes out resets it unread) is counted as an
        error and sent again while the request is still pending, as a person would click again."""
        import requests

        for _ in range(3):
            t0 = time.perf_counter()
            try:
                r = session.post(f"{self.base}/restores/{rid}/approve/", json={"comment": "ok"}, timeout=60)
            except requests.ConnectionError as exc:
                self.record("restore-approve", t0, exc=exc)
                if session.get(f"{self.base}/restores/{rid}/", timeout=30).json().get("status") == "pending":
                    continue
                break
            self.record("restore-approve", t0, _ok(r) if r.status_code in (200, 202) else r)
            break
        self.wait_restore(session, rid)

    def wait_restore(self, session, rid: int) -> None:
        state = None
        while time.monotonic() < self.end + 60:
            state = session.get(f"{self.base}/restores/{rid}/", timeout=30).json().get("status")
            if state in ("succeeded", "failed", "conflict", "stale", "pending", "rejected"):
                self.done["restores"] += state == "succeeded"
                self.done["restore_states"].append(state)
                return
            time.sleep(0.3)
        self.done["restore_states"].append(f"{state} (no longer waited for)")

    def run(self, clients: int, seconds: float, events_path: Path, before_threads) -> float:
        """The load for `seconds`; `before_threads(end)` starts what must start first (forked
        processes) and returns a callable run at the end before the threads are joined."""
        self.end = time.monotonic() + seconds
        at_end = before_threads(self.end)
        threads = [threading.Thread(target=self.client, args=(i,)) for i in range(clients)]
        threads += [threading.Thread(target=self.writer, args=(events_path,)), threading.Thread(target=self.restorer)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(max(0.0, self.end - time.monotonic()))
        at_end()
        for t in threads:
            t.join()
        return time.perf_counter() - started

    def summary(self) -> dict:
        return {
            k: {
                "requests": len(v),
                "errors": self.errors[k],
                "p50_ms": round(pct(v, 50), 1),
                "p95_ms": round(pct(v, 95), 1),
                **({"error_samples": self.samples[k]} if self.samples[k] else {}),
            }
            for k, v in sorted(self.latencies.items())
        }


# ------------------------------------------------------------------ a run and its checks


def final_syncs(base: str, headers: dict, ids: dict) -> dict[str, int | None]:
    """Sync every table once more and wait for it; the history API's count of each."""
    import requests

    s = requests.Session()
    s.headers.update(headers)
    counts: dict[str, int | None] = {}
    for name, pk in ids.items():
        job = s.post(f"{base}/tables/{pk}/sync/", timeout=60).json().get("id")
        deadline = time.monotonic() + 300
        while job and time.monotonic() < deadline:
            if s.get(f"{base}/jobs/{job}/", timeout=30).json().get("status") in ("succeeded", "failed", "skipped"):
                break
            time.sleep(0.5)
        counts[name] = s.get(f"{base}/tables/{pk}/history/?limit=1", timeout=60).json().get("count")
    return counts


def invariants(workdir: Path, env: dict, info: dict, services: Services, catalog: CatalogLoad | None,
               base: str, settle: float) -> dict:  # fmt: skip
    """Wait for the sweeps (up to `settle` s), sync every table, check load_checks' invariants."""
    settled = load_checks.inspect(env, wait=settle)
    headers = {"Authorization": f"Token {info['tokens']['ana']}"}
    counts = final_syncs(base, headers, info["ids"])
    db = load_checks.inspect(env)
    paths = {"events": workdir / "events", "restored": workdir / "restored"}
    if catalog is not None:
        paths["catalog"] = catalog.path
    logs = {name: (info["ids"][name], load_checks.read_log(p)) for name, p in paths.items()}
    out = {
        "settledAfterSeconds": settled["waited"],
        "activeWhenSettled": {
            "jobs": sum(j["status"] in ("queued", "running") for j in settled["jobs"]),
            "restores": sum(r["status"] in load_checks.RESTORE_ACTIVE for r in settled["restores"]),
        },
        "jobs": load_checks.check_jobs(settled, services.kills),
        "restores": load_checks.check_restores(db, logs["restored"][1]),
        "synced": load_checks.check_synced(db, logs, counts),
        "alertScans": db["scans"],
        "deliveries": db["deliveries"],
    }
    if catalog is not None:
        managed = db["managed"].get(str(info["ids"]["catalog"]), {})
        out["catalog"] = load_checks.check_catalog(logs["catalog"][1], catalog.accepted, catalog.unsure, managed)
    return out


def run_one(db: str, args: argparse.Namespace) -> dict:
    """One database: set up, load for args.seconds, settle, check; return the measurements."""
    workdir = Path(args.workdir) / db
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    load_start = loadavg()
    write_table(workdir / "events", args.versions)
    write_table(workdir / "restored", 12)
    from web import start_redis

    redis_proc = start_redis(workdir)  # it sets CELERY_BROKER_URL
    services, catalog, uc = None, None, {}
    try:
        env = run_env(db, workdir, args)
        info = setup(workdir, env, bool(args.catalog_writers))
        services = Services(workdir, env, args.beat)
        base = f"http://127.0.0.1:{services.port}/api"
        wait_http(f"{base}/")
        traffic = Traffic(base, info, args.versions)
        if args.catalog_writers:
            catalog = CatalogLoad(base.removesuffix("/api"), info["tokens"]["ucw"], info["catalog"],
                                  args.catalog_writers)  # fmt: skip

        def before_threads(end: float):
            if catalog is not None:
                catalog.start()  # forks: before any thread
            if args.kill_worker_every:
                aim = RunningProbe(env["DATABASE_URL"]) if args.kill_when_busy else None
                threading.Thread(target=services.killer, args=(args.kill_worker_every, end, aim), daemon=True).start()
            return (lambda: uc.update(catalog.finish())) if catalog is not None else (lambda: None)

        load_before = loadavg()
        wall = traffic.run(args.clients, args.seconds, workdir / "events", before_threads)
        load_after = loadavg()
        checks = invariants(workdir, env, info, services, catalog, base, args.settle)
        load_settled = loadavg()
    finally:
        if catalog is not None:
            catalog.stop.set()  # after an error: the writers end (finish() has set it otherwise)
        try:
            if services is not None:
                services.stop()
        finally:
            stop(redis_proc)
    kinds = traffic.summary()
    reads = [x for k in ("history", "resolve", "diff") for x in traffic.latencies[k]]
    return {
        "db": db,
        "clients": args.clients,
        "seconds": round(wall, 1),
        "reads_per_s": round(len(reads) / wall, 1),
        "reads_p95_ms": round(pct(reads, 95), 1),
        "errors": sum(traffic.errors.values()),
        "syncs_succeeded": traffic.done["syncs"],
        "sync_waits_cut": traffic.done["sync_waits_cut"],
        "restores_succeeded": traffic.done["restores"],
        "restore_states": dict(Counter(traffic.done["restore_states"])),
        "worker_kills": len(services.kills),
        **(
            {"kills_found_running": dict(Counter(a or "nothing" for a in services.aims))} if args.kill_when_busy else {}
        ),
        "workers_started": services.workers,
        "loadavg": {"setup": load_start, "before": load_before, "after": load_after, "settled": load_settled},
        "kinds": kinds,
        **({"catalog": uc} if uc else {}),
        "invariants": checks,
        "invariants_pass": all(v["pass"] for v in checks.values() if isinstance(v, dict) and "pass" in v),
    }


def print_run(res: dict) -> None:
    db = res["db"]
    for kind, k in res["kinds"].items():
        print(f"{db:10} {kind:16} {k['requests']:9d} {k['errors']:7d} {k['p50_ms']:8.1f} {k['p95_ms']:8.1f}")
    print(
        f"{db:10} reads: {res['reads_per_s']}/s, p95 {res['reads_p95_ms']} ms, errors {res['errors']}; "
        f"syncs succeeded {res['syncs_succeeded']} (waits cut {res['sync_waits_cut']}), "
        f"restores {res['restore_states']}"
    )
    if "catalog" in res:
        c = res["catalog"]
        print(
            f"{db:10} catalog: {c['writers']} writers, {c['commits']} commits, {c['commitsPerSecond']}/s, "
            f"p50 {c['commitP50Ms']} ms, p95 {c['commitP95Ms']} ms, conflicts {c['conflicts']}, errors {c['errors']} "
            f"(unsure {c['unsure']}), writers died {len(c['writersDied'])}, publish lag p95 {c['publishLagP95Ms']} ms"
        )
    la = res["loadavg"]
    found = f" (running when killed: {res['kills_found_running']})" if "kills_found_running" in res else ""
    print(f"{db:10} worker kills {res['worker_kills']}{found}; load average {la['before']} before, {la['after']} after "
          f"the load, {la['settled']} settled")  # fmt: skip
    inv = res["invariants"]
    print(f"{db:10} settled after {inv['settledAfterSeconds']} s (active then: {inv['activeWhenSettled']})")
    for name in ("jobs", "restores", "catalog", "synced"):
        if name in inv:
            v = inv[name]
            detail = {k: x for k, x in v.items() if k != "pass" and x not in ([], {}, None)}
            print(f"{db:10} invariant {name:9} {'PASS' if v['pass'] else 'FAIL'} {json.dumps(detail)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--versions", type=int, default=200)
    ap.add_argument("--workdir", default="/tmp/deltaweb-bench/load")
    ap.add_argument("--catalog-writers", type=int, default=0, help="writer processes on a catalogManaged table")
    ap.add_argument("--kill-worker-every", type=float, default=0, help="SIGKILL the Celery worker every S seconds")
    ap.add_argument("--kill-when-busy", action="store_true", help="each kill waits (up to S/2) for a running job")
    ap.add_argument("--beat", action="store_true", help="run celery beat with short sweep thresholds")
    ap.add_argument("--settle", type=float, default=150, help="seconds to wait for the sweeps after the load")
    ap.add_argument("--child-setup", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_setup:
        setup_child(Path(args.child_setup), bool(args.catalog_writers))
        return
    args.beat = args.beat or bool(args.kill_worker_every)
    at, load_before = time.time(), os.getloadavg()
    results = [run_one(db, args) for db in (("sqlite", "postgres") if args.db == "both" else (args.db,))]
    print(f"{'db':10} {'kind':16} {'requests':>9} {'errors':>7} {'p50 ms':>8} {'p95 ms':>8}")
    for res in results:
        print_run(res)
    print(json.dumps({"benchmark": "load", "at": at, "loadavg_before": load_before, "loadavg": os.getloadavg(),
                      "results": results}))  # fmt: skip


if __name__ == "__main__":
    main()
