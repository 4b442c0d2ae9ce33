"""A 1,000,000-commit table: sync, lookups, reachability, pages and memory, beside delta-rs.

Usage: .venv/bin/python benchmarks/million.py [--workdir DIR] [--commits N] [--samples N]
                                              [--no-web] [--json FILE]

The log (benchmarks/time_travel.py's generator, kept under DIR/time_travel/million and
reused): `--commits` small commits (default 1,000,000), one add each, In-Commit Timestamps
enabled at the middle version (file modification times before it), a checkpoint written by
delta-rs every tenth of the log and one 10 commits before the end. Not every 100 commits as
delta-rs's own writers leave them: each checkpoint holds every file of the table so far, so
10,000 of them would be 5 billion rows; a streaming table that size is compacted first.

Measured, in this process unless said:
  a) sync (benchmarks/sync.py's run_once): the cold sync of the whole log into a fresh SQLite
     database, then 3 incremental syncs of 100 new commits; checked against delta-rs (rows,
     latest version, files, bytes). Peers: delta-rs `history()` of every commit, and its
     `update_incremental()` after 100 new commits.
  b) reachability of every version, computed once as the worker does after a sync
     (tables.services.versions.reachability.compute_in_worker), its time against the cold sync's and
     the process's peak memory.
  c) lookups (benchmarks/time_travel.py's bench_log): TIMESTAMP AS OF for `--samples` random
     timestamps (each checked against the generated ones), the log's opening, the first history
     page. Peers: delta-rs `DeltaTable(path)` + `history(100)`, and `load_as_version(datetime)`.
  d) pages (benchmarks/web.py in a subprocess, unless --no-web): gunicorn's 4 workers under wrk,
     the History page's first page and page 10,000, the history API's first page and offset
     500,000, and each web worker's memory.
Goals (issue 47): cold sync <= 0.5x delta-rs history(), incremental <= 0.1 s; History pages
p95 <= 100 ms, API p95 <= 50 ms; TIMESTAMP AS OF <= 20 ms; reachability within 2x the cold
sync; a web worker under 250 MB. Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import sync as sync_bench  # noqa: E402
import time_travel  # noqa: E402

GOAL_COLD_RATIO = 0.5
GOAL_INCREMENTAL_S = 0.1
GOAL_PAGE_P95_MS = 100.0
GOAL_API_P95_MS = 50.0
GOAL_RESOLVE_MS = 20.0
GOAL_REACH_RATIO = 2.0
GOAL_WEB_WORKER_MB = 250.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def served_lookups(table, known: dict, n: int = 200) -> dict:
    """TIMESTAMP AS OF as the API answers it (tables.services.versions.read.resolve, rule and
    alternatives included) and the History tab's jump, for `n` random times before the last
    synced commit; each checked against the generated timestamps."""
    from datetime import UTC, datetime, timedelta

    from tables.services.history.query import version_at_time
    from tables.services.versions import read as versions

    eff = known["effective"]
    rng = random.Random(7)
    api, jump = [], []
    for _ in range(n):
        t = rng.randrange(eff[0], eff[-1])
        text = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=t)).isoformat()
        t0 = time.perf_counter()
        v = versions.resolve(table, text).version
        t1 = time.perf_counter()
        w = version_at_time(table, text)
        jump.append(time.perf_counter() - t1)
        api.append(t1 - t0)
        if (e := time_travel._check("million", t, v, eff)) or w != v:
            raise SystemExit(f"VERIFICATION FAILED: {e or f'the jump found {w}, the API {v}'}")
    return {"api_ms": time_travel._stats_ms(api), "jump_ms": time_travel._stats_ms(jump), "checked": n}


def sync_and_reach(src: Path, work: Path, known: dict) -> dict:
    """a) and b): the cold and incremental syncs, then the reachability as a worker computes it."""
    from web import start_redis

    redis = start_redis(work)
    try:
        sync_bench.setup_django(work, src)  # the source log too: the lookups read it
        run = sync_bench.run_once(src, work, 0, 3, False)
        sync_peak = _peak_mb()
        from tables.models import Table
        from tables.services.versions import reachability

        table = Table.objects.get(location__endswith="table-0")
        t0, c0 = time.perf_counter(), time.process_time()
        reachability.compute_in_worker(table.pk)
        reach = {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
        found = reachability.table_reachability(table, wait=False)
        if found is None or len(found.stamps) != run["final"]["version"] + 1:
            raise SystemExit("VERIFICATION FAILED: the worker's reachability does not cover every version")
        reach["versions"] = len(found.stamps)
        reach["peak_mb"] = _peak_mb()
        served = served_lookups(table, known)
    finally:
        os.killpg(redis.pid, signal.SIGTERM)
        redis.wait(timeout=30)
    return {"run": run, "sync_peak_mb": sync_peak, "reach": reach, "served": served}


def delta_rs_incremental(table_dir: Path, reps: int = 3) -> list[float]:
    """Peer of the incremental sync: delta-rs's `update_incremental()` of an open table after
    100 new commits (it lists the log's tail and replays them), `reps` times."""
    import deltalake
    from web import append_commits

    dt = deltalake.DeltaTable(str(table_dir))
    out = []
    for _ in range(reps):
        before = dt.version()
        append_commits(table_dir, 100)
        t0 = time.perf_counter()
        dt.update_incremental()
        out.append(time.perf_counter() - t0)
        if dt.version() != before + 100:
            raise SystemExit(f"delta-rs update_incremental reached {dt.version()}, not {before + 100}")
    return out


def lookups(root: Path, known: dict, enable_at: int, samples: int, peer_calls: int) -> dict:
    """c): TIMESTAMP AS OF, opening the log and the first history page, beside delta-rs
    (`peer_calls` of its load_as_version: about 5 minutes each here)."""
    args = SimpleNamespace(
        samples=samples, builds=3, history_reps=10, delta_rs_samples=peer_calls, delta_rs_budget=300.0
    )
    rng = random.Random(2024)
    out = time_travel.bench_log("million", root, known, args, rng, enable_at=enable_at)
    times = out.pop("_times")
    out.pop("_ts_list"), out.pop("_versions")
    n = len(known["effective"])
    out["delta_rs_history"] = time_travel.bench_delta_rs_history(root, 3, n)
    if peer_calls:
        out["delta_rs_time_travel"] = time_travel.bench_delta_rs(root, known, times, args, rng)
    return out


def pages(src: Path, workdir: Path) -> dict:
    """d): benchmarks/web.py on this log, in its own process."""
    out = workdir / "web.json"
    cmd = [sys.executable, str(HERE / "web.py"), "--workdir", str(workdir / "web"), "--log", str(src),
           "--deep-page", "10000", "--api-offset", "500000", "--json", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=ROOT)
    return json.loads(out.read_text())


def _verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def report(commits: int, info: dict, s: dict, peer: dict, look: dict, web: dict | None, load: tuple) -> dict:
    run, reach = s["run"], s["reach"]
    cold, hist = run["cold_s"], peer["history_s"]
    inc = sorted(run["incremental_s"])[len(run["incremental_s"]) // 2]
    print(f"\nA {commits:,}-commit table ({info['checkpoint_files']}, by {info['checkpoint_writer']}; ICT from "
          f"v{info['enable_at']:,}), {os.cpu_count()} CPUs, load {load[0]:.2f} at start, {load[1]:.2f} at end")  # fmt: skip
    print("  verified: the sync's rows, latest version, files and bytes equal delta-rs's")
    print(f"a) cold sync {cold:.1f} s (CPU {run['cold_cpu_s']:.1f} s + readers {run['cold_readers_cpu_s']:.1f} s, "
          f"peak {s['sync_peak_mb']:.0f} MB); delta-rs history() {hist:.1f} s: {cold / hist:.2f}x, "
          f"goal <= {GOAL_COLD_RATIO}x {_verdict(cold / hist <= GOAL_COLD_RATIO)}")  # fmt: skip
    print(f"   incremental, 100 new: {inc:.3f} s median ({', '.join(f'{x:.3f}' for x in run['incremental_s'])}), "
          f"goal <= {GOAL_INCREMENTAL_S} s {_verdict(inc <= GOAL_INCREMENTAL_S)}; delta-rs update_incremental() "
          f"{sorted(peer['incremental_s'])[1]:.3f} s median")  # fmt: skip
    print(f"b) reachability of every version: {reach['s']:.1f} s (CPU {reach['cpu_s']:.1f} s), {reach['s'] / cold:.2f}x "
          f"the cold sync, goal <= {GOAL_REACH_RATIO}x {_verdict(reach['s'] / cold <= GOAL_REACH_RATIO)}; "
          f"peak {reach['peak_mb']:.0f} MB")  # fmt: skip
    api = s["served"]["api_ms"]
    print(f"c) TIMESTAMP AS OF through the app (versions.resolve): median {api['median']:.2f} ms, p95 {api['p95']:.2f} ms "
          f"({s['served']['checked']} checked), goal <= {GOAL_RESOLVE_MS} ms {_verdict(api['p95'] <= GOAL_RESOLVE_MS)}; "
          f"the History jump median {s['served']['jump_ms']['median']:.2f} ms")  # fmt: skip
    res = look["resolve"]["alternatives"]["latency_ms"]
    print(f"   in the core, the log open: median {res['median']:.2f} ms, p95 {res['p95']:.2f} ms, "
          f"{look['resolve']['alternatives']['reads_max']} commit reads at most "
          f"({look['resolve']['checked']} checked), goal <= {GOAL_RESOLVE_MS} ms {_verdict(res['p95'] <= GOAL_RESOLVE_MS)}")  # fmt: skip
    if "delta_rs_time_travel" in look:
        tt = look["delta_rs_time_travel"]["delta_rs_load_as_version_ms"]
        print(f"   delta-rs load_as_version(datetime): median {tt['median']:.0f} ms over {tt['n']} calls")
    print(f"   opening the log (listing + config): {look['commit_times_ms']['median']:.0f} ms; first history page "
          f"{look['history_page']['warm_ms']['median']:.1f} ms warm, {look['history_page']['cold_ms']['median']:.0f} ms "
          f"cold; delta-rs open + history(100) {look['delta_rs_history']['open_and_history_ms']['median']:.0f} ms")  # fmt: skip
    if web:
        for name, r in web["latency"].items():
            goal = GOAL_API_P95_MS if "API" in name else GOAL_PAGE_P95_MS
            print(f"d) {name:36} p50 {r['p50']:6.1f} ms  p95 {r['p95']:6.1f} ms  {r['requests']:,} requests, "
                  f"{r['errors'] + r['non2xx']} errors; goal p95 <= {goal:.0f} ms {_verdict(r['p95'] <= goal)}")  # fmt: skip
        workers = web["memory"]["workers_mb"]
        print(f"   web workers {', '.join(f'{w:.0f}' for w in workers)} MB, goal < {GOAL_WEB_WORKER_MB:.0f} MB "
              f"{_verdict(max(workers, default=0) < GOAL_WEB_WORKER_MB)}; Celery worker {web['memory']['celery_mb']:.0f} MB")  # fmt: skip
    return {"benchmark": "million", "commits": commits, "generated": info, "sync": run, "sync_peak_mb": s["sync_peak_mb"],
            "reach": reach, "delta_rs_history_s": hist, "delta_rs_incremental_s": peer["incremental_s"], "lookups": look, "web": web, "loadavg": list(load),
            "cpus": os.cpu_count(), "at": time.time()}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/deltaweb-bench"))
    ap.add_argument("--commits", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=200, help="random timestamps resolved")
    ap.add_argument("--no-web", action="store_true", help="leave out the pages (d)")
    ap.add_argument("--peer-time-travel", type=int, default=1, help="delta-rs load_as_version calls (minutes each)")
    ap.add_argument("--json", type=Path, help="also write the last line printed to this file")
    args = ap.parse_args()
    if not args.no_web and shutil.which("wrk") is None:  # before the minutes of the other stages
        sys.exit("wrk is not installed (the pages' load): apt-get install -y wrk, or --no-web")
    enable_at = args.commits // 2
    src, info, known = time_travel.prepare(
        args.workdir, "million", enable_at, time_travel.SEED, args.commits, args.commits // 10
    )
    work = args.workdir / "million"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    load0 = os.getloadavg()
    s = sync_and_reach(src, work, known)
    peer = sync_bench.delta_rs_state(src)
    peer["incremental_s"] = delta_rs_incremental(Path(s["run"]["table_dir"]))
    c = s["run"]["cold"]
    if (c["version"], c["rows"], c["files"], c["bytes"]) != (
        peer["version"], peer["version"] + 1, peer["files"], peer["bytes"]
    ):  # fmt: skip
        raise SystemExit(f"VERIFICATION FAILED: the cold sync gave {c}, delta-rs {peer}")
    partial = work / "partial.json"  # each stage's result as it ends: a later stage's failure keeps them
    partial.write_text(json.dumps({"sync": s, "peer": peer}, default=str))
    print(f"sync: cold {s['run']['cold_s']:.1f} s, incremental {s['run']['incremental_s']}, reach {s['reach']}; "
          f"delta-rs history() {peer['history_s']:.1f} s, update_incremental() {peer['incremental_s']}", flush=True)  # fmt: skip
    look = lookups(src, known, enable_at, args.samples, args.peer_time_travel)
    partial.write_text(json.dumps({"sync": s, "peer": peer, "lookups": look}, default=str))
    web = None if args.no_web else pages(src, work)
    out = report(args.commits, info, s, peer, look, web, (load0[0], os.getloadavg()[0]))
    line = json.dumps(out, default=str)
    print(line)
    if args.json:
        args.json.write_text(line + "\n")


if __name__ == "__main__":
    main()
