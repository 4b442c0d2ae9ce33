"""The web application on a 100,000-commit table: sync times and page latency under load.

Usage: .venv/bin/python benchmarks/web.py [--workdir DIR] [--duration S] [--connections N]
                                          [--warm-timeout S] [--json FILE]
                                          [--log DIR] [--deep-page N] [--api-offset N]

Needs the 100,000-commit ICT log that benchmarks/time_travel.py generates (it is generated
here the same way when missing), or the log given by --log (benchmarks/million.py passes its
1,000,000-commit one, with --deep-page 10000 --api-offset 500000). Measured:
  a) cold sync of the registered table (tables.services.sync.store.sync_table, as the Celery worker runs it,
     its follow-up tasks sent to a real redis-server)
  b) incremental sync of 100 new commits, three times
  c) latency of the history page (HTML, the History tab with its readable column) and the
     history API (JSON), first and a deep page, served by gunicorn on loopback (4 sync
     workers; --threads N: gthread workers with N threads and keep-alive),
     with wrk at 20 concurrent connections: median and p95 (wrk's HdrHistogram). Before the
     HTML cases, the history page is asked until every worker shows the readable column (the
     reachability of 100,000 versions is computed once, by a real Celery worker, and read by
     every web worker from the shared cache: the database's table): the steady state a reader
     meets, and the time it took is reported
  d) first byte of the table page (its Overview tab): one client, sequential requests, time from sending the
     request to the response's first byte (median and p95 of 40)
  e) memory: resident set of the gunicorn master and its workers after (c), and of the Celery
     worker that computed the reachability (goal: each web worker < 250 MB)
Prints a table and, last, one JSON line. Targets: history page p95 < 80 ms, API p95 < 25 ms,
table page first byte < 100 ms; incremental sync < 0.3 s.
"""

from __future__ import annotations

