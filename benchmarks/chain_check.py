"""The daily chain check of a fleet on S3 (moto in server mode on loopback): storage requests and
CPU per table for the rolling look that compares every table's log with what was first seen
(tables.services.chain.look), and the change probe's requests with the chain kept beside it.

Usage: .venv/bin/python benchmarks/chain_check.py [--tables 1000] [--commits 10] [--rehash 10]

The tables are server-side copies of a small delta-rs table's log (the look reads nothing
else), registered as synced. The first rolling look records them (`adopt`: one listing and a
read of every commit); the next ones are daily looks: one listing per 1,000 files, plus
DELTAWEB_CHAIN_REHASH_PER_LOOK commits read again (`--rehash`), then with none read again. The
copies are made seconds before the first look, so no commit's time is too close to the read
that hashed it (a commit a sync records right after it was written is read once more at the
next look: one more request per new commit, once). Each request goes through a recording
proxy, so requests are counted, not assumed; CPU is this process's (the app's side: listing,
hashing, the database), not the S3 server's. The 10,000-table figures are derived from the
measured tables (the look is per table: it scales linearly).
Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fleet_s3 import start_moto  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--rehash", type=int, default=10, help="DELTAWEB_CHAIN_REHASH_PER_LOOK")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="deltaweb-chain-"))
    moto, env = start_moto()
    try:
        run(args, work, env)
    finally:
        moto.terminate()
        moto.wait(timeout=30)


def _fleet(args: argparse.Namespace, env: dict[str, str]) -> str:
    """A bucket holding `args.tables` copies of a delta-rs table's log; its name."""
    import boto3
    import deltalake
    import pyarrow as pa

    bucket = f"chain-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    opts = {**env, "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    for i in range(args.commits):
        deltalake.write_deltalake(f"s3://{bucket}/seed", pa.table({"x": [i]}), mode="append", storage_options=opts)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="seed/_delta_log/")["Contents"]]
    t0 = time.perf_counter()
    for i in range(args.tables):
        for k in keys:
            s3.copy_object(Bucket=bucket, Key=f"t{i:05d}/{k[len('seed/') :]}", CopySource={"Bucket": bucket, "Key": k})
    print(f"{args.tables} logs of {len(keys)} files copied in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return bucket


def _setup_django(work: Path, bucket: str, rehash: int) -> None:
    os.environ.update(
        {
            "DATABASE_URL": f"sqlite:///{work / 'chain.sqlite3'}",
            "DELTAWEB_ALLOWED_ROOTS": f"s3://{bucket}/",
            "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
            "DELTAWEB_SECRET_KEY": "benchmark-only-secret-key-0123456789",
            "DELTAWEB_ALERTS": "0",
            "DELTAWEB_CHAIN_REHASH_PER_LOOK": str(rehash),
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _pass(px, ids: list[int], label: str) -> dict[str, float]:
    """One rolling look at every table (all made due): requests through the proxy, CPU, wall."""
    from django.utils import timezone

    from tables.models import ChainLook
    from tables.services.chain import look as chain

    ChainLook.objects.update(next_at=timezone.now() - timedelta(seconds=1))
    before = len(px.seen())
    w0, c0 = time.perf_counter(), time.process_time()
    totals = {"tables": 0, "hashed": 0, "findings": 0}
    while True:
        got = chain.check_due(limit=500)
        if not got["tables"]:
            break
        for k in totals:
            totals[k] += int(got[k])
    out = {
        **totals,
        "requests": len(px.seen()) - before,
        "cpu_s": time.process_time() - c0,
        "wall_s": time.perf_counter() - w0,
    }
    n = max(1, len(ids))
    print(
        f"{label:<34} {out['requests'] / n:6.2f} requests/table, {1000 * out['cpu_s'] / n:6.2f} ms CPU/table "
        f"({out['hashed']} commits hashed, {out['findings']} findings, {out['wall_s']:.1f} s wall)"
    )
    return out


def run(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    from tests.faults.proxy import FaultProxy

    os.environ.update(env)
    bucket = _fleet(args, env)
    _setup_django(work, bucket, args.rehash)
    from django.conf import settings
    from django.utils import timezone

    from tables.models import ChainLook, SyncState, Table
    from tables.services.sync import probe

    now = timezone.now()
    Table.objects.bulk_create(
        [
            Table(name=f"t{i:05d}", slug=f"t{i:05d}", location=f"s3://{bucket}/t{i:05d}", sync_state=SyncState.OK,
                  last_synced_version=args.commits - 1, last_synced_at=now)
            for i in range(args.tables)
        ],
        batch_size=1000,
    )  # fmt: skip
    ids = list(Table.objects.order_by("pk").values_list("pk", flat=True))
    time.sleep(2.5)  # the copies' times clearly before the reads that hash them (S3 lists whole seconds)
    with FaultProxy(env["AWS_ENDPOINT_URL"]) as px:
        os.environ["AWS_ENDPOINT_URL"] = px.url
        adopt = _pass(px, ids, "first look (records the chain)")
        time.sleep(2.5)
        first = _pass(px, ids, "first daily look")
        steady = _pass(px, ids, f"daily look, steady ({args.rehash} reread)")
        settings.DELTAWEB_CHAIN_REHASH_PER_LOOK = 0
        listing_only = _pass(px, ids, "daily look, steady (0 reread)")
        before = len(px.seen())
        c0 = time.process_time()
        for batch in probe.batches(ids, settings.DELTAWEB_PROBE_BATCH):
            probe.probe_tables(batch)
        probe_requests, probe_cpu = len(px.seen()) - before, time.process_time() - c0
        os.environ["AWS_ENDPOINT_URL"] = env["AWS_ENDPOINT_URL"]
    print(f"{'probe pass, nothing changed':<34} {probe_requests / len(ids):6.2f} requests/table")
    scale = 10_000 / len(ids)
    derived = {
        "requests_per_day": round(steady["requests"] * scale),
        "cpu_s_per_day": round(steady["cpu_s"] * scale, 1),
        "first_day_requests": round(first["requests"] * scale),
        "first_day_cpu_s": round(first["cpu_s"] * scale, 1),
        "listing_only_requests_per_day": round(listing_only["requests"] * scale),
        "listing_only_cpu_s_per_day": round(listing_only["cpu_s"] * scale, 1),
    }
    print(
        f"{'10,000 tables a day (derived)':<34} {derived['requests_per_day']:,} requests, "
        f"{derived['cpu_s_per_day']} s CPU (steady); first day {derived['first_day_requests']:,} requests; "
        f"listing only {derived['listing_only_requests_per_day']:,} requests, {derived['listing_only_cpu_s_per_day']} s CPU"
    )
    assert ChainLook.objects.count() == len(ids)
    print(json.dumps({"benchmark": "chain_check", "tables": len(ids), "commits": args.commits, "rehash": args.rehash,
                      "adopt": adopt, "first_daily": first, "steady": steady, "listing_only": listing_only,
                      "probe": {"requests": probe_requests, "cpu_s": probe_cpu,
                                "requests_per_table": probe_requests / len(ids)},
                      "derived_10000": derived}))  # fmt: skip


if __name__ == "__main__":
    main()
