"""Spark data jobs from the user's click to the first rows in the page, in headless Chromium.

Usage: .venv/bin/python benchmarks/first_preview.py [--workdir DIR] [--reps 3] [--no-beat]

A deployment is started as `make run` starts one (scripts/run.sh), but private to this run
(everything under --workdir, default /tmp/deltaweb-bench/first_preview: its own SQLite
database, redis-server on a free port as the broker, Spark Connect server directory and port,
allowed root, results directory and static files; var/ and a running instance are never
touched): the Spark Connect server (scripts/spark_connect.sh, with a token), `migrate`,
`collectstatic`, `create_roles --demo-users`, `bootstrap_demo`, then a Celery worker that is
a client of the server (DELTAWEB_SPARK_REMOTE), the beat and `manage.py runserver`. The
worker warms its Spark session when it is ready (tables.tasks): the deployment counts as
ready once every process answers and that warm-up has finished (its temporary directory,
deltaweb-warm-up-*, in the worker's own TMPDIR, came and went).

Then a signed-in Chromium page (the demo user `analyst`) clicks, and the time from the click
to the first row of `#rows-table` in the page (playwright's wait_for_selector; the page polls
the job and reloads itself once the job has succeeded) is measured for:

1. the first preview after the start (the demo table's latest version; no job before it);
2. warm: previews of other versions, a keyed row diff of the demo table on `order_id`
   (first and latest versions, then neighbouring ranges), and change data over 100 commits
   of a 106-version table with change data (10,000 rows, then 105 commits cycling append /
   update / delete, as benchmarks/spark_rows.py writes them), registered and synced here;
   each a new job (a finished identical job's result is reused while the table is unchanged,
   so each repetition asks for another version or range; a job that is not new is flagged),
   median of --reps; one reused diff is timed apart, for comparison.

Each case also gives the job's own phases from its row (created -> started: the queue;
started -> finished: the Spark job) and what is left for the page (its polling and reload).
Also: start to ready, and the resident memory of the Celery worker (no JVM in it) and of
the Connect server. Prints a table and, last, one JSON line; writes
benchmarks/results/first_preview.json (report.py's record: command, time, load averages).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from benchmarks.spark_connect import descendants, rss_kib  # noqa: E402  (after the path is set)

PY = sys.executable
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip  # tests/e2e/test_browser.py's
USER, PASSWORD = "analyst", "bench-" + secrets.token_urlsafe(12)
ROWS = "#rows-table tbody tr"  # the first rows of a finished job (tables/_rows.html)
DEMO = "demo-orders"  # bootstrap_demo's table
CDF_NAME, CDF_COMMITS = "bench cdf", 105  # versions 0..105: five different 100-commit ranges (--reps up to 5)
GOALS = {"first_preview": 5.0, "preview": 1.0, "keyed_diff": 2.0, "change_data_100": 1.0}
JOB_TIMEOUT_MS = 180_000
READY_TIMEOUT = 300.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def tree_memory(pid: int) -> dict[str, Any]:
    """Resident memory of a process with its descendants, and whether a JVM is among them."""
    procs = [pid, *descendants(pid)]
    names = []
    for p in procs:
        try:
            names.append(Path(f"/proc/{p}/comm").read_text().strip())
        except OSError:
            pass
    return {"rss_mib": round(sum(rss_kib(p) for p in procs) / 1024, 1), "processes": len(procs), "jvm": "java" in names}


class Deployment:
    """The processes `make run` starts, each in its own process group, all under `workdir`."""

    def __init__(self, workdir: Path, beat: bool) -> None:
        self.workdir, self.beat = workdir, beat
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs = workdir / "log"
        self.worker_tmp = workdir / "worker-tmp"
        self.web_port = free_port()
        self.base = f"http://127.0.0.1:{self.web_port}"
        self.connect_dir = workdir / "spark-connect"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
            "DATABASE_URL": f"sqlite:///{workdir / 'deltaweb.sqlite3'}",
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0",
            "DELTAWEB_ALLOWED_ROOTS": str(workdir / "tables"),
            "DELTAWEB_RESULTS_DIR": str(workdir / "results"),
            "DELTAWEB_STATIC_ROOT": str(workdir / "static"),
            "DELTAWEB_SECRET_KEY": "benchmark-only-" + secrets.token_urlsafe(32),
            "DELTAWEB_DEMO_PASSWORD": PASSWORD,
            "DELTAWEB_SPARK_CONNECT_TOKEN": secrets.token_urlsafe(32),
            "SPARK_CONNECT_DIR": str(self.connect_dir),
            "SPARK_CONNECT_PORT": str(free_port()),
            # what scripts/run.sh exports for its processes
            "DELTAWEB_DEBUG": "1",
            "DELTAWEB_STATIC_AUTOREFRESH": "0",
            "DELTAWEB_STATIC_FINDERS": "0",
        }
        self.env.pop("DELTAWEB_SPARK_REMOTE", None)  # set once this run's server answers

    def spawn(self, name: str, args: list[str], **env: str) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("w")
        proc = subprocess.Popen(
            args, cwd=ROOT, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def manage(self, *args: str) -> str:
        done = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr[-2000:]}")
        return done.stdout

    def connect_script(self, command: str) -> subprocess.CompletedProcess:
        script = str(ROOT / "scripts" / "spark_connect.sh")
        return subprocess.run(["bash", script, command], cwd=ROOT, env=self.env, capture_output=True, text=True)

    def stop(self) -> None:
        """Every process group started here, then the Connect server (by its own script)."""
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.procs.clear()
        if (self.connect_dir / "server.pid").exists():
            self.connect_script("stop")


def start(dep: Deployment) -> dict[str, float]:
    """scripts/run.sh's steps in its order; seconds from the start at which each was done."""
    t0, wall0 = time.perf_counter(), time.time()
    marks: dict[str, float] = {}
    dep.logs.mkdir(parents=True)
    dep.worker_tmp.mkdir()
    redis_port = dep.env["CELERY_BROKER_URL"].rsplit(":", 1)[1].split("/")[0]
    dep.spawn("redis", ["redis-server", "--bind", "127.0.0.1", "--port", redis_port, "--save", "",
                        "--appendonly", "no", "--dir", str(dep.workdir)])  # fmt: skip
    _wait_port(int(redis_port))  # bootstrap_demo's sync sends its follow-up tasks to it
    # started first and waited for last, as run.sh does (a JVM takes a while)
    connect = dep.spawn("spark-connect-start", ["bash", str(ROOT / "scripts" / "spark_connect.sh"), "start"])
    dep.manage("migrate", "--noinput")
    dep.manage("collectstatic", "--noinput")
    users = dep.manage("create_roles", "--demo-users")
    assert f"user {USER}: created" in users, users
    dep.manage("bootstrap_demo")
    marks["setup_done_s"] = time.perf_counter() - t0
    if connect.wait(timeout=READY_TIMEOUT) != 0:
        raise SystemExit(
            f"the Spark Connect server did not start: {(dep.logs / 'spark-connect-start.log').read_text()}"
        )
    del dep.procs["spark-connect-start"]  # its server runs in its own session, stopped by the script
    dep.env["DELTAWEB_SPARK_REMOTE"] = (dep.logs / "spark-connect-start.log").read_text().split()[-1]
    # the script writes the URL file the moment the port answers (often before the setup is done)
    marks["connect_answering_s"] = (dep.connect_dir / "url").stat().st_mtime - wall0
    dep.spawn("worker", [PY, "-m", "celery", "-A", "deltaweb", "worker", "--loglevel=info", "--concurrency=2"],
              TMPDIR=str(dep.worker_tmp))  # fmt: skip
    if dep.beat:
        dep.spawn("beat", [PY, "-m", "celery", "-A", "deltaweb", "beat", "--loglevel=info",
                           "--schedule", str(dep.workdir / "celerybeat-schedule")])  # fmt: skip
    dep.spawn("web", [PY, "manage.py", "runserver", f"127.0.0.1:{dep.web_port}", "--noreload", "--nostatic"])
    marks.update(wait_ready(dep, t0))
    return marks