import argparse
import atexit
import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV_BIN = Path(sys.executable).parent
LUA = """
done = function(summary, latency, requests)
  io.write(string.format("JSON {\\"p50\\": %.3f, \\"p95\\": %.3f, \\"p99\\": %.3f, \\"requests\\": %d, \\"errors\\": %d, \\"non2xx\\": %d}\\n",
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    summary.requests, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status))
end
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(workdir: Path) -> subprocess.Popen:
    """A real redis-server on a free loopback port, named in this process's CELERY_BROKER_URL
    (the environment Django and the servers started afterwards read): the sync's follow-up
    tasks (alerts) are sent to a broker as in production (nobody consumes them here)."""
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def source_log(workdir: Path) -> Path:
    """The 100,000-commit ICT log beside DIR, generated once as benchmarks/time_travel.py does."""
    sys.path.insert(0, str(HERE))
    import time_travel

    root, _info, _known = time_travel.prepare(workdir.parent, "ict", 0, time_travel.SEED)
    return root


def append_commits(path: Path, n: int) -> None:
    """n more small ICT commits after the latest (commitInfo first, increasing ICT)."""
    log = path / "_delta_log"
    latest = max(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())
    last = json.loads((log / f"{latest:020d}.json").read_text().splitlines()[0])["commitInfo"]["inCommitTimestamp"]
    for i in range(1, n + 1):
        v = latest + i
        ict = last + i * 1000
        lines = [
            {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "WRITE",
                            "operationParameters": {"mode": "Append"}, "isBlindAppend": True, "readVersion": v - 1}},
            {"add": {"path": f"part-bench-{v:07d}.parquet", "partitionValues": {}, "size": 1000 + v % 97,
                     "modificationTime": ict, "dataChange": True}},
        ]  # fmt: skip
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


TARGET_PAGE_P95_MS = 80.0
TARGET_API_P95_MS = 25.0
TARGET_FIRST_BYTE_MS = 100.0
TARGET_INCREMENTAL_S = 0.3
TARGET_WEB_WORKER_MB = 250


def first_byte_ms(port: int, path: str, headers: dict[str, str], n: int = 40) -> dict:
    """Median and p95 of the time to the first byte of the response (status line), one
    request at a time on a fresh connection, the body read to the end after the clock stops."""
    import http.client

    times = []
    for _ in range(n):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.connect()
        t0 = time.perf_counter()
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()  # returns once the status line and headers arrived
        times.append((time.perf_counter() - t0) * 1000)
        resp.read()
        conn.close()
        if resp.status != 200:
            raise SystemExit(f"{path}: HTTP {resp.status}")
    times.sort()
    return {"p50": statistics.median(times), "p95": times[int(0.95 * (len(times) - 1))], "n": n}


def tree_rss_mb(pid: int) -> dict:
    """Resident memory of a process and its children (gunicorn's master and workers)."""

    def rss_kb(p: int) -> int:
        try:
            with open(f"/proc/{p}/status") as fh:
                return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            return 0

    children = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            children = [int(x) for x in fh.read().split()]
    except OSError:
        pass
    workers = [rss_kb(c) / 1024 for c in children]
    return {"master_mb": rss_kb(pid) / 1024, "workers_mb": workers, "total_mb": rss_kb(pid) / 1024 + sum(workers)}


def warm_up(url: str, headers: dict[str, str], timeout: int, workers: int = 4) -> float:
    """Ask the history page until 3 x `workers` answers in a row show the readable column
    (gunicorn hands requests to whichever worker accepts first, so a run of answers covers
    them all); seconds it took, or -1 when `timeout` passed first."""
    t0 = time.perf_counter()
    streak = 0
    while streak < 3 * workers:
        if time.perf_counter() - t0 > timeout:
            return -1.0
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as resp:
            pending = b'id="reach-pending"' in resp.read()
        streak = 0 if pending else streak + 1
        if pending:
            time.sleep(0.5)
    return time.perf_counter() - t0


def wrk(url: str, headers: dict[str, str], duration: int, connections: int, lua: Path) -> dict:
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "--timeout", "10s", "-s", str(lua)]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    out = subprocess.run([*cmd, url], capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("JSON "))
    return json.loads(line[5:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="/tmp/deltaweb-bench/web")
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--warm-timeout", type=int, default=600, help="seconds to wait for the workers' reachability")
    ap.add_argument("--json", help="also write the result (the last line printed) to this file")
    ap.add_argument(
        "--threads", type=int, default=1, help="threads per gunicorn worker (> 1: gthread workers, keep-alive)"
    )
    ap.add_argument("--log", type=Path, help="the table to serve (default: the 100,000-commit ICT log)")
    ap.add_argument("--deep-page", type=int, default=1000, help="the deep History page measured")
    ap.add_argument("--api-offset", type=int, default=50_000, help="the deep history API offset measured")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install -y wrk")
    workdir = Path(args.workdir)
    src = args.log or source_log(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    table_dir = workdir / "table"
    subprocess.run(["cp", "-al", str(src), str(table_dir)], check=True)  # hard links: cheap, never written
    # the syncs send their follow-up tasks to a broker, as in production (without one, each
    # send would wait out Celery's connection retries)
    redis = start_redis(workdir)
    atexit.register(os.killpg, redis.pid, signal.SIGTERM)
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir / 'web.sqlite3'}",
        "DELTAWEB_ALLOWED_ROOTS": str(workdir),
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "DELTAWEB_SECRET_KEY": "benchmark-only-secret-key-0123456789",
    }
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from tables.services.catalog import registration
    from tables.services.sync import store as sync

    call_command("migrate", verbosity=0)
    call_command("create_roles", verbosity=0)
    user = get_user_model().objects.create_superuser("bench", password="bench-password-1")
    token = Token.objects.create(user=user).key
    table = registration.register_table("bench", str(table_dir))

    # the worker that computes the reachability answer the syncs ask for, as in production
    celery = subprocess.Popen(
        [str(VENV_BIN / "celery"), "-A", "deltaweb", "worker", "--concurrency=1", "--loglevel=warning",
         "--without-gossip", "--without-mingle", "-Q", "celery"],
        cwd=ROOT, env={**os.environ, "SPARK_START_WITH_WORKER": "0"}, start_new_session=True,
    )  # fmt: skip
    atexit.register(os.killpg, celery.pid, signal.SIGTERM)
    t0 = time.perf_counter()
    cold = sync.sync_table(table.pk)
    cold_s = time.perf_counter() - t0
    incremental = []
    for _ in range(3):
        append_commits(table_dir, 100)
        t0 = time.perf_counter()
        out = sync.sync_table(table.pk)
        incremental.append(time.perf_counter() - t0)
        assert out["newCommits"] == 100, out
    table.refresh_from_db()

    port = free_port()
    server = subprocess.Popen(
        [str(VENV_BIN / "gunicorn"), "deltaweb.wsgi", "-w", "4", "-b", f"127.0.0.1:{port}", "--log-level", "warning",
         *(["-k", "gthread", "--threads", str(args.threads), "--keep-alive", "30"] if args.threads > 1 else [])],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/accounts/login/", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = opener.open(base + "/accounts/login/").read().decode()
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
        data = urllib.parse.urlencode(
            {"username": "bench", "password": "bench-password-1", "csrfmiddlewaretoken": csrf}
        )
        opener.open(urllib.request.Request(base + "/accounts/login/", data.encode(), headers={"Referer": base + "/"}))
        cookies = "; ".join(f"{c.name}={c.value}" for c in jar)
        assert "sessionid" in cookies, "sign-in failed"
        lua = workdir / "p95.lua"
        lua.write_text(LUA)
        total = table.last_synced_version + 1
        cases = [
            ("history API, first 50", f"/api/tables/{table.pk}/history/", {"Authorization": f"Token {token}"}),
            (f"history API, offset {args.api_offset:,}", f"/api/tables/{table.pk}/history/?offset={args.api_offset}",
             {"Authorization": f"Token {token}"}),
            ("history page (HTML), first page", f"/t/{table.slug}/history/", {"Cookie": cookies}),
            (f"history page (HTML), page {args.deep_page:,}", f"/t/{table.slug}/history/?page={args.deep_page}",
             {"Cookie": cookies}),
        ]  # fmt: skip
        results: dict[str, dict] = {}
        failed: dict[str, str] = {}
        warm_s = None
        for name, path, headers in cases:
            if "HTML" in name and warm_s is None:
                warm_s = warm_up(base + f"/t/{table.slug}/history/", {"Cookie": cookies}, args.warm_timeout)
            req = urllib.request.Request(base + path, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:  # warm and check it answers
                    assert resp.status == 200, (path, resp.status)
            except (OSError, AssertionError) as exc:  # reported, the other cases still run
                failed[name] = f"warm-up request failed: {str(exc)[:120]}"
                continue
            results[name] = wrk(base + path, headers, args.duration, args.connections, lua)
        memory = tree_rss_mb(server.pid)
        first_byte = None
        if not any("HTML" in name for name in failed):
            first_byte = first_byte_ms(port, f"/t/{table.slug}/", {"Cookie": cookies})
            memory = tree_rss_mb(server.pid)
        memory["celery_mb"] = tree_rss_mb(celery.pid)["total_mb"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)

    print(f"\nWeb benchmark: a registered table with {total:,} commits, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    print(f"a) cold sync:                  {cold_s:8.2f} s   ({cold['newCommits']:,} commits)")
    inc = statistics.median(incremental)
    print(f"b) incremental sync, 100 new:  {inc:8.3f} s median ({', '.join(f'{x:.3f}' for x in incremental)})"
          f"   target < {TARGET_INCREMENTAL_S} s: {'MET' if inc < TARGET_INCREMENTAL_S else 'MISSED'}")  # fmt: skip
    kind = f"4 gthread workers x {args.threads} threads, keep-alive" if args.threads > 1 else "4 sync workers"
    print(f"c) wrk, {args.connections} connections, {args.duration} s each, gunicorn {kind}:")
    warm_text = "not reached" if warm_s is None or warm_s < 0 else f"{warm_s:.1f} s"
    print(
        f"   every web worker showing the readable column of {total:,} versions (computed by the Celery worker) after: {warm_text}"
    )
    print(f"   {'endpoint':38} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'requests':>9} {'errors':>7}  target p95")
    for name, r in results.items():
        target = TARGET_API_P95_MS if "API" in name else TARGET_PAGE_P95_MS
        ok = "MET" if r["p95"] < target and not r["errors"] and not r["non2xx"] else "MISSED"
        print(f"   {name:38} {r['p50']:8.1f} {r['p95']:8.1f} {r['p99']:8.1f} {r['requests']:9d} "
              f"{r['errors'] + r['non2xx']:7d}  < {target:.0f} ms {ok}")  # fmt: skip
    for name, why in failed.items():
        print(f"   {name:38} {why}  MISSED")
    if first_byte is None:
        print(
            "d) table page first byte: not measured, the page did not answer within 60 s (gunicorn's timeout is 30 s)"
        )
    else:
        fb_ok = "MET" if first_byte["p50"] < TARGET_FIRST_BYTE_MS else "MISSED"
        print(f"d) table page first byte, one client: {first_byte['p50']:.1f} ms median, {first_byte['p95']:.1f} ms p95"
              f"   target < {TARGET_FIRST_BYTE_MS:.0f} ms: {fb_ok}")  # fmt: skip
    web_ok = "MET" if max(memory["workers_mb"], default=0) < TARGET_WEB_WORKER_MB else "MISSED"
    print(
        f"e) web process memory: {memory['total_mb']:.0f} MB resident (master {memory['master_mb']:.0f} MB, "
        f"workers {', '.join(f'{w:.0f}' for w in memory['workers_mb'])} MB)"
        f"   target < {TARGET_WEB_WORKER_MB} MB each: {web_ok}"
    )
    print(f"   Celery worker (computed the reachability): {memory['celery_mb']:.0f} MB resident")  # fmt: skip
    out = json.dumps({"benchmark": "web", "commits": total, "cold_sync_s": cold_s, "incremental_sync_s": incremental,
                      "latency": results, "failed": failed, "first_byte_ms": first_byte, "memory": memory,
                      "warm_s": warm_s, "duration_s": args.duration, "connections": args.connections, "threads": args.threads,
                      "loadavg": os.getloadavg(), "cpus": os.cpu_count(), "at": time.time()})  # fmt: skip
    print(out)
    if args.json:
        Path(args.json).write_text(out + "\n")


if __name__ == "__main__":
    main()
