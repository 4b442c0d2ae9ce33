"""Load: 50 concurrent API clients for 60 s while a sync and a restore run, on SQLite and on
PostgreSQL.

Usage: .venv/bin/python benchmarks/load.py [--db sqlite|postgres|both] [--clients 50]
       [--seconds 60] [--versions 200] [--workdir DIR]

Per database, from scratch: a table written by delta-rs (`--versions` small commits) and a
second one that is restored, registered and synced; gunicorn (4 workers) serves the app on
loopback, a real Celery worker (Redis broker) runs the jobs. Then, for `--seconds`:
  - `--clients` threads, each with its own token session, loop over the history API (a page
    at a random offset), time travel (`resolve/?timestamp=`) and metadata diffs
    (`diff/?from=&to=`) of random versions;
  - a writer appends a commit to the table every second and asks for a sync (POST sync/);
  - an analyst requests restores of the second table and an approver approves them, one
    after another (the worker plans and commits each).
Reported per request kind: count, errors (a 5xx, a connection error, or any status other
than 200), p50 and p95 latency in ms; and how many syncs and restores finished. PostgreSQL is
Debian's, started by scripts/postgres.sh (a fresh database per run). Prints a table, then one
JSON line.
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
from collections import defaultdict
from pathlib import Path

from web import free_port  # the benchmarks' one way to pick a loopback port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV_BIN = Path(sys.executable).parent


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


def run_one(db: str, args: argparse.Namespace) -> dict:
    """One database: set up, load for args.seconds, return the measurements."""
    import requests

    workdir = Path(args.workdir) / db
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    write_table(workdir / "events", args.versions)
    write_table(workdir / "restored", 12)
    url = f"sqlite:///{workdir / 'load.sqlite3'}" if db == "sqlite" else postgres_url("deltaweb_load")
    from web import start_redis

    redis_proc = start_redis(workdir)  # it sets CELERY_BROKER_URL
    broker = os.environ["CELERY_BROKER_URL"]
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": broker,
        "DELTAWEB_ALLOWED_ROOTS": str(workdir),
        "DELTAWEB_RESULTS_DIR": str(workdir / "results"),
        "DELTAWEB_RESTORE_ENGINE": "local",  # the restore's plan without a JVM: this is about the web and DB
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "DELTAWEB_SECRET_KEY": "benchmark-only-secret-key-0123456789",
        "SPARK_START_WITH_WORKER": "0",
    }
    setup = f"""
import django; django.setup()
from django.core.management import call_command
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from tables import registration, sync
call_command("migrate", verbosity=0)
call_command("create_roles", verbosity=0)
tokens = {{}}
for name, group in (("ana", "analyst"), ("apo", "approver")):
    u = User.objects.create_user(name, password="x-" + name)
    u.groups.add(Group.objects.get(name=group))
    tokens[name] = Token.objects.create(user=u).key
ids = {{}}
for name in ("events", "restored"):
    t = registration.register_table(name, {str(workdir)!r} + "/" + name)
    sync.sync_table(t.pk)
    ids[name] = t.pk