def wait_ready(dep: Deployment, t0: float) -> dict[str, float]:
    """Seconds from t0 until the web server and the worker answer, and until the worker's
    Spark warm-up has come and gone (its temporary directory, in the worker's TMPDIR)."""
    from deltaweb.celery import app

    marks: dict[str, float] = {}
    warm_seen = False
    while time.perf_counter() - t0 < READY_TIMEOUT:
        for name, proc in dep.procs.items():
            if proc.poll() is not None:
                raise SystemExit(f"{name} stopped while starting: see {dep.logs / (name + '.log')}")
        now = time.perf_counter() - t0
        if "web_answering_s" not in marks and _answers(dep.base + "/accounts/login/"):
            marks["web_answering_s"] = now
        if "worker_answering_s" not in marks and app.control.ping(timeout=0.5):
            marks["worker_answering_s"] = now
        warming = any(dep.worker_tmp.glob("deltaweb-warm-up-*"))
        warm_seen = warm_seen or warming
        if warm_seen and not warming and "warmed_s" not in marks:
            marks["warmed_s"] = now
        if "did not start with the worker" in (dep.logs / "worker.log").read_text():
            raise SystemExit(f"the worker's Spark session did not start: see {dep.logs / 'worker.log'}")
        if len(marks) == 3:
            marks["ready_s"] = max(marks.values())
            return marks
        time.sleep(0.1)
    raise SystemExit(f"not ready within {READY_TIMEOUT:.0f} s: {marks}")


