"""SQL at a version: a GROUP BY over a million-row version on a warm Spark Connect server, beside
delta-rs + DuckDB running the same statement.

Usage: .venv/bin/python benchmarks/query.py [--rows 1000000] [--reps 5] [--workdir DIR] [--no-api]

The table is generated once under DIR/data (default /tmp/deltaweb-bench/query) with deltalake's
write_deltalake: version 0 is --rows rows (id long, region string of 8 values, amount double,
day date over a year), then 3 x --reps + 1 versions each append --rows / 1000 rows, so every
version holds about --rows rows and the versions asked of the app are all new ones (an
identical query over the same versions reuses the finished job). The statement:

    SELECT region, count(*) AS n, round(sum(amount), 2) AS total, avg(amount) AS mean,
           min(day) AS first_day, max(day) AS last_day
    FROM sales VERSION AS OF <v> GROUP BY region ORDER BY region

A deployment is started as `make run` starts one, private to this run (benchmarks/
first_preview.py's Deployment, under DIR/run): the Spark Connect server, migrate, roles, the
demo table, a Celery worker that is a client of the server (its Spark warm-up done before the
clock starts), the beat and the web server; the table is registered and synced. Measured, one
after the other, each a median of --reps runs on different versions:

  a) ours, direct: `parse_statement` + `run_query` on a Spark Connect session of this process
     (warmed as the worker's is; its first query timed apart, then --warm untimed runs of each
     statement, the server's JIT still compiling the first ones), to the first page of rows read
     back from the result (`read_page(path, 0, 100)`), as benchmarks/spark_connect.py times jobs;
  b) ours, end to end through the API when `POST /api/tables/{id}/query/` is routed: the POST,
     polling `/api/jobs/{id}/` every 50 ms until the job succeeded, then the first page of
     `/api/jobs/{id}/results/` (goal: the first rows within 2 s of the click), with the job's
     own queue and run times from its row; the first query after the start apart;
  c) the peer: delta-rs `DeltaTable(path, version=v)` read into Arrow (`to_pyarrow_table()`,
     and lazily with `to_pyarrow_dataset()`) and DuckDB running the same statement, transpiled
     by sqlglot from Spark's dialect to DuckDB's; the rows are compared with ours.

Then the two-version comparison: the same query at versions v and v-1 run one after the other
(two run_query calls; two API jobs; the peer twice), against one query's time (goal: at most
2x); when `POST /api/tables/{id}/query/compare/` is routed, also the comparison as the app
offers it (one POST starts the query at both versions, both jobs polled, then the comparison
read from its `compareUrl`); and for reference one statement over both versions (a FULL OUTER
JOIN of the two GROUP BYs). Ratios are ours / peer (the faster of the two peer reads). Prints a table, writes
benchmarks/results/query.json (report.py's record: command, time, load) and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from benchmarks.first_preview import USER, Deployment, loadavg, start, tree_memory, wait_idle  # noqa: E402
from benchmarks.spark_connect import rss_kib  # noqa: E402

NAME = "sales"
REGIONS = ["north", "south", "east", "west", "central", "islands", "overseas", "online"]
SQL = (
    "SELECT region, count(*) AS n, round(sum(amount), 2) AS total, avg(amount) AS mean, "
    "min(day) AS first_day, max(day) AS last_day FROM sales VERSION AS OF {v} GROUP BY region ORDER BY region"
)
COMPARE_SQL = (
    "SELECT coalesce(a.region, b.region) AS region, a.n AS n_before, b.n AS n_after, "
    "round(coalesce(b.total, 0) - coalesce(a.total, 0), 2) AS total_change FROM "
    "(SELECT region, count(*) AS n, sum(amount) AS total FROM sales VERSION AS OF {a} GROUP BY region) a "
    "FULL OUTER JOIN (SELECT region, count(*) AS n, sum(amount) AS total FROM sales VERSION AS OF {b} "
    "GROUP BY region) b ON a.region = b.region ORDER BY region"
)
GOAL_API_S = 2.0  # the first rows within 2 s of the click
GOAL_PAIR_X = 2.0  # two versions at most twice one
POLL_S = 0.05
JOB_TIMEOUT_S = 180.0


# --- the table ------------------------------------------------------------------------------------------


def batch(start: int, n: int, seed: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    day0 = np.datetime64("2026-01-01", "D")
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "region": pa.array(np.array(REGIONS)[rng.integers(0, len(REGIONS), n)]),
            "amount": pa.array(np.round(rng.gamma(2.0, 50.0, n), 2)),
            "day": pa.array(day0 + rng.integers(0, 365, n).astype("timedelta64[D]")),
        }
    )


def make_table(data: Path, rows: int, versions: int) -> tuple[Path, float]:
    """DIR/data/sales: version 0 of `rows` rows, then appends of rows / 1000 up to `versions` - 1
    (kept between runs while rows and versions are the same); its path and seconds spent."""
    path, marker = data / NAME, data / "gen.json"
    want = {"rows": rows, "versions": versions}
    if marker.exists() and json.loads(marker.read_text()) == want and path.is_dir():
        return path, 0.0
    from deltalake import write_deltalake

    t0 = time.perf_counter()
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    print(f"generating {path}: {rows:,} rows, then {versions - 1} appends of {max(1, rows // 1000):,}", flush=True)
    write_deltalake(str(path), batch(0, rows, 0))
    step = max(1, rows // 1000)
    for v in range(1, versions):
        write_deltalake(str(path), batch(rows + (v - 1) * step, step, v), mode="append")
    marker.write_text(json.dumps(want))
    return path, time.perf_counter() - t0


# --- measuring ------------------------------------------------------------------------------------------


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def parse(sql: str, path: Path):
    """The statement checked and rewritten as the app does, `sales` bound to the table's path."""
    from tables.services.query.statement import Reference, parse_statement

    def resolve(ref: Reference):
        assert ref.name == NAME and ref.by == "version", ref
        return (str(path), ref.value), (str(path), ref.value)

    parsed = parse_statement(sql, resolve)
    return parsed, {i: b for i, b in enumerate(parsed.bindings)}