import json; print("SETUP " + json.dumps({{"tokens": tokens, "ids": ids}}))
"""
    out = subprocess.run([sys.executable, "-c", setup], cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    info = json.loads(next(x for x in out.stdout.splitlines() if x.startswith("SETUP "))[6:])
    port = free_port()
    server = subprocess.Popen(
        [str(VENV_BIN / "gunicorn"), "deltaweb.wsgi", "-w", "4", "--threads", "4", "-b", f"127.0.0.1:{port}",
         "--log-level", "warning"],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "deltaweb", "worker", "--concurrency=2", "--loglevel=warning",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=env, start_new_session=True, stdout=open(workdir / "worker.log", "w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/api"
    events, restored = info["ids"]["events"], info["ids"]["restored"]
    analyst = {"Authorization": f"Token {info['tokens']['ana']}"}
    approver = {"Authorization": f"Token {info['tokens']['apo']}"}
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    samples: dict[str, list[str]] = defaultdict(list)
    lock = threading.Lock()
    done = {"syncs": 0, "restores": 0, "restore_states": []}
    try:
        wait_http(f"{base}/")
        versions = args.versions
        timeline = requests.get(f"{base}/tables/{events}/history/?limit=1&offset={versions - 1}", headers=analyst,
                                timeout=30).json()  # fmt: skip
        oldest = timeline["results"][0]["timestamp"]
        newest = requests.get(f"{base}/tables/{events}/history/?limit=1", headers=analyst, timeout=30).json()
        newest = newest["results"][0]["timestamp"]
        end = time.monotonic() + args.seconds

        def record(kind: str, started: float, response=None, exc: Exception | None = None) -> None:
            ms = (time.perf_counter() - started) * 1000
            with lock:
                latencies[kind].append(ms)
                if exc is not None or response is None or response.status_code != 200:
                    errors[kind] += 1
                    if len(samples[kind]) < 3:
                        samples[kind].append(str(exc) if exc else f"{response.status_code} {response.text[:200]}")

        def client(i: int) -> None:
            rnd = random.Random(i)
            s = requests.Session()
            s.headers.update(analyst)
            while time.monotonic() < end:
                kind = rnd.choice(("history", "resolve", "diff"))
                if kind == "history":
                    url = f"{base}/tables/{events}/history/?limit=50&offset={rnd.randrange(0, versions)}"
                elif kind == "resolve":
                    ts = rnd.randint(oldest, newest)  # inside the history: every answer is a version
                    url = f"{base}/tables/{events}/resolve/?timestamp={ts}"
                else:
                    a = rnd.randrange(0, versions - 1)
                    url = f"{base}/tables/{events}/diff/?from={a}&to={rnd.randrange(a + 1, versions)}"
                t0 = time.perf_counter()
                try:
                    r = s.get(url, timeout=30)
                except requests.RequestException as exc:
                    record(kind, t0, exc=exc)
                    continue
                record(kind, t0, r)

        def writer() -> None:
            """A commit a second on the table the clients read, and a sync asked for each time."""
            s = requests.Session()
            s.headers.update(analyst)
            n = 0
            while time.monotonic() < end:
                write_table(workdir / "events", 1)
                t0 = time.perf_counter()
                try:
                    r = s.post(f"{base}/tables/{events}/sync/", timeout=30)
                    record("sync-start", t0, r if r.status_code != 202 else _ok(r))
                    job = r.json().get("id")
                    while job and time.monotonic() < end:
                        status = s.get(f"{base}/jobs/{job}/", timeout=30).json().get("status")
                        if status in ("succeeded", "failed", "skipped"):
                            n += status == "succeeded"
                            break
                        time.sleep(0.2)
                except requests.RequestException as exc:
                    record("sync-start", t0, exc=exc)
                time.sleep(1)
            done["syncs"] = n

        def restorer() -> None:
            """Restore requests, approved by another user, one after another."""
            a, b = requests.Session(), requests.Session()
            a.headers.update(analyst)
            b.headers.update(approver)
            target = 1
            while time.monotonic() < end:
                t0 = time.perf_counter()
                try:
                    r = a.post(f"{base}/tables/{restored}/restores/", json={"version": target, "reason": "load test"},
                               timeout=60)  # fmt: skip
                    record("restore-request", t0, r if r.status_code != 201 else _ok(r))
                    if r.status_code != 201:
                        time.sleep(1)
                        continue
                    rid = r.json()["id"]
                    t0 = time.perf_counter()
                    r = b.post(f"{base}/restores/{rid}/approve/", json={"comment": "ok"}, timeout=60)
                    record("restore-approve", t0, _ok(r) if r.status_code in (200, 202) else r)
                    while time.monotonic() < end + 60:
                        state = b.get(f"{base}/restores/{rid}/", timeout=30).json().get("status")
                        if state in ("succeeded", "failed", "conflict"):
                            done["restores"] += state == "succeeded"
                            done["restore_states"].append(state)
                            break
                        time.sleep(0.3)
                except requests.RequestException as exc:
                    record("restore-request", t0, exc=exc)
                target = 1 + target % 8
            return

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        threads += [threading.Thread(target=writer), threading.Thread(target=restorer)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
    finally:
        for proc in (server, worker, redis_proc):
            stop(proc)
    kinds = {
        k: {
            "requests": len(v),
            "errors": errors[k],
            "p50_ms": round(pct(v, 50), 1),
            "p95_ms": round(pct(v, 95), 1),
            **({"error_samples": samples[k]} if samples[k] else {}),
        }
        for k, v in sorted(latencies.items())
    }
    reads = [x for k in ("history", "resolve", "diff") for x in latencies[k]]
    return {
        "db": db,
        "clients": args.clients,
        "seconds": round(wall, 1),
        "reads_per_s": round(len(reads) / wall, 1),
        "reads_p95_ms": round(pct(reads, 95), 1),
        "errors": sum(errors.values()),
        "syncs_succeeded": done["syncs"],
        "restores_succeeded": done["restores"],
        "restore_states": done["restore_states"],
        "kinds": kinds,
    }


class _ok:
    """A response counted as a success (202/201 are what these calls answer)."""

    status_code = 200

    def __init__(self, response) -> None:
        self.text = response.text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--versions", type=int, default=200)
    ap.add_argument("--workdir", default="/tmp/deltaweb-bench/load")
    args = ap.parse_args()
    results = [run_one(db, args) for db in (("sqlite", "postgres") if args.db == "both" else (args.db,))]
    print(f"{'db':10} {'kind':16} {'requests':>9} {'errors':>7} {'p50 ms':>8} {'p95 ms':>8}")
    for res in results:
        for kind, k in res["kinds"].items():
            print(f"{res['db']:10} {kind:16} {k['requests']:9d} {k['errors']:7d} {k['p50_ms']:8.1f} {k['p95_ms']:8.1f}")
        print(
            f"{res['db']:10} reads: {res['reads_per_s']}/s, p95 {res['reads_p95_ms']} ms, errors {res['errors']}; "
            f"syncs succeeded {res['syncs_succeeded']}, restores {res['restore_states']}"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
