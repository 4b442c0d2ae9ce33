"""Spark through a Spark Connect server against Spark in the worker's own process.

Usage: .venv/bin/python benchmarks/spark_connect.py [--reps 3] [--workdir DIR] [--idle 60]

The same three data jobs, each timed from the call to the first page of rows read back from
its result (what a request waits for once its job runs: the job function, then
`tables.spark.results.read_page(path, 0, 100)`), median of `--reps` runs after one warm-up
run of each, in a worker-like process of each kind:

- classic: `get_spark()` starts a JVM inside the process (local[*], tables.spark.session);
- connect: `get_spark(remote=...)` is a client of a Spark Connect server started here with
  scripts/spark_connect.sh (local[*], the same configuration), no JVM in the process.

Jobs: a warm preview of the demo table's latest version (tables.services.catalog.demo, what `make run`
registers); a keyed diff of the demo table between its first and latest versions on
`order_id`; change data over 100 commits of a table with change data (10,000 rows, then 100
commits cycling append 1,000 / update 100 / delete 100, written as benchmarks/spark_rows.py
writes them). Also: the session's start (a new process, to its first answer), and the resident
memory (RSS) of the process and its children, the JVM included, after the runs; for Connect
the server's RSS beside it (its JVM is shared by every worker), right after the runs and again
after `--idle` seconds with nothing asked of it.

Each kind runs in a fresh process (PySpark picks its functions' implementation per process).
Prints a table, writes benchmarks/results/spark_connect.json, and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PORT = "15202"  # apart from `make run`'s server (15002) and the tests' (15102)
SERVER_DIR = ROOT / "var" / "spark-connect-bench"


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """The process's children, their children, ... (the JVM PySpark starts is one)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_rss_mib(pid: int) -> float:
    return sum(rss_kib(p) for p in [pid, *descendants(pid)]) / 1024


# --- the tables ---------------------------------------------------------------------------------------


def make_tables(workdir: Path) -> dict[str, str]:
    """The demo table and a 100-commit change-data table under `workdir`."""
    import numpy as np
    from deltalake import write_deltalake

    from benchmarks.spark_rows import SEED, big_table, write_changes_directly
    from tables.services.catalog.demo import build_demo_table

    demo = build_demo_table(workdir / "demo")
    cdf = workdir / "cdf"
    rng = np.random.default_rng(SEED)
    write_deltalake(str(cdf), big_table(10_000, rng), configuration={"delta.enableChangeDataFeed": "true"})
    write_changes_directly(cdf, 100, 1000, rng)
    return {"demo": str(demo), "cdf": str(cdf)}


# --- one kind, in its own process -----------------------------------------------------------------------


def _jobs(tables: dict[str, str]):
    from deltalake import DeltaTable

    from tables.spark.jobs.changes import change_data
    from tables.spark.jobs.preview import write_preview
    from tables.spark.jobs.rowdiff import keyed_diff

    demo_latest = DeltaTable(tables["demo"]).version()
    cdf_latest = DeltaTable(tables["cdf"]).version()
    return {
        "preview": lambda spark, out: write_preview(spark, tables["demo"], demo_latest, out),
        "keyed_diff": lambda spark, out: keyed_diff(spark, tables["demo"], 0, demo_latest, ["order_id"], out),
        "change_data_100": lambda spark, out: change_data(spark, tables["cdf"], 0, cdf_latest, out),
    }


def child(kind: str, tables: dict[str, str], remote: str | None, reps: int, workdir: Path) -> dict:
    from tables.spark.results import read_page
    from tables.spark.session import get_spark

    t = time.perf_counter()
    spark = get_spark(remote=remote) if kind == "connect" else get_spark()
    spark.range(1).count()
    out: dict = {"kind": kind, "session_start_s": time.perf_counter() - t}
    for name, job in _jobs(tables).items():
        times = []
        for rep in range(reps + 1):  # the first one warms the job's code up
            target = workdir / f"{kind}-{name}-{rep}"
            t = time.perf_counter()
            result = job(spark, target)
            page = read_page(result["path"], 0, 100)
            elapsed = time.perf_counter() - t
            assert page["rows"] or name == "keyed_diff", (name, result)
            if rep:
                times.append(elapsed)
            shutil.rmtree(target, ignore_errors=True)
        out[f"{name}_s"] = sorted(times)[len(times) // 2]
        out[f"{name}_runs_s"] = times
        out[f"{name}_rows"] = result.get("total")
    out["worker_rss_mib"] = tree_rss_mib(os.getpid())
    return out


# --- the parent: tables, the server, both kinds ------------------------------------------------------------


def _script(command: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARK_CONNECT_PORT": PORT, "SPARK_CONNECT_DIR": str(SERVER_DIR)}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "spark_connect.sh"), command], env=env, capture_output=True, text=True
    )


def run_kind(kind: str, tables: dict[str, str], remote: str | None, reps: int, workdir: Path) -> dict:
    args = [sys.executable, __file__, "--child", kind, "--tables", json.dumps(tables), "--reps", str(reps)]
    args += ["--workdir", str(workdir)] + (["--remote", remote] if remote else [])
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"the {kind} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(results: dict) -> None:
    classic, connect = results["classic"], results["connect"]
    print(f"{'':34}{'classic':>12}{'connect':>12}{'ratio':>8}")
    for key, label in (
        ("session_start_s", "session start (s)"),
        ("preview_s", "warm preview (s)"),
        ("keyed_diff_s", "keyed diff, demo table (s)"),
        ("change_data_100_s", "change data, 100 commits (s)"),
        ("worker_rss_mib", "worker RSS (MiB)"),
    ):
        a, b = classic[key], connect[key]
        print(f"{label:34}{a:12.2f}{b:12.2f}{b / a:8.2f}")
    print(f"{'Connect server RSS (MiB, shared)':34}{'':12}{results['server_rss_mib']:12.1f}")
    idle = f"  ... after {results['idle_s']:.0f} s idle"
    print(f"{idle:34}{'':12}{results['server_idle_rss_mib']:12.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--idle", type=float, default=60.0, help="seconds idle before the server's RSS is read again")
    ap.add_argument("--child", choices=("classic", "connect"), help=argparse.SUPPRESS)
    ap.add_argument("--tables", help=argparse.SUPPRESS)
    ap.add_argument("--remote", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        os.environ["DELTAWEB_SPARK_WARM_UP"] = "1"
        out = child(args.child, json.loads(args.tables), args.remote, args.reps, args.workdir)
        print(json.dumps(out))
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="deltaweb-bench-connect-"))
    tables = make_tables(workdir)
    started = _script("start")
    if started.returncode != 0:
        raise SystemExit(f"the Spark Connect server did not start: {started.stderr}")
    remote = started.stdout.strip().splitlines()[-1]
    try:
        load = os.getloadavg()[0]
        results = {
            "classic": run_kind("classic", tables, None, args.reps, workdir),
            "connect": run_kind("connect", tables, remote, args.reps, workdir),
        }
        server_pid = int((SERVER_DIR / "server.pid").read_text())
        results["server_rss_mib"] = tree_rss_mib(server_pid)
        time.sleep(args.idle)  # what it holds between clicks: after the runs, nothing asked of it
        results["server_idle_rss_mib"] = tree_rss_mib(server_pid)
        results["idle_s"] = args.idle
        results["load"] = [load, os.getloadavg()[0]]
    finally:
        _script("stop")
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report(results)
    from benchmarks.report import store  # the record every result file has (command, time, load)

    store(
        "spark_connect", results, " ".join([".venv/bin/python", "benchmarks/spark_connect.py", *sys.argv[1:]]), (load,)
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