def normal_rows(rows: list[dict]) -> list[tuple]:
    """Rows comparable across engines: floats to 7 significant digits (sums in another order), dates as ISO text."""
    out = []
    for r in rows:
        out.append(tuple(float(f"{v:.7g}") if isinstance(v, float) else str(v) for v in r.values()))
    return sorted(out)


class Ours:
    """run_query on this process's Spark Connect session, to the first page read back."""

    def __init__(self, remote: str, path: Path, out: Path) -> None:
        from tables.spark.session import get_spark

        t0 = time.perf_counter()
        self.spark = get_spark(remote=remote)  # checked and warmed as the worker's session is
        self.session_s = time.perf_counter() - t0
        self.path, self.out, self.n = path, out, 0

    def run(self, sql: str) -> tuple[float, list[dict]]:
        from tables.spark.jobs.query import run_query
        from tables.spark.results import read_page

        self.n += 1
        target = self.out / f"q{self.n}"
        t0 = time.perf_counter()
        parsed, frames = parse(sql, self.path)
        result = run_query(self.spark, frames, parsed.statement, target, 100_000, 300, f"bench-query-{self.n}")
        page = read_page(result["path"], 0, 100)
        elapsed = time.perf_counter() - t0
        shutil.rmtree(target, ignore_errors=True)
        return elapsed, page["rows"]


