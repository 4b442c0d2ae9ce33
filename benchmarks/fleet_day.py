"""A simulated day of a fleet: how much the database grows, and what retention keeps of it.

Usage: .venv/bin/python benchmarks/fleet_day.py [--tables 1000] [--passes 288] [--changed 0.01] [--workdir DIR]

`--tables` copies of a small delta-rs table on local disk, registered as synced (as
benchmarks/fleet.py does). Then `--passes` probe passes, one per beat interval of a day
(288 at the default 5 minutes), each after a new commit to `--changed` of the tables; the
changed tables' syncs run here, as a worker would. Measured: the rows each model gained and
the database file's growth over the day, split into the history (Commit rows: the tables' own
data, which grows with their commits) and operational rows (jobs, alert scans and
deliveries); then the retention prune (tables.services.ops.retention.prune_operational) as it
runs once those rows are DELTAWEB_RETENTION_DAYS old, and what it leaves. Prints a table and,
last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from fleet import make_fleet, register, setup_django  # noqa: E402


def row_counts() -> dict[str, int]:
    from django.apps import apps

    return {m._meta.label: m.objects.count() for m in apps.get_models() if m._meta.managed}


def db_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("PRAGMA page_count")
        pages = cur.fetchone()[0]
        cur.execute("PRAGMA freelist_count")
        free = cur.fetchone()[0]
        cur.execute("PRAGMA page_size")
        size = cur.fetchone()[0]
    return (pages - free) * size


def simulate_day(paths: list[Path], ids: list[int], passes: int, changed: float) -> dict:
    import deltalake
    import pyarrow as pa
    from django.conf import settings

    from tables.models import Table
    from tables.services.sync import probe

    every = max(1, round(1 / changed)) if changed > 0 else 0
    found = written = 0
    cpu0 = time.process_time()
    for n in range(passes):
        if every:
            for p in paths[n % every :: every]:
                deltalake.write_deltalake(str(p), pa.table({"x": [n]}), mode="append")
                written += 1
        Table.objects.update(next_check_at=None)  # a beat interval has passed: all are due
        for batch in probe.batches(ids, settings.DELTAWEB_PROBE_BATCH):
            found += int(probe.probe_tables(batch).as_dict()["changed"])
    return {"commits_written": written, "changed_found": found, "cpu_s": time.process_time() - cpu0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=1_000)
    ap.add_argument("--passes", type=int, default=288)
    ap.add_argument("--changed", type=float, default=0.01, help="share of the tables given a commit per pass")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="deltaweb-fleet-day-"))
    workdir.mkdir(parents=True, exist_ok=True)
    paths = make_fleet(workdir, args.tables)
    setup_django(workdir)
    ids = register(paths)

    from django.conf import settings
    from django.utils import timezone

    from deltaweb.celery import app
    from tables.services.ops import retention

    app.conf.task_always_eager = True  # the changed tables' syncs run here
    rows0, bytes0 = row_counts(), db_bytes()
    day = simulate_day(paths, ids, args.passes, args.changed)
    rows1, bytes1 = row_counts(), db_bytes()
    later = timezone.now() + timedelta(days=float(settings.DELTAWEB_RETENTION_DAYS), seconds=1)
    pruned = retention.prune_operational(later)
    rows2, bytes2 = row_counts(), db_bytes()

    grew = {k: rows1[k] - rows0.get(k, 0) for k in rows1 if rows1[k] != rows0.get(k, 0)}
    kept = {k: rows2[k] - rows0.get(k, 0) for k in grew}
    print(f"{args.tables:,} tables, {args.passes} probe passes, {day['commits_written']:,} commits written")
    print(f"{'model':<32} {'rows added in the day':>22} {'left after retention':>22}")
    for k in sorted(grew):
        print(f"{k:<32} {grew[k]:>22,} {kept[k]:>22,}")
    print(f"database: +{(bytes1 - bytes0) / 1e6:.2f} MB in the day, +{(bytes2 - bytes0) / 1e6:.2f} MB after the prune")
    print(f"probe passes and syncs: {day['cpu_s']:.1f} s CPU; {day['changed_found']:,} changes found")
    per_commit = (bytes1 - bytes0) / max(1, day["commits_written"])
    print(
        json.dumps(
            {
                "benchmark": "fleet_day",
                "tables": args.tables,
                "passes": args.passes,
                "day": day,
                "rows_added": grew,
                "rows_after_retention": kept,
                "pruned": pruned,
                "db_bytes_day": bytes1 - bytes0,
                "db_bytes_after_retention": bytes2 - bytes0,
                "db_bytes_per_commit": per_commit,
                "retention_days": float(settings.DELTAWEB_RETENTION_DAYS),
            }
        )
    )


if __name__ == "__main__":
    main()
