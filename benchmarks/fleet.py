"""A fleet of tables: one probe pass with nothing changed, against a sync job per table (the
way the beat worked before the probe) and against delta-rs loading each table; the tables list
at that size; the database's size; discovery of the whole fleet under its prefix.

Usage: .venv/bin/python benchmarks/fleet.py [--tables 10000] [--workdir DIR] [--sample 200] [--list-reps 30]

`--tables` copies of a small delta-rs table (3 commits) on local disk (hard links to a seed's
files: 100,000 tables take about 15 s and no file data; a workdir is reused by the next run),
registered in a fresh SQLite database as synced. Measured, in this process:
  a) a probe pass over all of them (tables.services.sync.probe.probe_tables in batches of
     DELTAWEB_PROBE_BATCH, as the workers run it): wall and CPU seconds, storage requests per
     table, Job rows written, changed tables found (0 expected);
  b) the same pass with 1% of the tables given a new commit: the changed ones found, each
     with a sync job;
  c) the old way on `--sample` tables: a sync job per table with nothing new (start_sync's
     row, then sync_table as the worker runs it), scaled to the fleet;
  d) peer: delta-rs `DeltaTable(path).version()` on the same `--sample` tables, scaled;
  e) the tables list (/: by name, searched, searched for nothing, largest first, a deep page)
     and the tables API: p50/p95 of `--list-reps` requests through Django's test client;
  f) the database: the file before and after registering (per table), and, after a first
     sync of the `--sample` tables, the history rows' bytes per commit (SQLite's dbstat);
  g) discovery of every table under the fleet's prefix, each way in a fresh process, once
     timed and once under tracemalloc: deltaweb's streamed preview (tables.services.catalog.discovery,
     every table registered already: a look again), its walk alone, the walk as it was
     (breadth first into a list, its bounds lifted), and a plain os.scandir walk (no
     confinement to the allowed roots, no database: the least a walker does).
Goals: a pass over the unchanged fleet under 60 s of worker CPU; 1 request and 0 Job rows per
unchanged table; the tables list and its search p95 at most 100 ms. Prints a table and, last,
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GOAL_PROBE_CPU_S = 60.0  # a pass over the whole fleet, nothing changed
GOAL_LIST_P95_MS = 100.0
PAGES = {  # label, URL, what it asks of the database
    "list": ("tables list (/), 25 a page", "/", "ordered by name"),
    "list_search": ("tables list, searched", "/?q=t09", "at 100,000 tables 10% match, the first late in name order"),
    "list_search_none": ("tables list, searched, no match", "/?q=zzz", "every name, slug and location read"),
    "list_sorted": ("tables list, largest first", "/?sort=-size", ""),
    "list_deep": ("tables list, page 2,000", "/?page=2000", ""),
    "api": ("tables API", "/api/tables/", ""),
}
DISCOVERY = {
    "service": "preview (streamed; first 500 rows, counts)",
    "walk": "the walk alone (generator)",
    "old": "before: breadth first into a list",
    "peer": "peer: os.scandir walk",
}


LINKS_PER_SEED = 50_000  # ext4 allows 65,000 links to one file


def make_fleet(workdir: Path, n: int) -> list[Path]:
    """`n` copies of one 3-commit delta-rs table. Each copy's files are hard links to a seed's
    (a seed per 50,000 tables; the tables' own directories are real): 100,000 tables cost
    200,000 directories and no file data. Writers only ever add files to a Delta table, so a
    commit written to one copy later (the 1% changed below) does not reach the others."""
    import deltalake
    import pyarrow as pa

    seed = workdir / "seed"
    if not (seed / "_delta_log").is_dir():
        for i in range(3):
            deltalake.write_deltalake(str(seed), pa.table({"x": [i]}), mode="append")
    files = [p.relative_to(seed) for p in sorted(seed.rglob("*")) if p.is_file()]
    subdirs = sorted({f.parent for f in files if f.parent != Path(".")})
    log_files = sum(f.parts[0] == "_delta_log" for f in files)
    paths = []
    for i in range(n):
        src = seed if i < LINKS_PER_SEED else workdir / f"seed{i // LINKS_PER_SEED}"
        if not src.exists():
            shutil.copytree(seed, src)
        dst = workdir / "fleet" / f"{i // 1000:03d}" / f"t{i:06d}"
        if dst.exists() and len(os.listdir(dst / "_delta_log")) != log_files:
            shutil.rmtree(dst)  # an earlier run's changed table: made again
        if not (dst / files[-1]).exists():  # a workdir made by an earlier run is reused
            for d in subdirs:
                (dst / d).mkdir(parents=True, exist_ok=True)
            for f in files:
                if not (dst / f).exists():
                    os.link(src / f, dst / f)
        paths.append(dst)
    return paths


def setup_django(workdir: Path, migrate: bool = True) -> None:
    os.environ.update(
        {
            "DATABASE_URL": f"sqlite:///{workdir / 'fleet.sqlite3'}",
            "DELTAWEB_ALLOWED_ROOTS": str(workdir),
            "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
            "DELTAWEB_SECRET_KEY": os.environ.get("DELTAWEB_SECRET_KEY", "benchmark-only-secret-key-0123456789"),
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "DEBUG": "false",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    if migrate:
        call_command("migrate", verbosity=0)


def synced_fields(path: Path, schema_columns: int = 1) -> dict:
    """What a sync leaves on a table's row, read from the table with delta-rs: its metadata (as
    the sync stores it), files, bytes and newest commit's time; with `schema_columns` > 1, a
    schema of that many columns instead of the seed's one (catalogs' tables are wider)."""
    import deltalake

    dt = deltalake.DeltaTable(str(path))
    meta = dt.metadata()
    schema = json.loads(dt.schema().to_json())
    if schema_columns > 1:
        field = {"type": "long", "nullable": True, "metadata": {}}
        schema["fields"] = [{"name": f"column_{i:04d}", **field} for i in range(schema_columns)]
    adds = dt.get_add_actions(flatten=True)
    return {
        "latest_metadata": {
            "schemaString": json.dumps(schema, separators=(",", ":")),
            "partitionColumns": list(meta.partition_columns),
            "configuration": dict(meta.configuration),
        },
        "num_files": adds.num_rows,
        "size_bytes": sum(adds.column("size_bytes").to_pylist()),
        "last_commit_ms": max(h["timestamp"] for h in dt.history(1)),
    }


def register(paths: list[Path], schema_columns: int = 1) -> list[int]:
    """The fleet as registered and synced at version 2, each row as a sync leaves it (written
    directly: this measures the probe, not 100,000 first syncs)."""
    from django.utils import timezone

    from tables.models import SyncState, Table

    now = timezone.now()
    synced = synced_fields(paths[0], schema_columns)
    rows = [
        Table(
            name=f"t{i:06d}",
            slug=f"t{i:06d}",
            location=str(p),
            sync_state=SyncState.OK,
            last_synced_version=2,
            last_synced_at=now,
            next_check_at=now,
            **synced,
        )
        for i, p in enumerate(paths)
    ]
    Table.objects.bulk_create(rows, batch_size=1000)
    return list(Table.objects.order_by("pk").values_list("pk", flat=True))


def db_size(path: Path) -> dict:
    """The SQLite file's size (its WAL checkpointed into it first) and the bytes of each table
    with its indexes (the dbstat virtual table: pages in use)."""
    from django.db import connection

    with connection.cursor() as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        c.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')")
        owner = dict(c.fetchall())
        c.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        by_table: dict[str, int] = {}
        for name, size in c.fetchall():
            by_table[owner.get(name, name)] = by_table.get(owner.get(name, name), 0) + size
    return {"file_bytes": path.stat().st_size, "by_table": by_table}


def cold_syncs(ids: list[int]) -> dict:
    """A first sync of these tables (all 3 commits each), as a new table's first sync runs:
    the history rows whose bytes make the per-commit figure."""
    from tables.models import Commit, SyncState, Table
    from tables.services.sync.store import sync_table

    Table.objects.filter(pk__in=ids).update(last_synced_version=None, sync_state=SyncState.NEVER)
    before = Commit.objects.count()
    w0, c0 = time.perf_counter(), time.process_time()
    for pk in ids:
        sync_table(pk)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"tables": len(ids), "commits": Commit.objects.count() - before, "wall_s": wall, "cpu_s": cpu}


def sizes(empty: dict, registered: dict, synced: dict, tables: int, commits: int) -> dict:
    """Bytes per registered table (the file's growth by registering, and the table rows with
    their indexes) and per commit (the history rows with their indexes over the commits)."""
    history = synced["by_table"].get("tables_commit", 0)
    rows = registered["by_table"].get("tables_table", 0)
    # every table a sync grew, bar the tables' own rows, jobs and the benchmark's user/session
    grown = {
        name: size - registered["by_table"].get(name, 0)
        for name, size in synced["by_table"].items()
        if size > registered["by_table"].get(name, 0)
        and name != "tables_table"
        and not name.startswith(("tables_job", "auth", "django_", "sqlite_"))
    }
    return {
        "empty_file_bytes": empty["file_bytes"],
        "registered_file_bytes": registered["file_bytes"],
        "synced_file_bytes": synced["file_bytes"],
        "per_table_file_bytes": (registered["file_bytes"] - empty["file_bytes"]) / tables,
        "per_table_row_bytes": rows / tables,
        "commits": commits,
        "per_commit_bytes": history / commits if commits else None,
        "per_commit_grown_bytes": sum(grown.values()) / commits if commits else None,
        "grown_by_syncs": grown,
        "by_table_synced": synced["by_table"],
    }


def probe_pass(ids: list[int]) -> dict:
    from django.conf import settings

    from tables.models import Job
    from tables.services.sync import probe

    jobs_before = Job.objects.count()
    totals = {"unchanged": 0, "changed": 0, "busy": 0, "failed": 0, "requests": 0}
    w0, c0 = time.perf_counter(), time.process_time()
    for batch in probe.batches(ids, settings.DELTAWEB_PROBE_BATCH):
        for k, v in probe.probe_tables(batch).as_dict().items():
            totals[k] += int(v)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {**totals, "wall_s": wall, "cpu_s": cpu, "job_rows": Job.objects.count() - jobs_before}


def old_way(ids: list[int]) -> dict:
    """A sync job per unchanged table, as the beat's sync_all started them before the probe."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tables.models import Job, JobKind, Table
    from tables.services.jobs import lifecycle as jobs
    from tables.services.sync.store import sync_table

    w0, c0 = time.perf_counter(), time.process_time()
    with CaptureQueriesContext(connection) as queries:
        for pk in ids:
            job, _ = jobs.create_or_join(JobKind.SYNC, Table.objects.get(pk=pk), None)
            sync_table(pk, job.pk)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    n = len(ids)
    return {
        "tables": n,
        "wall_s": wall,
        "cpu_s": cpu,
        "queries_per_table": len(queries) / n,
        "job_rows": Job.objects.count(),
    }