class Peer:
    """delta-rs reads the version into Arrow, DuckDB runs the transpiled statement."""

    def __init__(self, path: Path) -> None:
        import duckdb

        self.path = path
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")

    def run(self, sql: str, lazy: bool) -> tuple[float, list[dict]]:
        import sqlglot
        from deltalake import DeltaTable

        t0 = time.perf_counter()
        parsed, frames = parse(sql, self.path)
        for i, (location, version) in frames.items():
            dt = DeltaTable(location, version=version)
            self.con.register(f"__dw_t{i}", dt.to_pyarrow_dataset() if lazy else dt.to_pyarrow_table())
        duck = sqlglot.transpile(parsed.statement, read="spark", write="duckdb")[0]
        rows = self.con.sql(duck).to_arrow_table().to_pylist()
        elapsed = time.perf_counter() - t0
        for i in frames:
            self.con.unregister(f"__dw_t{i}")
        return elapsed, rows


class Api:
    """The app's query endpoint through its web server, signed in with a token of the demo analyst."""

    def __init__(self, base: str, table_pk: int) -> None:
        from django.contrib.auth import get_user_model
        from rest_framework.authtoken.models import Token

        user = get_user_model().objects.get(username=USER)
        self.token = Token.objects.get_or_create(user=user)[0].key
        self.base, self.table_pk = base, table_pk

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Token {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read() or b"{}")
            except ValueError:
                return exc.code, {}

    def run(self, sql: str) -> dict[str, Any]:
        """The click (the POST) to the first page of rows; the job's phases from its row."""
        from tables.models import Job

        t0 = time.perf_counter()
        status, job = self.call("POST", f"/api/tables/{self.table_pk}/query/", {"sql": sql})
        if status >= 300 or "id" not in job:
            raise RuntimeError(f"POST query: HTTP {status} {json.dumps(job)[:300]}")
        polls = 0
        while job.get("status") not in ("succeeded", "failed", "cancelled"):
            if time.perf_counter() - t0 > JOB_TIMEOUT_S:
                raise RuntimeError(f"job {job['id']} not done after {JOB_TIMEOUT_S:.0f} s: {job.get('stage')}")
            time.sleep(POLL_S)
            polls += 1
            status, job = self.call("GET", f"/api/jobs/{job['id']}/")
        if job["status"] != "succeeded":
            raise RuntimeError(f"job {job['id']} {job['status']}: {json.dumps(job.get('result'))[:300]}")
        status, page = self.call("GET", f"/api/jobs/{job['id']}/results/?limit=100")
        elapsed = time.perf_counter() - t0
        if status != 200 or not page.get("rows"):
            raise RuntimeError(f"results of job {job['id']}: HTTP {status} {json.dumps(page)[:300]}")
        row = Job.objects.get(pk=job["id"])
        out: dict[str, Any] = {"s": round(elapsed, 3), "job": row.pk, "polls": polls, "load": loadavg()[0]}
        out["reused"] = bool(job.get("reused"))
        if row.started_at and row.finished_at:
            out["queued_s"] = round((row.started_at - row.created_at).total_seconds(), 3)
            out["ran_s"] = round((row.finished_at - row.started_at).total_seconds(), 3)
            out["http_s"] = round(elapsed - out["queued_s"] - out["ran_s"], 3)
        out["rows"] = page["rows"]
        return out

    def compare(self, sql: str, a: int, b: int) -> dict[str, Any]:
        """The comparison endpoint: one POST starts the query at `a` and at `b`; polled until both
        succeeded, then the comparison read (the click to the compared rows)."""
        from urllib.parse import urlparse

        from tables.models import Job

        t0 = time.perf_counter()
        status, started = self.call(
            "POST", f"/api/tables/{self.table_pk}/query/compare/", {"sql": sql, "from": str(a), "to": str(b)}
        )
        if status >= 300 or len(started.get("jobs", [])) != 2:
            raise RuntimeError(f"POST compare: HTTP {status} {json.dumps(started)[:300]}")
        pks = [j["id"] for j in started["jobs"]]
        states = {j["id"]: j["status"] for j in started["jobs"]}
        while any(x not in ("succeeded", "failed", "cancelled") for x in states.values()):
            if time.perf_counter() - t0 > JOB_TIMEOUT_S:
                raise RuntimeError(f"jobs {pks} not done after {JOB_TIMEOUT_S:.0f} s")
            time.sleep(POLL_S)
            for pk in pks:
                if states[pk] not in ("succeeded", "failed", "cancelled"):
                    states[pk] = self.call("GET", f"/api/jobs/{pk}/")[1].get("status")
        if any(x != "succeeded" for x in states.values()):
            raise RuntimeError(f"compare jobs {states}")
        status, answer = self.call("GET", urlparse(started["compareUrl"]).path)
        elapsed = time.perf_counter() - t0
        if status != 200:
            raise RuntimeError(f"comparison {started['compareUrl']}: HTTP {status} {json.dumps(answer)[:300]}")
        rows = [Job.objects.get(pk=pk) for pk in pks]
        ran = [round((r.finished_at - r.started_at).total_seconds(), 3) for r in rows]
        # the two jobs overlap when the worker runs them side by side (--concurrency=2)
        span = round((max(r.finished_at for r in rows) - min(r.started_at for r in rows)).total_seconds(), 3)
        return {"s": round(elapsed, 3), "jobs": pks, "ran_s": ran, "spark_span_s": span, "load": loadavg()[0],
                "counts": answer.get("counts")}  # fmt: skip


