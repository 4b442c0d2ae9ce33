"""A fleet of tables: one probe pass with nothing changed, against a sync job per table (the
way the beat worked before the probe) and against delta-rs loading each table.

Usage: .venv/bin/python benchmarks/fleet.py [--tables 10000] [--workdir DIR] [--sample 200] [--list-reps 30]

`--tables` copies of a small delta-rs table (3 commits) on local disk, registered in a fresh
SQLite database as synced. Measured, in this process:
  a) a probe pass over all of them (tables.services.sync.probe.probe_tables in batches of
     DELTAWEB_PROBE_BATCH, as the workers run it): wall and CPU seconds, storage requests per
     table, Job rows written, changed tables found (0 expected);
  b) the same pass with 1% of the tables given a new commit: the changed ones found, each
     with a sync job;
  c) the old way on `--sample` tables: a sync job per table with nothing new (start_sync's
     row, then sync_table as the worker runs it), scaled to the fleet;
  d) peer: delta-rs `DeltaTable(path).version()` on the same `--sample` tables, scaled;
  e) the tables list (/, 25 rows a page) and the tables API at that fleet size: p50/p95 of
     `--list-reps` requests through Django's test client.
Goals: a pass over 10,000 unchanged tables under 60 s of worker CPU; 1 request and 0 Job rows
per unchanged table; the tables list p95 under 100 ms. Prints a table and, last, one JSON line.
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

GOAL_CPU_S_PER_10K = 60.0
GOAL_LIST_P95_MS = 100.0


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
    paths = []
    for i in range(n):
        src = seed if i < LINKS_PER_SEED else workdir / f"seed{i // LINKS_PER_SEED}"
        if not src.exists():
            shutil.copytree(seed, src)
        dst = workdir / "fleet" / f"{i // 1000:03d}" / f"t{i:06d}"
        if not (dst / files[-1]).exists():  # a workdir made by an earlier run is reused
            for d in subdirs:
                (dst / d).mkdir(parents=True, exist_ok=True)
            for f in files:
                if not (dst / f).exists():
                    os.link(src / f, dst / f)
        paths.append(dst)
    return paths


def setup_django(workdir: Path) -> None:
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

    call_command("migrate", verbosity=0)


def register(paths: list[Path]) -> list[int]:
    """The fleet as registered and synced at version 2 (rows written directly: this measures
    the probe, not 10,000 first syncs)."""
    from django.utils import timezone

    from tables.models import SyncState, Table

    now = timezone.now()
    rows = [
        Table(
            name=f"t{i:06d}",
            slug=f"t{i:06d}",
            location=str(p),
            sync_state=SyncState.OK,
            last_synced_version=2,
            last_synced_at=now,
            next_check_at=now,
        )
        for i, p in enumerate(paths)
    ]
    Table.objects.bulk_create(rows, batch_size=1000)
    return list(Table.objects.order_by("pk").values_list("pk", flat=True))


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
    from tables.services import jobs
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
    for label, client, url in (
        ("list", browser, "/"),
        ("list_search", browser, "/?q=t09"),
        ("api", api, "/api/tables/"),
    ):
        times = []
        for _ in range(reps + 2):
            t0 = time.perf_counter()
            r = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200, (url, r.status_code)
        times = sorted(times[2:])  # the first two warm the caches
        out[label] = {"p50_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--list-reps", type=int, default=30)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="deltaweb-fleet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    paths = make_fleet(workdir, args.tables)
    setup_django(workdir)
    ids = register(paths)
    print(f"{len(ids):,} tables ready in {time.perf_counter() - t0:.1f} s ({workdir})", file=sys.stderr)

    calm = probe_pass(ids)
    import deltalake
    import pyarrow as pa

    from deltaweb.celery import app

    app.conf.task_always_eager = True  # the changed tables' syncs run here, as a worker would
    changed = paths[:: max(1, len(paths) // max(1, len(paths) // 100))][: max(1, len(paths) // 100)]
    for p in changed:
        deltalake.write_deltalake(str(p), pa.table({"x": [9]}), mode="append")
    from tables.models import Table

    Table.objects.update(next_check_at=None)
    busy = probe_pass(ids)
    sample_ids, sample_paths = ids[-args.sample :], paths[-args.sample :]
    before = old_way(sample_ids)
    rs = peer(sample_paths)
    web = pages(args.list_reps)

    scale = len(ids) / args.sample
    rows = [
        ("probe pass, nothing changed", f"{calm['wall_s']:.1f} s wall, {calm['cpu_s']:.1f} s CPU",
         f"{calm['requests'] / len(ids):.2f} requests/table, {calm['job_rows']} Job rows, {calm['changed']} changed"),
        ("probe pass, 1% changed", f"{busy['wall_s']:.1f} s wall, {busy['cpu_s']:.1f} s CPU (syncs included)",
         f"{busy['changed']} changed = {len(changed)} written, {busy['job_rows']} Job rows"),
        ("before: a sync job per table", f"{before['cpu_s'] * scale:.1f} s CPU for the fleet (measured on {args.sample})",
         f"{before['queries_per_table']:.1f} SQL queries and 1 Job row per table"),
        ("peer: delta-rs DeltaTable(path).version()", f"{rs['cpu_s'] * scale:.1f} s CPU for the fleet (on {args.sample})",
         f"{rs['wall_s'] * scale:.1f} s wall"),
        ("tables list (/), 25 a page", f"p50 {web['list']['p50_ms']:.1f} ms, p95 {web['list']['p95_ms']:.1f} ms", ""),
        ("tables list, searched", f"p50 {web['list_search']['p50_ms']:.1f} ms, p95 {web['list_search']['p95_ms']:.1f} ms", ""),
        ("tables API", f"p50 {web['api']['p50_ms']:.1f} ms, p95 {web['api']['p95_ms']:.1f} ms", ""),
    ]  # fmt: skip
    for name, a, b in rows:
        print(f"{name:<44} {a:<52} {b}")
    cpu_10k = calm["cpu_s"] * 10_000 / len(ids)
    print(
        json.dumps(
            {
                "benchmark": "fleet",
                "tables": len(ids),
                "probe_calm": calm,
                "probe_changed": busy,
                "changed_written": len(changed),
                "sync_job_per_table": before,
                "delta_rs_version": rs,
                "pages": web,
                "ratios": {
                    "probe_cpu_vs_sync_jobs": calm["cpu_s"] / (before["cpu_s"] * scale),
                    "probe_cpu_vs_delta_rs": calm["cpu_s"] / (rs["cpu_s"] * scale),
                },
                "goals": {
                    "cpu_per_10k_s": cpu_10k,
                    "cpu_met": cpu_10k < GOAL_CPU_S_PER_10K,
                    "one_request_met": calm["requests"] <= len(ids),
                    "no_job_rows_met": calm["job_rows"] == 0,
                    "list_p95_met": web["list"]["p95_ms"] < GOAL_LIST_P95_MS,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