def _wait_port(port: int, timeout: float = 10.0) -> None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing answers on port {port}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def make_cdf_table(path: Path) -> None:
    """10,000 rows, then CDF_COMMITS commits with change data (benchmarks/spark_rows.py's)."""
    import numpy as np
    from deltalake import write_deltalake

    from benchmarks.spark_rows import SEED, big_table, write_changes_directly

    rng = np.random.default_rng(SEED)
    write_deltalake(str(path), big_table(10_000, rng), configuration={"delta.enableChangeDataFeed": "true"})
    write_changes_directly(path, CDF_COMMITS, 1000, rng)


def register_cdf(path: Path) -> str:
    """Register and sync the change-data table (as the register page's job does); its slug."""
    from tables.services.catalog.registration import register_table
    from tables.services.sync.store import sync_table

    table = register_table(CDF_NAME, str(path))
    sync_table(table.pk)
    table.refresh_from_db()
    assert table.last_synced_version == CDF_COMMITS, table.last_synced_version
    return table.slug


def wait_idle(timeout: float = 120.0) -> float:
    """Seconds until no job is queued or running (the sync's follow-up work), plus a second."""
    from tables.models import Job

    t0 = time.perf_counter()
    while Job.objects.filter(status__in=["queued", "running"]).exists():
        if time.perf_counter() - t0 > timeout:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    return time.perf_counter() - t0


def job_phases(pk: int) -> dict[str, Any]:
    """The job's row: its kind, status, whether it ran now, and its queue and run times."""
    from tables.models import Job

    job = Job.objects.get(pk=pk)
    out: dict[str, Any] = {"job": pk, "kind": job.kind, "status": job.status, "params": job.params}
    if job.started_at and job.finished_at:
        out["queued_s"] = round((job.started_at - job.created_at).total_seconds(), 3)
        out["ran_s"] = round((job.finished_at - job.started_at).total_seconds(), 3)
    out["rows_total"] = (job.result or {}).get("total")
    return out


def last_job_pk() -> int:
    from tables.models import Job

    last = Job.objects.order_by("-pk").values_list("pk", flat=True).first()
    return last or 0