def routed(path: str) -> bool:
    from django.urls import Resolver404, resolve

    try:
        resolve(path)
        return True
    except Resolver404:
        return False


def measure(args, dep: Deployment, path: Path, table_pk: int, versions: int) -> dict[str, Any]:
    reps = args.reps
    top = versions - 1
    warm_v = top
    singles = [top - 1 - i for i in range(reps)]  # different versions, each new to the app
    pairs = [(top - 1 - reps - 2 * i, top - 2 - reps - 2 * i) for i in range(reps)]
    out: dict[str, Any] = {"versions": {"warm": warm_v, "singles": singles, "pairs": pairs}}

    # c) the peer first (no Spark involved; the server and the worker idle)
    peer = Peer(path)
    peer.run(SQL.format(v=warm_v), lazy=False)  # imports, DuckDB's first statement
    load = loadavg()[0]
    for lazy, key in ((False, "peer_table"), (True, "peer_dataset")):
        runs = [peer.run(SQL.format(v=v), lazy)[0] for v in singles]
        pair_runs = []
        for a, b in pairs:
            t0 = time.perf_counter()
            peer.run(SQL.format(v=a), lazy)
            peer.run(SQL.format(v=b), lazy)
            pair_runs.append(time.perf_counter() - t0)
        one_stmt = [peer.run(COMPARE_SQL.format(a=a, b=b), lazy)[0] for a, b in pairs]
        out[key] = {"single_runs_s": runs, "pair_runs_s": pair_runs, "compare_stmt_runs_s": one_stmt}
    out["peer_load"] = [load, loadavg()[0]]

    # a) ours, direct on a warm Connect session
    load = loadavg()[0]
    ours = Ours(dep.env["DELTAWEB_SPARK_REMOTE"], path, args.workdir / "direct")
    first_s, first_rows = ours.run(SQL.format(v=warm_v))
    warm_runs = [ours.run(SQL.format(v=warm_v))[0] for _ in range(args.warm)]  # the server's JIT, not timed
    warm_runs += [ours.run(COMPARE_SQL.format(a=warm_v, b=warm_v - 1))[0] for _ in range(args.warm)]
    runs, agree = [], True
    for v in singles:
        s, rows = ours.run(SQL.format(v=v))
        runs.append(s)
        agree = agree and normal_rows(rows) == normal_rows(peer.run(SQL.format(v=v), lazy=True)[1])
    pair_runs = []
    for a, b in pairs:
        t0 = time.perf_counter()
        ours.run(SQL.format(v=a))
        ours.run(SQL.format(v=b))
        pair_runs.append(time.perf_counter() - t0)
    one_stmt = []
    for a, b in pairs:
        s, rows = ours.run(COMPARE_SQL.format(a=a, b=b))
        one_stmt.append(s)
        agree = agree and normal_rows(rows) == normal_rows(peer.run(COMPARE_SQL.format(a=a, b=b), lazy=True)[1])
    out["direct"] = {
        "session_s": ours.session_s,
        "first_s": first_s,
        "warm_runs_s": warm_runs,
        "single_runs_s": runs,
        "pair_runs_s": pair_runs,
        "compare_stmt_runs_s": one_stmt,
        "rows_equal_peer": agree,
        "regions": len(first_rows),
    }
    out["direct_load"] = [load, loadavg()[0]]

    # b) end to end through the API, when it is there
    if args.no_api:
        out["api"] = {"skipped": "--no-api"}
    elif not routed(f"/api/tables/{table_pk}/query/"):
        out["api"] = {"skipped": "POST /api/tables/{id}/query/ is not routed in this checkout"}
    else:
        api = Api(dep.base, table_pk)
        load = loadavg()[0]
        try:
            first = api.run(SQL.format(v=warm_v))
            singles_api = [api.run(SQL.format(v=v)) for v in singles]
            pairs_api = []
            for a, b in pairs:
                t0 = time.perf_counter()
                ra, rb = api.run(SQL.format(v=a)), api.run(SQL.format(v=b))
                pairs_api.append({"s": round(time.perf_counter() - t0, 3), "jobs": [ra, rb]})
            agree = all(
                normal_rows(r["rows"]) == normal_rows(peer.run(SQL.format(v=v), lazy=True)[1])
                for r, v in zip(singles_api, singles, strict=True)
            )
            for r in [first, *singles_api, *(j for p in pairs_api for j in p["jobs"])]:
                r.pop("rows")
            out["api"] = {"first": first, "singles": singles_api, "pairs": pairs_api, "rows_equal_peer": agree}
        except (RuntimeError, OSError) as exc:  # reported; the other parts stand
            out["api"] = {"failed": str(exc)[:500]}
        if "singles" in out["api"] and routed(f"/api/tables/{table_pk}/query/compare/"):
            bare = SQL.replace(" VERSION AS OF {v}", "")  # the page's table, read at `from` and at `to`
            try:
                out["api"]["compare"] = [api.compare(bare, a, b) for a, b in pairs]
            except (RuntimeError, OSError) as exc:
                out["api"]["compare_failed"] = str(exc)[:500]
        out["api_load"] = [load, loadavg()[0]]
    return out