def peer(paths: list[Path]) -> dict:
    import deltalake

    w0, c0 = time.perf_counter(), time.process_time()
    for p in paths:
        deltalake.DeltaTable(str(p)).version()
    return {"tables": len(paths), "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}


def pages(reps: int) -> dict:
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from tables.services.access.roles import ANALYST

    user = User.objects.create_user("bench", password="bench-pass-123")
    user.groups.add(Group.objects.get_or_create(name=ANALYST)[0])
    browser = Client()
    browser.force_login(user)
    api = Client(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    out = {}
    for label, (_name, url, _what) in PAGES.items():
        client = api if url.startswith("/api/") else browser
        times = []
        for _ in range(reps + 2):
            t0 = time.perf_counter()
            r = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200, (url, r.status_code)
        times = sorted(times[2:])  # the first two warm the caches
        out[label] = {"p50_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))]}
    return out


def old_find_tables(root: str) -> list[str]:
    """Before: the walk as it was (breadth first, every table found kept in a list, its bounds
    of 20,000 directories and 10,000 tables lifted so it reaches the whole fleet), and the list
    of (location, name) the preview then built from it."""
    from collections import deque

    from tables.delta.discover import LOG_DIR
    from tables.delta.storage.opening import as_storage

    storage = as_storage(root)
    tables: list[str] = []
    queue: deque[str] = deque([""])
    while queue:
        key = queue.popleft()
        children = storage.list_dirs(key)
        if LOG_DIR in children:
            tables.append(key)
            continue
        queue.extend(f"{key}/{n}" if key else n for n in children if not n.startswith(("_", ".")))
    return [(f"{root}/{k}", k.replace("/", ".")) for k in tables]


def scandir_peer(root: str) -> int:
    """Peer: a plain os.scandir walk, depth first, counting the directories with a `_delta_log`
    (not entering them, nor `_`/`.` directories): the least any walker of a directory does."""
    found, stack = 0, [root]
    while stack:
        path = stack.pop()
        with os.scandir(path) as entries:
            dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        if "_delta_log" in dirs:
            found += 1
        else:
            stack.extend(os.path.join(path, n) for n in dirs if not n.startswith(("_", ".")))
    return found


def discover_child(mode: str, workdir: Path, traced: bool) -> None:
    """One discovery of the fleet's 100,000 tables in this process; prints one JSON line:
    wall, CPU, tables found, the process's peak RSS (kB; Django and the app loaded, as in a
    worker) or, traced, tracemalloc's peak (bytes) over the discovery alone."""
    import re
    import tracemalloc

    root = str(workdir / "fleet")
    setup_django(workdir, migrate=False)
    from tables.delta.discover import Walk, walk_tables
    from tables.delta.storage.opening import as_storage
    from tables.services.catalog import discovery

    run = {
        "service": lambda: discovery.preview(root, None)["found"],
        "walk": lambda: sum(1 for _ in walk_tables(as_storage(root), Walk())),
        "old": lambda: len(old_find_tables(root)),
        "peer": lambda: scandir_peer(root),
    }[mode]
    if traced:
        tracemalloc.start()
    w0, c0 = time.perf_counter(), time.process_time()
    found = run()
    out = {"mode": mode, "found": found, "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}
    if traced:
        out["traced_peak_bytes"] = tracemalloc.get_traced_memory()[1]
    # VmHWM, not getrusage's ru_maxrss: a child's ru_maxrss starts at its parent's peak
    out["max_rss_kb"] = int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))
    print(json.dumps(out))


def discovery_runs(workdir: Path) -> dict:
    """Each way of discovering the fleet in a fresh process: once timed, once traced."""
    import subprocess

    scandir_peer(str(workdir / "fleet"))  # every way then finds the directories in the kernel's cache alike
    out = {}
    for mode in ("service", "walk", "old", "peer"):
        runs = []
        for traced in (False, True):
            argv = [sys.executable, __file__, "--workdir", str(workdir), "--discover-child", mode]
            done = subprocess.run(argv + (["--traced"] if traced else []), capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        out[mode] = {**runs[0], "traced_peak_bytes": runs[1]["traced_peak_bytes"]}  # time and RSS untraced
    return out


def prepare(args: argparse.Namespace) -> tuple[Path, list[Path], list[int], dict]:
    """The fleet on disk, a fresh database with every table registered as synced, and the
    database's size before and after."""
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="deltaweb-fleet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    for leftover in workdir.glob("fleet.sqlite3*"):
        leftover.unlink()  # a fresh database each run (the tables' directories are reused)
    t0 = time.perf_counter()
    paths = make_fleet(workdir, args.tables)
    made = time.perf_counter() - t0
    setup_django(workdir)
    empty = db_size(workdir / "fleet.sqlite3")
    t1 = time.perf_counter()
    ids = register(paths, args.schema_columns)
    ready = {"make_fleet_s": made, "register_s": time.perf_counter() - t1, "empty": empty}
    ready["registered"] = db_size(workdir / "fleet.sqlite3")
    print(f"{len(ids):,} tables ready in {time.perf_counter() - t0:.1f} s ({workdir})", file=sys.stderr)
    return workdir, paths, ids, ready


def measure(args: argparse.Namespace) -> dict:
    workdir, paths, ids, ready = prepare(args)
    calm = probe_pass(ids)
    import deltalake
    import pyarrow as pa

    from deltaweb.celery import app
    from tables.models import Commit, Table

    app.conf.task_always_eager = True  # the changed tables' syncs run here, as a worker would
    changed = paths[:: max(1, len(paths) // max(1, len(paths) // 100))][: max(1, len(paths) // 100)]
    for p in changed:
        deltalake.write_deltalake(str(p), pa.table({"x": [9]}), mode="append")
    Table.objects.update(next_check_at=None)
    busy = probe_pass(ids)
    sample_ids, sample_paths = ids[-args.sample :], paths[-args.sample :]
    before = old_way(sample_ids)
    rs = peer(sample_paths)
    web = pages(args.list_reps)
    first = cold_syncs(sample_ids)
    synced = db_size(workdir / "fleet.sqlite3")
    size = sizes(ready["empty"], ready["registered"], synced, len(ids), Commit.objects.count())
    print("discovering the fleet in subprocesses…", file=sys.stderr)
    found = discovery_runs(workdir)
    return {
        "benchmark": "fleet",
        "tables": len(ids),
        "ready": {k: v for k, v in ready.items() if k.endswith("_s")},
        "probe_calm": calm,
        "probe_changed": busy,
        "changed_written": len(changed),
        "sync_job_per_table": before,
        "delta_rs_version": rs,
        "pages": web,
        "first_syncs": first,
        "db_size": size,
        "discovery": found,
        "scale": len(ids) / args.sample,
    }


def report(r: dict, load: tuple[tuple[float, ...], tuple[float, ...]]) -> None:
    calm, busy, before, rs, web, size, found = (
        r[k]
        for k in (
            "probe_calm",
            "probe_changed",
            "sync_job_per_table",
            "delta_rs_version",
            "pages",
            "db_size",
            "discovery",
        )
    )
    n, scale = r["tables"], r["scale"]
    rows = [
        ("probe pass, nothing changed", f"{calm['wall_s']:.1f} s wall, {calm['cpu_s']:.1f} s CPU",
         f"{calm['requests'] / n:.2f} requests/table, {calm['job_rows']} Job rows, {calm['changed']} changed"),
        ("probe pass, 1% changed", f"{busy['wall_s']:.1f} s wall, {busy['cpu_s']:.1f} s CPU (syncs included)",
         f"{busy['changed']} changed = {r['changed_written']} written, {busy['job_rows']} Job rows"),
        ("before: a sync job per table", f"{before['cpu_s'] * scale:.1f} s CPU for the fleet (measured on {before['tables']})",
         f"{before['queries_per_table']:.1f} SQL queries and 1 Job row per table"),
        ("peer: delta-rs DeltaTable(path).version()", f"{rs['cpu_s'] * scale:.1f} s CPU for the fleet (on {rs['tables']})",
         f"{rs['wall_s'] * scale:.1f} s wall"),
        *((f"{PAGES[k][0]}", f"p50 {v['p50_ms']:.1f} ms, p95 {v['p95_ms']:.1f} ms", PAGES[k][1]) for k, v in web.items()),
        ("database per registered table", f"{size['per_table_file_bytes']:.0f} B of file, {size['per_table_row_bytes']:.0f} B of rows",
         f"{size['empty_file_bytes'] / 1e6:.1f} MB empty, {size['registered_file_bytes'] / 1e6:.1f} MB registered"),
        ("database per commit", f"{size['per_commit_bytes']:.0f} B history rows, {size['per_commit_grown_bytes']:.0f} B all a sync grew",
         f"{size['commits']:,} commits; {size['synced_file_bytes'] / 1e6:.1f} MB after the syncs"),
        *((f"discovery: {DISCOVERY[k]}", f"{v['wall_s']:.2f} s wall, {v['cpu_s']:.2f} s CPU",
           f"{v['found']:,} found; peak {v['traced_peak_bytes'] / 1e6:.1f} MB traced, max RSS {v['max_rss_kb'] / 1e3:.0f} MB")
          for k, v in found.items()),
    ]  # fmt: skip
    for name, a, b in rows:
        print(f"{name:<52} {a:<52} {b}")
    print(f"load average {load[0][0]:.2f} at start, {load[1][0]:.2f} at the end", file=sys.stderr)
    r["load"] = {"start": load[0], "end": load[1]}
    r["ratios"] = {
        "probe_cpu_vs_sync_jobs": calm["cpu_s"] / (before["cpu_s"] * scale),
        "probe_cpu_vs_delta_rs": calm["cpu_s"] / (rs["cpu_s"] * scale),
        "discovery_wall_vs_scandir": found["service"]["wall_s"] / found["peer"]["wall_s"],
        "discovery_peak_vs_old": found["service"]["traced_peak_bytes"] / found["old"]["traced_peak_bytes"],
    }
    r["goals"] = {
        "probe_cpu_s": calm["cpu_s"],
        "cpu_met": calm["cpu_s"] < GOAL_PROBE_CPU_S,
        "one_request_met": calm["requests"] <= n,
        "no_job_rows_met": calm["job_rows"] == 0,
        "list_p95_met": web["list"]["p95_ms"] <= GOAL_LIST_P95_MS,
        "search_p95_met": web["list_search"]["p95_ms"] <= GOAL_LIST_P95_MS,
    }
    print(json.dumps(r))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--list-reps", type=int, default=30)
    ap.add_argument(
        "--schema-columns", type=int, default=1, help="columns of each row's stored schema (default: the seed's 1)"
    )
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--discover-child", choices=list(DISCOVERY), help=argparse.SUPPRESS)
    ap.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.discover_child:
        discover_child(args.discover_child, args.workdir, args.traced)
        return
    load_start = os.getloadavg()
    result = measure(args)
    report(result, (load_start, os.getloadavg()))


if __name__ == "__main__":
    main()
