"""Pinning a version of N files (default 10,000): the requests and seconds it takes on S3 (moto
in server mode on loopback), with server-side copies into the pin store's prefix (a bucket
without Object Lock) and with legal holds on the exact object versions (a bucket created with
Object Lock), and the bytes a pin adds on local disk (hard links: no new data bytes).

Usage: .venv/bin/python benchmarks/pin_s3.py [--files 10000] [--json out.json]

Each table is one commit of N adds (1 KiB objects, uploaded first, not timed). The pin is the
core's `keep_version` (what a pin in the app runs). Requests are counted where they are made:
the object-store storage's own counter (obstore: listing, reads, copies, the kept log's puts)
and every boto3 call (HEAD and PutObjectLegalHold per held object, the bucket's Object Lock
and versioning checks). Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.fleet_s3 import start_moto  # noqa: E402

PLAIN, LOCKED = "pins-plain", "pins-locked"
BODY = b"x" * 1024


def commit_zero(n: int) -> bytes:
    """Version 0 of a table of `n` files (one column, no partitions)."""
    schema = json.dumps(
        {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    )
    lines = [
        {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "WRITE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "bench", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                      "partitionColumns": [], "configuration": {}, "createdTime": 1_700_000_000_000}},
    ]  # fmt: skip
    for i in range(n):
        stats = json.dumps({"numRecords": 1})
        lines.append({"add": {"path": f"part-{i:05d}.parquet", "partitionValues": {}, "size": len(BODY),
                              "modificationTime": 1_700_000_000_000, "dataChange": True, "stats": stats}})  # fmt: skip
    return b"\n".join(json.dumps(x).encode() for x in lines) + b"\n"


def upload_table(client, bucket: str, prefix: str, n: int) -> None:
    def one(i: int) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/part-{i:05d}.parquet", Body=BODY)

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(one, range(n)))
    client.put_object(Bucket=bucket, Key=f"{prefix}/_delta_log/{0:020d}.json", Body=commit_zero(n))


class BotoCount:
    """Counts every request a boto3 client the storage layer builds sends."""

    def __init__(self) -> None:
        self.count = 0

    def install(self) -> None:
        from tables.delta.storage.backends import s3_versions

        real = s3_versions.build_client

        def counted(loc, options):
            client = real(loc, options)
            client.meta.events.register("before-send.s3", self._one)
            return client

        s3_versions.build_client = counted

    def _one(self, **_kw) -> None:
        self.count += 1


def pin_s3(bucket: str, n: int, hold: bool, boto: BotoCount) -> dict:
    from tables.delta.storage.opening import as_storage
    from tables.delta.write.keep import keep_version

    src, dest = as_storage(f"s3://{bucket}/table"), as_storage(f"s3://{bucket}/pins/1-v0")
    before = boto.count
    t0 = time.perf_counter()
    result = keep_version(src, 0, dest, hold=hold)
    seconds = time.perf_counter() - t0
    requests = src.requests + dest.requests + boto.count - before
    return {"files": result.files, "placed": result.placed, "requests": requests,
            "perFile": round(requests / n, 3), "seconds": round(seconds, 2),
            "bytesCopiedThroughDeltaweb": result.bytes_copied}  # fmt: skip


def pin_local(n: int) -> dict:
    from tables.delta.write.keep import keep_version

    with tempfile.TemporaryDirectory() as tmp:
        table, kept = Path(tmp) / "table", Path(tmp) / "pins" / "1-v0"
        (table / "_delta_log").mkdir(parents=True)
        for i in range(n):
            (table / f"part-{i:05d}.parquet").write_bytes(BODY)
        (table / "_delta_log" / f"{0:020d}.json").write_bytes(commit_zero(n))
        t0 = time.perf_counter()
        result = keep_version(str(table), 0, str(kept))
        seconds = time.perf_counter() - t0
        new_data = log = 0
        for p in kept.rglob("*"):
            if p.is_file():
                st = os.stat(p)
                if "_delta_log" in p.parts:
                    log += st.st_size
                elif st.st_nlink == 1:  # not shared with the table: bytes the pin added
                    new_data += st.st_size
        return {"files": result.files, "placed": result.placed, "seconds": round(seconds, 2),
                "newDataBytes": new_data, "logBytes": log, "dataBytes": result.bytes}  # fmt: skip


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
        client.create_bucket(Bucket=PLAIN)
        client.create_bucket(Bucket=LOCKED, ObjectLockEnabledForBucket=True)
        t0 = time.perf_counter()
        for bucket in (PLAIN, LOCKED):
            upload_table(client, bucket, "table", args.files)
        setup = time.perf_counter() - t0
        boto = BotoCount()
        boto.install()
        out = {
            "files": args.files,
            "setupSeconds": round(setup, 1),
            "s3Copies": pin_s3(PLAIN, args.files, False, boto),
            "s3Holds": pin_s3(LOCKED, args.files, True, boto),
            "local": pin_local(args.files),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"{'how':<28}{'requests':>10}{'per file':>10}{'seconds':>10}")
    for name in ("s3Copies", "s3Holds"):
        r = out[name]
        print(f"{name + ' ' + str(r['placed']):<28}{r['requests']:>10}{r['perFile']:>10}{r['seconds']:>10}")
    loc = out["local"]
    print(f"local hard links: {loc['seconds']} s, {loc['newDataBytes']} new data bytes, {loc['logBytes']} log bytes")
    line = json.dumps(out)
    if args.json:
        Path(args.json).write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