# --- the report -----------------------------------------------------------------------------------------


def summarize(m: dict[str, Any]) -> dict[str, Any]:
    d, pt, pd = m["direct"], m["peer_table"], m["peer_dataset"]
    s: dict[str, Any] = {
        "direct_s": median(d["single_runs_s"]),
        "direct_first_s": d["first_s"],
        "direct_pair_s": median(d["pair_runs_s"]),
        "direct_compare_stmt_s": median(d["compare_stmt_runs_s"]),
        "peer_table_s": median(pt["single_runs_s"]),
        "peer_dataset_s": median(pd["single_runs_s"]),
        "peer_table_pair_s": median(pt["pair_runs_s"]),
        "peer_dataset_pair_s": median(pd["pair_runs_s"]),
        "peer_dataset_compare_stmt_s": median(pd["compare_stmt_runs_s"]),
        "peer_table_compare_stmt_s": median(pt["compare_stmt_runs_s"]),
    }
    s["peer_s"] = min(s["peer_table_s"], s["peer_dataset_s"])
    s["peer_pair_s"] = min(s["peer_table_pair_s"], s["peer_dataset_pair_s"])
    s["direct_vs_peer"] = s["direct_s"] / s["peer_s"]
    s["direct_pair_vs_single"] = s["direct_pair_s"] / s["direct_s"]
    s["direct_pair_vs_peer_pair"] = s["direct_pair_s"] / s["peer_pair_s"]
    s["direct_compare_stmt_vs_single"] = s["direct_compare_stmt_s"] / s["direct_s"]
    api = m["api"]
    if "singles" in api:
        s["api_first_s"] = api["first"]["s"]
        s["api_s"] = median([r["s"] for r in api["singles"]])
        s["api_job_ran_s"] = median([r.get("ran_s", float("nan")) for r in api["singles"]])
        s["api_pair_s"] = median([p["s"] for p in api["pairs"]])
        s["api_vs_peer"] = s["api_s"] / s["peer_s"]
        s["api_pair_vs_single"] = s["api_pair_s"] / s["api_s"]
        s["api_met_2s"] = s["api_s"] <= GOAL_API_S
        s["api_pair_met_2x"] = s["api_pair_vs_single"] <= GOAL_PAIR_X
        if api.get("compare"):
            s["api_compare_s"] = median([c["s"] for c in api["compare"]])
            s["api_compare_vs_single"] = s["api_compare_s"] / s["api_s"]
            s["api_compare_met_2x"] = s["api_compare_vs_single"] <= GOAL_PAIR_X
    s["direct_pair_met_2x"] = s["direct_pair_vs_single"] <= GOAL_PAIR_X
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items()}


