"""Sync of a 100,000-commit table into the cached history: cold, then incremental.

Usage: .venv/bin/python benchmarks/sync.py [--workdir DIR] [--reps N] [--profile]

Uses the 100,000-commit ICT log that benchmarks/time_travel.py generates (generated the same
way when missing; a checkpoint 10 commits before the end, written by delta-rs). Each run
registers a hard-linked copy of the log in a fresh SQLite database and calls
tables.services.sync.store.sync_table as the Celery worker does. Measured:
  a) cold sync: every commit becomes a history row (growth from the newest checkpoint)
  b) incremental sync of 100 new commits (appended after the cold sync), `--reps` times
and checked: the number of rows, the latest version, and the files and bytes of the last
commit equal delta-rs's (`DeltaTable.files()` and the adds' sizes) at the same version.
Peer for scale: delta-rs `DeltaTable.history()` over every commit (it reads each commit's
commitInfo, as the sync must) in the same run.
Targets: cold <= 6 s, incremental <= 0.3 s. Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

TARGET_COLD_S = 6.0
TARGET_INCREMENTAL_S = 0.3


def source_log(workdir: Path) -> Path:
    import time_travel

    root, _info, _known = time_travel.prepare(workdir, "ict", 0, time_travel.SEED)
    return root


def setup_django(workdir: Path, *also_allowed: Path) -> None:
    os.environ.update(
        {
            "DATABASE_URL": f"sqlite:///{workdir / 'sync.sqlite3'}",
            "DELTAWEB_ALLOWED_ROOTS": ",".join(str(p) for p in (workdir, *also_allowed)),
            "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
            "DELTAWEB_SECRET_KEY": os.environ.get("DELTAWEB_SECRET_KEY", "benchmark-only-secret-key-0123456789"),
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from deltaweb.celery import app

    app.loader.import_default_modules()  # a worker has its task modules loaded before any sync
    with app.connection_for_write() as conn:  # and its broker connection up (the redis client imported)
        conn.ensure_connection(max_retries=3)


def delta_rs_state(path: Path) -> dict:
    """Files and bytes of the latest version by delta-rs, and its history() time (peer)."""
    import deltalake

    dt = deltalake.DeltaTable(str(path))
    adds = dt.get_add_actions(flatten=True)
    size = adds.column("size_bytes")
    total = sum(size.to_pylist()) if hasattr(size, "to_pylist") else int(sum(size))
    t0 = time.perf_counter()
    hist = dt.history()
    hist_s = time.perf_counter() - t0
    return {"version": dt.version(), "files": len(dt.file_uris()), "bytes": total, "history_s": hist_s,
            "history_rows": len(hist)}  # fmt: skip


def _children_cpu() -> float:
    """CPU seconds of this process's ended children: a long log's reader processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(src: Path, workdir: Path, rep: int, incremental_reps: int, profile: bool) -> dict:
    from web import append_commits

    from tables.models import Commit, Table
    from tables.services.catalog import registration
    from tables.services.sync import store as sync

    table_dir = workdir / f"table-{rep}"
    shutil.rmtree(table_dir, ignore_errors=True)
    subprocess.run(["cp", "-al", str(src), str(table_dir)], check=True)  # hard links: cheap, never written
    table = registration.register_table(f"bench-sync-{rep}", str(table_dir))
    prof = cProfile.Profile() if profile else None
    t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
    if prof:
        prof.enable()
    cold = sync.sync_table(table.pk)
    if prof:
        prof.disable()
    cold_s, cold_cpu = time.perf_counter() - t0, time.process_time() - c0
    cold_readers_cpu = _children_cpu() - k0
    if prof:
        pstats.Stats(prof).sort_stats("cumtime").print_stats(35)
    if "error" in cold:
        raise SystemExit(f"cold sync failed: {cold['error']}")
    table.refresh_from_db()
    rows = Commit.objects.filter(table=table).count()
    cold_state = {"version": table.last_synced_version, "files": table.num_files, "bytes": table.size_bytes,
                  "rows": rows}  # fmt: skip
    incremental, incremental_cpu = [], []
    for _ in range(incremental_reps):
        append_commits(table_dir, 100)
        t0, c0 = time.perf_counter(), time.process_time()
        last = prof if prof and len(incremental) == incremental_reps - 1 else None
        if last:
            last = cProfile.Profile()
            last.enable()
        out = sync.sync_table(table.pk)
        if last:
            last.disable()
            pstats.Stats(last).sort_stats("cumtime").print_stats(30)
        incremental.append(time.perf_counter() - t0)
        incremental_cpu.append(time.process_time() - c0)
        if out.get("newCommits") != 100:
            raise SystemExit(f"incremental sync stored {out}, expected 100 new commits")
    table = Table.objects.get(pk=table.pk)
    final = {"version": table.last_synced_version, "files": table.num_files, "bytes": table.size_bytes,
             "rows": Commit.objects.filter(table=table).count()}  # fmt: skip
    return {"cold_s": cold_s, "cold_cpu_s": cold_cpu, "cold_readers_cpu_s": cold_readers_cpu, "incremental_s": incremental, "incremental_cpu_s": incremental_cpu,
            "cold": cold_state, "final": final,
            "table_dir": str(table_dir)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/deltaweb-bench"))
    ap.add_argument("--reps", type=int, default=2, help="cold syncs (each on a fresh copy)")
    ap.add_argument("--incremental", type=int, default=3, help="incremental syncs of 100 commits per cold sync")
    ap.add_argument(
        "--profile", action="store_true", help="print a profile of the first cold sync and its last incremental one"
    )
    args = ap.parse_args()
    src = source_log(args.workdir)
    work = args.workdir / "sync"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    from web import start_redis

    redis = start_redis(work)
    try:
        setup_django(work)
        load0 = os.getloadavg()
        runs = [run_once(src, work, rep, args.incremental, args.profile and rep == 0) for rep in range(args.reps)]
    finally:
        os.killpg(redis.pid, signal.SIGTERM)
        redis.wait(timeout=30)
    peer_src = delta_rs_state(src)
    peer_final = delta_rs_state(Path(runs[-1]["table_dir"]))
    load1 = os.getloadavg()

    problems = []
    for r in runs:
        c, f = r["cold"], r["final"]
        if (c["version"], c["rows"]) != (peer_src["version"], peer_src["version"] + 1):
            problems.append(
                f"cold sync: version {c['version']}, {c['rows']} rows; delta-rs version {peer_src['version']}"
            )
        if (c["files"], c["bytes"]) != (peer_src["files"], peer_src["bytes"]):
            problems.append(f"cold sync: {c['files']} files / {c['bytes']} bytes, delta-rs {peer_src['files']} / "
                            f"{peer_src['bytes']}")  # fmt: skip
    f = runs[-1]["final"]
    if (f["version"], f["files"], f["bytes"], f["rows"]) != (
        peer_final["version"], peer_final["files"], peer_final["bytes"], peer_final["version"] + 1
    ):  # fmt: skip
        problems.append(f"after incremental syncs: {f}, delta-rs {peer_final}")
    if problems:
        raise SystemExit("VERIFICATION FAILED:\n  " + "\n  ".join(problems))

    cold_all = [r["cold_s"] for r in runs]
    cold = statistics.median(cold_all)
    inc_all = [x for r in runs for x in r["incremental_s"]]
    inc = statistics.median(inc_all)
    cold_cpu = statistics.median(r["cold_cpu_s"] for r in runs)
    readers_cpu = statistics.median(r["cold_readers_cpu_s"] for r in runs)
    inc_cpu = statistics.median(x for r in runs for x in r["incremental_cpu_s"])
    print(f"\nSync of a {peer_src['version'] + 1:,}-commit ICT table into a fresh SQLite database, {os.cpu_count()} CPUs,"
          f" load average {load0[0]:.2f} at start, {load1[0]:.2f} at end")  # fmt: skip
    print(f"  verified: rows, latest version, files and bytes equal delta-rs's ({peer_src['files']:,} files)")
    print(f"  a) cold sync            {cold:8.2f} s median ({', '.join(f'{x:.2f}' for x in cold_all)})"
          f"   target <= {TARGET_COLD_S} s: {'MET' if cold <= TARGET_COLD_S else 'MISSED'}")  # fmt: skip
    print(f"  b) incremental, 100 new {inc:8.3f} s median ({', '.join(f'{x:.3f}' for x in inc_all)})"
          f"   target <= {TARGET_INCREMENTAL_S} s: {'MET' if inc <= TARGET_INCREMENTAL_S else 'MISSED'}")  # fmt: skip
    print(f"  CPU time of this process (all threads; load-independent): cold {cold_cpu:.2f} s "
          f"(and {readers_cpu:.2f} s in its reader processes), incremental {inc_cpu:.3f} s")  # fmt: skip
    print(
        f"  peer: delta-rs history() of every commit {peer_src['history_s']:.2f} s "
        f"(ratio cold sync / delta-rs history {cold / peer_src['history_s']:.2f})"
    )
    print(json.dumps({"benchmark": "sync", "commits": peer_src["version"] + 1, "cold_s": [r["cold_s"] for r in runs],
                      "incremental_s": inc_all, "cold_cpu_s": cold_cpu, "cold_readers_cpu_s": readers_cpu, "incremental_cpu_s": inc_cpu, "delta_rs_history_s": peer_src["history_s"],
                      "loadavg": [load0[0], load1[0]], "cpus": os.cpu_count()}))  # fmt: skip


if __name__ == "__main__":
    main()
