"""deltaweb as a commit-owner under load: commits per second and backfill lag.

Usage: .venv/bin/python benchmarks/owner.py [--seconds S] [--writers N] [--postgres URL]

For each database (SQLite always; PostgreSQL when --postgres postgres://... is given, or
DELTAWEB_BENCH_POSTGRES is set): a fresh database is migrated, a managed table created
(owner_services.create_managed_table), and gunicorn (4 sync workers) serves deltaweb on
loopback. N writer threads (default 8) commit through the REST API for S seconds with the
RestOwnerClient, each looping: read the latest version (get_commits), commit_via_owner at
latest+1, retry on a conflict (jittered exponential backoff). Meanwhile a backfill loop
(owner_services.backfill, as the Celery task runs it) runs in this process, and the lag
(latest ratified - backfilled version) is sampled every 100 ms from the database.
Afterwards the log is checked: versions contiguous, every commit backfilled.
Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run_one(args: argparse.Namespace) -> dict:
    """In a child process whose environment names the database: set up, load, measure."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection, connections
    from rest_framework.authtoken.models import Token

    from tables import owner_services
    from tables.delta.errors import CommitConflictError
    from tables.delta.managed import commit_via_owner
    from tables.delta.owner_client import RestOwnerClient
    from tables.models import ManagedTable
    from tables.owner_db import table_conf
    from tables.roles import WRITER

    call_command("migrate", verbosity=0)
    root = Path(os.environ["DELTAWEB_ALLOWED_ROOTS"])
    name = f"bench-{os.getpid()}-{int(time.time())}"  # a reused PostgreSQL database may hold older runs
    table = owner_services.create_managed_table(name, str(root / name), SCHEMA)
    user = User.objects.get_or_create(username="bench-writer")[0]
    user.groups.add(Group.objects.get_or_create(name=WRITER)[0])
    token = Token.objects.get_or_create(user=user)[0].key
    mt = ManagedTable.objects.select_related("table").get(table=table)
    tc = table_conf(mt)
    path = Path(table.location)
    connection.close()

    port = free_port()
    log = open(root / "gunicorn.log", "w")
    server = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "gunicorn"), "deltaweb.wsgi", "-w", "4", "-b", f"127.0.0.1:{port}",
         "--timeout", "120"],
        cwd=REPO,
        env=os.environ.copy(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    client = RestOwnerClient(base, token, name="deltaweb", timeout=60)
    try:
        deadline = time.time() + 30
        while True:
            try:
                client.get_commits(tc, 0)
                break
            except Exception as exc:
                if time.time() > deadline or server.poll() is not None:
                    raise RuntimeError(
                        "gunicorn did not start:\n" + (root / "gunicorn.log").read_text()[-2000:]
                    ) from exc
                time.sleep(0.2)

        stop = threading.Event()
        lock = threading.Lock()
        latencies: list[float] = []
        attempts = [0]
        conflicts = [0]
        errors: list[BaseException] = []
        lags: list[int] = []
        backfills = [0]

        def writer(i: int) -> None:
            rng = random.Random(i)
            k = 0
            try:
                while not stop.is_set():
                    t0, tries = time.perf_counter(), 0
                    while not stop.is_set():
                        latest = client.get_commits(tc, 0).latest_table_version
                        with lock:
                            attempts[0] += 1
                        try:
                            commit_via_owner(
                                path, client, [], "WRITE", read_version=latest, txn_id=f"w{i}-{k}", is_blind_append=True
                            )
                        except CommitConflictError:
                            with lock:
                                conflicts[0] += 1
                            tries += 1
                            time.sleep(rng.uniform(0, min(0.1, 0.005 * 2**tries)))
                            continue
                        with lock:
                            latencies.append(time.perf_counter() - t0)
                        k += 1
                        break
            except BaseException as exc:  # reported below
                errors.append(exc)

        def backfiller() -> None:
            while not stop.is_set():
                try:
                    owner_services.backfill(table.pk)
                    backfills[0] += 1
                except Exception as exc:  # reported below
                    errors.append(exc)
                    return
                time.sleep(0.01)
            connections.close_all()

        def sampler() -> None:
            while not stop.is_set():
                row = ManagedTable.objects.filter(pk=mt.pk).values_list("latest_version", "backfilled_version").get()
                lags.append(row[0] - row[1])
                time.sleep(0.1)
            connections.close_all()

        start_version = 0
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
        threads += [threading.Thread(target=backfiller), threading.Thread(target=sampler)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        if errors:
            raise errors[0]
        owner_services.backfill(table.pk)
        mt.refresh_from_db()
        commits = mt.latest_version - start_version
        versions = sorted(int(p.name[:20]) for p in (path / "_delta_log").glob("*.json") if p.name[:20].isdigit())
        assert versions == list(range(mt.latest_version + 1)), "versions not contiguous"
        assert mt.backfilled_version == mt.latest_version and commits == len(latencies)
        return {
            "database": connection.vendor,
            "writers": args.writers,
            "seconds": round(elapsed, 2),
            "commits": commits,
            "commitsPerSecond": round(commits / elapsed, 1),
            "attempts": attempts[0],
            "conflicts": conflicts[0],
            "commitLatencyMedianMs": round(statistics.median(latencies) * 1000, 1),
            "commitLatencyP95Ms": round(pct(latencies, 0.95) * 1000, 1),
            "backfillRuns": backfills[0],
            "lagSamples": len(lags),
            "lagMedian": statistics.median(lags) if lags else None,
            "lagP95": pct(lags, 0.95),
            "lagMax": max(lags) if lags else None,
        }
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def child(kind: str, database_url: str, args: argparse.Namespace, workdir: Path) -> dict:
    root = workdir / kind
    root.mkdir(parents=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": database_url,
        "DELTAWEB_ALLOWED_ROOTS": str(root),
        "DELTAWEB_OWNER_AUTO_BACKFILL": "0",  # the backfill loop below does it
        "DELTAWEB_RESULTS_DIR": str(root / "results"),
    }
    cmd = [sys.executable, __file__, "--child", "--seconds", str(args.seconds), "--writers", str(args.writers)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.seconds + 300)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--postgres", default=os.environ.get("DELTAWEB_BENCH_POSTGRES", ""))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args)))
        return
    workdir = Path(tempfile.mkdtemp(prefix="deltaweb-owner-bench-"))
    results = []
    try:
        results.append(child("sqlite", f"sqlite:///{workdir / 'owner.sqlite3'}", args, workdir))
        if args.postgres:
            results.append(child("postgresql", args.postgres, args, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    header = ("database", "commits/s", "commits", "conflicts", "latency p50/p95 ms", "lag p50/p95/max")
    rows = [
        (
            r["database"],
            f"{r['commitsPerSecond']:.1f}",
            str(r["commits"]),
            str(r["conflicts"]),
            f"{r['commitLatencyMedianMs']:.0f} / {r['commitLatencyP95Ms']:.0f}",
            f"{r['lagMedian']} / {r['lagP95']} / {r['lagMax']}",
        )
        for r in results
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print(f"commit-owner: {args.writers} writers over HTTP (gunicorn -w 4), {args.seconds:.0f} s per database")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    if not args.postgres:
        print("(PostgreSQL not measured: pass --postgres postgres://user@host:port/db)")
    print(json.dumps({"benchmark": "owner", "results": results}))


if __name__ == "__main__":
    main()