def click_to_rows(page, url: str, button: str, keys: str | None = None) -> dict[str, Any]:
    """Open `url`, then time the click on `button` until the first result row is in the page;
    the job it ran (the page's ?preview= / ?rowjob=), and whether it is a new one."""
    from urllib.parse import parse_qs, urlparse

    page.goto(url)
    if page.locator(ROWS).count():
        raise SystemExit(f"{url} shows rows before the click (a cached result)")
    if keys is not None:
        page.locator("#row-keys").first.fill(keys)
    before = last_job_pk()
    # the job is named in the URL the start redirects to (the reload after it may not name it)
    seen: list[str] = []
    on_nav = lambda frame: seen.append(frame.url) if frame == page.main_frame else None  # noqa: E731
    page.on("framenavigated", on_nav)
    load = loadavg()[0]
    t0 = time.perf_counter()
    page.locator(button).first.click()
    page.wait_for_selector(ROWS, timeout=JOB_TIMEOUT_MS)
    elapsed = time.perf_counter() - t0
    page.remove_listener("framenavigated", on_nav)
    queries = [parse_qs(urlparse(u).query) for u in seen]
    pk = next(int((q.get("preview") or q.get("rowjob"))[0]) for q in queries if "preview" in q or "rowjob" in q)
    phases, fresh = job_phases(pk), pk > before
    if not fresh:  # an earlier job's result: its queue and run times are not this click's
        for key in ("queued_s", "ran_s"):
            phases.pop(key, None)
    page_s = elapsed - phases.get("queued_s", 0) - phases.get("ran_s", 0)
    return {"s": round(elapsed, 3), "fresh": fresh, **phases, "page_s": round(page_s, 3), "load": load}


def browser_session(base: str):
    """A Chromium page signed in as the demo analyst (tests/e2e/test_browser.py's way)."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the ORM calls here are plain sync
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(60_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(base + "/accounts/login/")
    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda u: "/accounts/login/" not in u)

    def close() -> None:
        browser.close()
        pw.stop()

    return page, errors, close


def cases(base: str, cdf: str, demo_latest: int, reps: int) -> list[tuple[str, str, str, str | None]]:
    """The warm cases: (name, page URL, button, key columns), each a job not asked before."""
    out: list[tuple[str, str, str, str | None]] = []
    for i in range(1, reps + 1):
        out.append(("preview", f"{base}/t/{DEMO}/v/{demo_latest - i}/", "#preview-rows", None))
    diffs = [(0, demo_latest), (0, demo_latest - 1), (1, demo_latest), (1, demo_latest - 1), (0, demo_latest - 2)]
    for a, b in diffs[:reps]:
        out.append(("keyed_diff", f"{base}/t/{DEMO}/diff/?from={a}&to={b}", "#row-diff", "order_id"))
    for i in range(1, reps + 1):  # versions i..i+99: 100 commits each
        out.append(("change_data_100", f"{base}/t/{cdf}/diff/?from={i}&to={i + 99}", "#change-data", None))
    return out


def measure(dep: Deployment, workdir: Path, reps: int) -> dict[str, Any]:
    """The first preview right after the start, then the warm cases; every run's details."""
    page, errors, close = browser_session(dep.base)
    try:
        demo_latest = _demo_latest()
        runs: dict[str, list[dict[str, Any]]] = {}
        first = click_to_rows(page, f"{dep.base}/t/{DEMO}/v/{demo_latest}/", "#preview-rows")
        runs["first_preview"] = [first]
        cdf = register_cdf(workdir / "tables" / "cdf")
        idle_s = wait_idle()
        for name, url, button, keys in cases(dep.base, cdf, demo_latest, reps):
            runs.setdefault(name, []).append(click_to_rows(page, url, button, keys))
        # the same diff again: the finished result is reused (no Spark job), for comparison
        again = f"{dep.base}/t/{DEMO}/diff/?from=0&to={demo_latest}"
        runs["keyed_diff_reused"] = [click_to_rows(page, again, "#row-diff", "order_id")]
        return {"runs": runs, "page_errors": errors, "cdf_sync_idle_s": round(idle_s, 2)}
    finally:
        close()


