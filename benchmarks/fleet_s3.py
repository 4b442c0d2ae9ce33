"""A fleet on S3 (moto in server mode on loopback): storage requests per unchanged table in a
probe pass, and the time from a commit to its row in the history with push (S3 event
notifications through SQS), against polling's expected delay at the configured interval.

Usage: .venv/bin/python benchmarks/fleet_s3.py [--tables 1000] [--commits 20] [--interval 300]

The tables are copies (server-side) of a small delta-rs table, registered as synced. Each
request the probe makes goes through a recording proxy, so requests are counted, not assumed.
Push: a listener thread (tables.services.sync.events.listen) receives the bucket's events and
syncs in this process (Celery eager), as `manage.py listen_events` and a worker would.
Goals: at most 1 request per unchanged table; a pushed commit in its history under 5 s (p95).
Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def start_moto() -> tuple[subprocess.Popen, dict[str, str]]:
    from tests.conftest import free_port, wait_until_answering

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    wait_until_answering(f"{endpoint}/moto-api/", proc, "moto_server", 120)
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return proc, env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--interval", type=int, default=300, help="DELTAWEB_SYNC_INTERVAL_SECONDS for polling's figure")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="deltaweb-fleet-s3-"))
    moto, env = start_moto()
    try:
        run(args, work, env)
    finally:
        moto.terminate()
        moto.wait(timeout=30)


def run(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    import boto3
    import deltalake
    import pyarrow as pa

    from tests.faults.proxy import FaultProxy

    os.environ.update(env)
    bucket = f"fleet-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    opts = {**env, "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    seed = f"s3://{bucket}/seed"
    for i in range(2):
        deltalake.write_deltalake(seed, pa.table({"x": [i]}), mode="append", storage_options=opts)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="seed/")["Contents"]]
    t0 = time.perf_counter()
    for i in range(args.tables):
        for k in keys:
            s3.copy_object(Bucket=bucket, Key=f"t{i:05d}/{k[len('seed/') :]}", CopySource={"Bucket": bucket, "Key": k})
    print(f"{args.tables} tables copied in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    os.environ.update(
        {
            "DATABASE_URL": f"sqlite:///{work / 'fleet.sqlite3'}",
            "DELTAWEB_ALLOWED_ROOTS": f"s3://{bucket}/",
            "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
            "DELTAWEB_SECRET_KEY": "benchmark-only-secret-key-0123456789",
            "DELTAWEB_ALERTS": "0",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.conf import settings
    from django.utils import timezone

    from deltaweb.celery import app
    from tables.models import Commit, SyncState, Table
    from tables.services.sync import events, probe

    now = timezone.now()
    Table.objects.bulk_create(
        [
            Table(
                name=f"t{i:05d}",
                slug=f"t{i:05d}",
                location=f"s3://{bucket}/t{i:05d}",
                sync_state=SyncState.OK,
                last_synced_version=1,
                last_synced_at=now,
            )
            for i in range(args.tables)
        ],
        batch_size=1000,
    )
    ids = list(Table.objects.order_by("pk").values_list("pk", flat=True))
    with FaultProxy(env["AWS_ENDPOINT_URL"]) as px:
        os.environ["AWS_ENDPOINT_URL"] = px.url
        w0, c0 = time.perf_counter(), time.process_time()
        totals = {"unchanged": 0, "changed": 0, "failed": 0}
        for batch in probe.batches(ids, settings.DELTAWEB_PROBE_BATCH):
            got = probe.probe_tables(batch)
            totals = {"unchanged": totals["unchanged"] + len(got.unchanged), "changed": totals["changed"] + len(got.changed),
                      "failed": totals["failed"] + len(got.failed)}  # fmt: skip
        probe_s = {"wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}
        requests = len(px.seen())
        os.environ["AWS_ENDPOINT_URL"] = env["AWS_ENDPOINT_URL"]

    # push: the bucket's events to a queue, a listener syncing in this process
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"commits-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={"QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]},
    )
    app.conf.task_always_eager = True
    stop = threading.Event()
    listener = threading.Thread(target=events.listen, args=(url, 1, stop.is_set), daemon=True)
    listener.start()
    latencies = []
    for n in range(args.commits):
        table = Table.objects.get(pk=ids[n % len(ids)])
        target = (table.last_synced_version or 0) + 1
        written = time.perf_counter()  # before the write: an upper bound (the data file's PUT included)
        deltalake.write_deltalake(table.location, pa.table({"x": [n]}), mode="append", storage_options=opts)
        while not Commit.objects.filter(table=table, version=target).exists():
            if time.perf_counter() - written > 120:
                raise SystemExit(f"commit {target} of {table.name} not seen in 120 s")
            time.sleep(0.05)
        latencies.append(time.perf_counter() - written)
    stop.set()
    listener.join(timeout=30)
    latencies.sort()
    p50, p95 = statistics.median(latencies), latencies[int(0.95 * (len(latencies) - 1))]
    # polling: a table's check falls anywhere in the interval; then the tick and the sync
    poll_p50, poll_p95 = args.interval * 0.5, args.interval * 0.95

    print(f"{'probe pass, nothing changed':<40} {requests / len(ids):.2f} requests/table, "
          f"{probe_s['wall_s']:.1f} s wall, {probe_s['cpu_s']:.1f} s CPU for {len(ids):,} tables ({totals})")  # fmt: skip
    print(f"{'commit to history row, push':<40} p50 {p50:.2f} s, p95 {p95:.2f} s ({len(latencies)} commits)")
    print(
        f"{'commit to history row, polling':<40} p50 ~{poll_p50:.0f} s, p95 ~{poll_p95:.0f} s at a {args.interval} s interval"
    )
    print(json.dumps({"benchmark": "fleet_s3", "tables": len(ids), "probe": {**totals, **probe_s, "requests": requests},
                      "requests_per_table": requests / len(ids), "push_latency_s": {"p50": p50, "p95": p95, "all": latencies},
                      "polling_expected_s": {"p50": poll_p50, "p95": poll_p95, "interval": args.interval},
                      "goals": {"one_request_met": requests <= len(ids), "push_p95_met": p95 < 5.0}}))  # fmt: skip


if __name__ == "__main__":
    main()
