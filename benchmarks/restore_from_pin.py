"""Restoring a pinned version of N files (default 10,000) after a VACUUM took them all: the
requests and seconds on S3 (moto in server mode on loopback), for planning the restore from the
pin (the request's dry run) and for running it (the objects brought back from the pin store by
server-side copies and checked, then the RESTORE commit).

Usage: .venv/bin/python benchmarks/restore_from_pin.py [--files 10000] [--json out.json]

Set-up (not timed): version 0 is one commit of N adds (1 KiB objects); the core's
`keep_version` keeps it in the pin store's prefix (what a pin runs); version 1 overwrites the
table with one new file and every old object is deleted (what a zero-retention VACUUM does).
Requests are the object-store storages' own counters (the table's and the kept table's:
listings, HEADs, reads, CopyObject, the commit's put); a listing counts once there, whatever
its pages (1,000 objects each: listing 10,000 objects is 10 more requests on the wire). Prints
one JSON line. Measured on this machine (benchmarks/results/restore_from_pin.json, 10,000
files, moto on loopback, shared cores): planning 12 s, 10 counted requests (~20 on the wire);
the run 89 s, 10,017 counted (10,000 CopyObject, ~10,040 on the wire), 81 s of it the copies
(moto answers a CopyObject in about 8 ms of its one Python process, 16 at once).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fleet_s3 import start_moto  # noqa: E402
from benchmarks.pin_s3 import BODY, upload_table  # noqa: E402

BUCKET = "restore-from-pin"


def vacuum_everything(client, n: int) -> None:
    """Version 1: the N files removed, one new file added; then the N objects deleted."""
    lines = [{"commitInfo": {"timestamp": 1_700_000_001_000, "operation": "WRITE"}}]
    lines += [
        {"remove": {"path": f"part-{i:05d}.parquet", "deletionTimestamp": 1_700_000_001_000, "dataChange": True,
                    "extendedFileMetadata": True, "partitionValues": {}, "size": len(BODY)}}
        for i in range(n)
    ]  # fmt: skip
    lines.append({"add": {"path": "new-00000.parquet", "partitionValues": {}, "size": len(BODY),
                          "modificationTime": 1_700_000_001_000, "dataChange": True,
                          "stats": json.dumps({"numRecords": 1})}})  # fmt: skip
    client.put_object(Bucket=BUCKET, Key="table/new-00000.parquet", Body=BODY)
    body = b"\n".join(json.dumps(x).encode() for x in lines) + b"\n"
    client.put_object(Bucket=BUCKET, Key=f"table/_delta_log/{1:020d}.json", Body=body)

    def drop(keys: list[str]) -> None:
        client.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys]})

    keys = [f"table/part-{i:05d}.parquet" for i in range(n)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(drop, [keys[i : i + 1000] for i in range(0, n, 1000)]))


def measure(n: int) -> dict:
    from tables.delta.restore.commit import commit_restore
    from tables.delta.restore.from_pin import bring_back
    from tables.delta.restore.plan import plan_restore
    from tables.delta.storage.opening import as_storage

    table_uri, kept_uri = f"s3://{BUCKET}/table", f"s3://{BUCKET}/pins/1-v0"
    table, kept = as_storage(table_uri), as_storage(kept_uri)
    t0 = time.perf_counter()
    plan = plan_restore(table, version=0, pinned=kept)
    plan_seconds = time.perf_counter() - t0
    plan_requests = table.requests + kept.requests
    assert plan.from_pin["count"] == n, plan.from_pin["count"]

    table, kept = as_storage(table_uri), as_storage(kept_uri)  # fresh counters, no cached listing
    t0 = time.perf_counter()
    done = bring_back(table, kept, plan.pinned_files)
    copy_seconds = time.perf_counter() - t0
    copy_requests = table.requests + kept.requests
    t0 = time.perf_counter()
    result = commit_restore(table, plan)
    commit_seconds = time.perf_counter() - t0
    commit_requests = table.requests + kept.requests - copy_requests
    assert result["verified"] and done["copied"] == n
    return {
        "files": n,
        "plan": {"seconds": round(plan_seconds, 2), "requests": plan_requests},
        "bringBack": {
            "seconds": round(copy_seconds, 2),
            "requests": copy_requests,
            "placed": done["placed"],
            "bytes": done["bytes"],
        },
        "commit": {"seconds": round(commit_seconds, 2), "requests": commit_requests, "version": result["version"]},
        "run": {"seconds": round(copy_seconds + commit_seconds, 2), "requests": copy_requests + commit_requests},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--json", default=None, help="also write the JSON line to this file")
    args = ap.parse_args()
    proc, env = start_moto()
    os.environ.update(env)
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        t0 = time.perf_counter()
        upload_table(client, BUCKET, "table", args.files)
        setup = time.perf_counter() - t0
        out = measure_after_vacuum(client, args.files)
        out["setupSeconds"] = round(setup, 1)
        line = json.dumps(out)
        print(line, flush=True)
        if args.json:
            Path(args.json).write_text(line + "\n")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def measure_after_vacuum(client, n: int) -> dict:
    """Keep version 0, VACUUM it away (version 1), then time the restore from the pin."""
    from tables.delta.write.keep import keep_version

    keep_version(f"s3://{BUCKET}/table", 0, f"s3://{BUCKET}/pins/1-v0")
    vacuum_everything(client, n)
    return measure(n)


if __name__ == "__main__":
    main()