def _demo_latest() -> int:
    from tables.models import Table

    return Table.objects.get(slug=DEMO).last_synced_version


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per case: median seconds, every run, the goal and MET/MISSED, and whether each job was new."""
    out = {}
    for name, rs in runs.items():
        med = statistics.median(r["s"] for r in rs)
        goal = GOALS.get(name)
        out[name] = {
            "median_s": round(med, 3),
            "runs_s": [r["s"] for r in rs],
            "goal_s": goal,
            "met": None if goal is None else med <= goal,
            "all_fresh": all(r["fresh"] for r in rs),
            "job_ran_s": [r.get("ran_s") for r in rs],
            "queued_s": [r.get("queued_s") for r in rs],
            "page_s": [r["page_s"] for r in rs],
            "load": [r["load"] for r in rs],
        }
    return out


def report(result: dict[str, Any]) -> None:
    m = result["marks"]
    print(f"\nClick to first rows, {os.cpu_count()} CPUs, load {result['loadavg_before']} -> {result['loadavg_after']}")
    print(f"start to ready: {m['ready_s']:.1f} s (web {m['web_answering_s']:.1f} s, worker "
          f"{m['worker_answering_s']:.1f} s, Connect server {m['connect_answering_s']:.1f} s, "
          f"warm-up done {m['warmed_s']:.1f} s; setup steps {m['setup_done_s']:.1f} s)")  # fmt: skip
    print(f"{'case':22}{'median s':>9}{'goal':>7}  {'':7}{'runs (s)':24}  {'Spark job (s)':22}  {'page (s)':20}  load")
    for name, s in result["cases"].items():
        goal = f"{s['goal_s']:.0f} s" if s["goal_s"] else "-"
        verdict = "" if s["met"] is None else ("MET" if s["met"] else "MISSED")
        fresh = "" if s["all_fresh"] else " (reused)"
        ran = ", ".join("-" if x is None else f"{x:.2f}" for x in s["job_ran_s"])
        print(f"{name:22}{s['median_s']:9.2f}{goal:>7}  {verdict:7}"
              f"{', '.join(f'{x:.2f}' for x in s['runs_s']) + fresh:24}  {ran:22}  "
              f"{', '.join(f'{x:.2f}' for x in s['page_s']):20}  {', '.join(f'{x:.1f}' for x in s['load'])}")  # fmt: skip
    mem = result["memory"]
    print(f"memory: Celery worker {mem['worker']['rss_mib']:.0f} MiB (JVM in it: {mem['worker']['jvm']}), "
          f"Connect server {mem['connect_server']['rss_mib']:.0f} MiB, web {mem['web']['rss_mib']:.0f} MiB")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/deltaweb-bench/first_preview"))
    ap.add_argument("--reps", type=int, default=3, choices=range(1, 6))
    ap.add_argument("--no-beat", action="store_true", help="no celery beat (make run starts one)")
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    workdir = args.workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    (workdir / "tables").mkdir(parents=True)
    make_cdf_table(workdir / "tables" / "cdf")  # files only: registered after the first preview
    dep = Deployment(workdir, beat=not args.no_beat)
    atexit.register(dep.stop)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # atexit's stop runs on a plain kill too
    os.environ.update({k: v for k, v in dep.env.items() if k != "DELTAWEB_SPARK_REMOTE"})
    import django

    django.setup()
    load_before = loadavg()
    marks = start(dep)
    measured = measure(dep, workdir, args.reps)
    memory = {
        "worker": tree_memory(dep.procs["worker"].pid),
        "connect_server": tree_memory(int((dep.connect_dir / "server.pid").read_text())),
        "web": tree_memory(dep.procs["web"].pid),
    }
    cases = summarize(measured["runs"])
    headline = {f"{k}_s": v["median_s"] for k, v in cases.items()}  # what report.py's table shows first
    headline.update(ready_s=round(marks["ready_s"], 1), worker_rss_mib=memory["worker"]["rss_mib"],
                    connect_server_rss_mib=memory["connect_server"]["rss_mib"])  # fmt: skip
    result = {"benchmark": "first_preview", "headline": headline, "cases": cases, "marks": _rounded(marks),
              "memory": memory, "runs": measured["runs"], "page_errors": measured["page_errors"],
              "cdf_sync_idle_s": measured["cdf_sync_idle_s"], "beat": not args.no_beat, "reps": args.reps,
              "loadavg_before": load_before, "loadavg_after": loadavg(), "cpus": os.cpu_count()}  # fmt: skip
    dep.stop()
    report(result)
    write_record(result, sys.argv[1:])
    print(json.dumps(result))


def _rounded(marks: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in marks.items()}


def write_record(result: dict[str, Any], argv: list[str]) -> None:
    """benchmarks/results/first_preview.json, in benchmarks/report.py's record format."""
    record = {
        "name": "first_preview",
        "command": " ".join([".venv/bin/python", "benchmarks/first_preview.py", *argv]),
        "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_before": result["loadavg_before"],
        "loadavg_after": result["loadavg_after"],
        "result": result,
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "first_preview.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