def runs_text(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def report(result: dict[str, Any]) -> None:
    m, s = result["measured"], result["summary"]
    print(
        f"\nSQL at a version: GROUP BY over ~{result['rows']:,} rows, {os.cpu_count()} CPUs, "
        f"load {result['loadavg_before']} -> {result['loadavg_after']}, --reps {result['reps']}"
    )
    print(f"{'case':46}{'median s':>9}  runs (s)")
    d, pt, pd = m["direct"], m["peer_table"], m["peer_dataset"]
    lines = [
        ("ours: run_query on Connect, first after warm-up", [d["first_s"]]),
        ("ours: untimed warm runs (query, then join)", d["warm_runs_s"]),
        ("ours: run_query on Connect, warm", d["single_runs_s"]),
        ("peer: delta-rs to_pyarrow_table + DuckDB", pt["single_runs_s"]),
        ("peer: delta-rs to_pyarrow_dataset + DuckDB", pd["single_runs_s"]),
        ("ours: two versions, two run_query calls", d["pair_runs_s"]),
        ("peer (table): two versions, twice", pt["pair_runs_s"]),
        ("peer (dataset): two versions, twice", pd["pair_runs_s"]),
        ("ours: both versions in one statement (join)", d["compare_stmt_runs_s"]),
        ("peer (dataset): both in one statement", pd["compare_stmt_runs_s"]),
    ]
    api = m["api"]
    if "singles" in api:
        lines += [
            ("API: click to first rows, first after start", [api["first"]["s"]]),
            ("API: click to first rows, warm", [r["s"] for r in api["singles"]]),
            ("API: two versions, two jobs", [p["s"] for p in api["pairs"]]),
        ]
        if api.get("compare"):
            lines.append(("API: compare endpoint, both jobs + comparison", [c["s"] for c in api["compare"]]))
    for label, xs in lines:
        print(f"{label:46}{median(xs):9.2f}  {runs_text(xs)}")
    if "singles" in api:
        ran = [r.get("ran_s", float("nan")) for r in api["singles"]]
        queued = [r.get("queued_s", float("nan")) for r in api["singles"]]
        http = [r.get("http_s", float("nan")) for r in api["singles"]]
        print(f"  API phases: queue {runs_text(queued)}; Spark job {runs_text(ran)}; HTTP and polls {runs_text(http)}")
        print(f"  API goal: first rows within {GOAL_API_S:.0f} s: {'MET' if s['api_met_2s'] else 'MISSED'}")
        for c in api.get("compare", []):
            print(f"  compare jobs {c['jobs']}: Spark {runs_text(c['ran_s'])} s each, {c['spark_span_s']:.2f} s first "
                  f"start to last end; counts {c['counts']}")  # fmt: skip
        if api.get("compare_failed"):
            print(f"  compare endpoint failed: {api['compare_failed']}")
    else:
        print(f"API: {api.get('skipped') or api.get('failed')}")
    print(f"ratios: ours direct / peer {s['direct_vs_peer']:.2f}; two versions / one: ours direct "
          f"{s['direct_pair_vs_single']:.2f} ({'MET' if s['direct_pair_met_2x'] else 'MISSED'} <= 2x)"
          + (f", API {s['api_pair_vs_single']:.2f} ({'MET' if s['api_pair_met_2x'] else 'MISSED'})"
             if "api_pair_vs_single" in s else "")
          + (f", compare endpoint {s['api_compare_vs_single']:.2f} ({'MET' if s['api_compare_met_2x'] else 'MISSED'})"
             if "api_compare_vs_single" in s else "")
          + f"; ours pair / peer pair {s['direct_pair_vs_peer_pair']:.2f}"
          + (f"; API / peer {s['api_vs_peer']:.2f}" if "api_vs_peer" in s else ""))  # fmt: skip
    print(f"rows equal to the peer's: direct {d['rows_equal_peer']}" + (
        f", API {api['rows_equal_peer']}" if "rows_equal_peer" in api else ""))  # fmt: skip
    mem = result["memory"]
    print(f"memory: Connect server {mem['connect_server']['rss_mib']:.0f} MiB, worker {mem['worker']['rss_mib']:.0f} "
          f"MiB, this process (Connect client, DuckDB) {mem['bench_mib']:.0f} MiB")  # fmt: skip


# --- main -----------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of version 0")
    ap.add_argument("--reps", type=int, default=5, help="runs of each case (each on another version)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/deltaweb-bench/query"))
    ap.add_argument("--warm", type=int, default=3, help="untimed runs of each statement before the direct case")
    ap.add_argument("--no-api", action="store_true", help="skip the end-to-end API case")
    args = ap.parse_args()
    args.workdir = args.workdir.resolve()
    versions = 3 * args.reps + 2  # one warm, reps singles, reps pairs: each new to the app
    data, t_gen = make_table(args.workdir / "data", args.rows, versions)  # DIR/data/sales
    run_dir = args.workdir / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "tables").mkdir(parents=True)
    path = run_dir / "tables" / NAME
    subprocess.run(["cp", "-al", str(data), str(path)], check=True)  # hard links: cheap, never written
    args.workdir = run_dir

    dep = Deployment(run_dir, beat=True)
    atexit.register(dep.stop)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.update({k: v for k, v in dep.env.items() if k != "DELTAWEB_SPARK_REMOTE"})
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    import django

    django.setup()
    load_before = loadavg()
    marks = start(dep)
    from tables.services.catalog.registration import register_table
    from tables.services.sync.store import sync_table

    table = register_table(NAME, str(path))
    sync_table(table.pk)
    table.refresh_from_db()
    assert table.last_synced_version == versions - 1, table.last_synced_version
    wait_idle()
    measured = measure(args, dep, path, table.pk, versions)
    memory = {
        "connect_server": tree_memory(int((dep.connect_dir / "server.pid").read_text())),
        "worker": tree_memory(dep.procs["worker"].pid),
        "bench_mib": round(rss_kib(os.getpid()) / 1024, 1),  # this process alone (the deployment is its children)
    }
    from tables.spark.session import stop_spark

    stop_spark()
    dep.stop()
    import deltalake
    import duckdb

    result = {
        "benchmark": "query",
        "rows": args.rows,
        "versions": versions,
        "reps": args.reps,
        "sql": SQL,
        "summary": summarize(measured),
        "measured": measured,
        "ready_s": round(marks["ready_s"], 1),
        "generate_s": round(t_gen, 1),
        "memory": memory,
        "deltalake": deltalake.__version__,
        "duckdb": duckdb.__version__,
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "cpus": os.cpu_count(),
    }
    report(result)
    from benchmarks.report import store

    shown = " ".join([".venv/bin/python", "benchmarks/query.py", *sys.argv[1:]])
    store("query", result, shown, tuple(load_before))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
