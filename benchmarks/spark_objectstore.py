"""Spark reading an object-store table: the spool route, the data source route and delta-rs, side
by side on one moto server (every request held --latency-ms, as a real store's round trip).

Usage: .venv/bin/python benchmarks/spark_objectstore.py [--files N] [--rows N] [--reps N] [--latency-ms MS]

The table: --files data files (default 32) of --rows rows each (default 200,000; an id, a
string, a double), written by delta-rs on disk and uploaded. Each case reads every row of the
latest version and sums a column (so every file is fetched and decoded), on the process's
Spark session (SPARK_MASTER, local[*] by default; started and warmed first; on a cluster
master the spool case is left out, as the app refuses it there):

  spool       DELTAWEB_SPARK_OBJECTSTORE_ROUTE=spool, an empty spool each run (cold): the
              driver fetches the files, Spark's Parquet reader reads them
  datasource  DELTAWEB_SPARK_OBJECTSTORE_ROUTE=datasource: the driver HEADs the files, the
              executors fetch and decode them (obstore + pyarrow)
  disk        the same table on the local disk, Spark's own reader (the floor)
  delta-rs    DeltaTable(s3://..., storage_options).to_pyarrow_table() and the sum (the peer)

Each case runs once to warm up, then they are interleaved; medians of --reps runs; requests counted in moto's log. Goal: the data
source route (the one a cluster takes) within 1.5x of the spool route on a local master, at
most 2x delta-rs, and requests = one HEAD and one GET per data file plus the log's.
Prints a table and, last, one JSON line with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from objectstore import Moto, env_for  # noqa: E402  (benchmarks/objectstore.py: moto with latency)

BUCKET = "sparkbench"
CASES = ("spool", "datasource", "disk", "delta-rs")


def write_table(root: Path, files: int, rows: int) -> None:
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    for i in range(files):
        ids = np.arange(i * rows, (i + 1) * rows, dtype=np.int64)
        batch = pa.table({"id": ids, "s": pa.array([f"row-{j % 1000}" for j in ids]), "d": ids * 0.5})
        write_deltalake(root, batch, mode="append")


def upload(endpoint: str, root: Path) -> str:
    import boto3

    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    )
    client.create_bucket(Bucket=BUCKET)
    for f in sorted(root.rglob("*")):
        if f.is_file():
            client.upload_file(str(f), BUCKET, f"t/{f.relative_to(root).as_posix()}")
    return f"s3://{BUCKET}/t"


def run(case: str, spark, uri: str, local: Path, spool: Path) -> tuple[float, float]:
    from pyspark.sql import functions as F

    from tables.spark.reading.read import SPOOL_ENV, read_version

    t0 = time.perf_counter()
    if case == "delta-rs":
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        opts = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
        table = DeltaTable(uri, storage_options=opts).to_pyarrow_table()
        total = pc.sum(table.column("d")).as_py()
    else:
        if case in ("spool", "datasource"):
            os.environ["DELTAWEB_SPARK_OBJECTSTORE_ROUTE"] = case
            os.environ[SPOOL_ENV] = str(spool / f"{time.time_ns()}")  # cold: nothing spooled yet
        where = str(local) if case == "disk" else uri
        total = read_version(spark, where).agg(F.sum("d")).collect()[0][0]
    return time.perf_counter() - t0, float(total)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=32)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="deltaweb-spark-os-"))
    local = work / "table"
    write_table(local, args.files, args.rows)
    moto = Moto(work, args.latency_ms)
    try:
        os.environ.update(env_for(moto.endpoint))
        uri = upload(moto.endpoint, local)
        from tables.spark.session import get_spark

        spark = get_spark()
        if not spark.sparkContext.master.startswith("local"):
            cases = tuple(c for c in CASES if c != "spool")  # a cluster cannot read the driver's spool
        else:
            cases = CASES
        for case in cases:  # warm each route once: the JIT, Python workers, the data source's first planning
            run(case, spark, uri, local, work)
        times: dict[str, list[float]] = {c: [] for c in cases}
        requests: dict[str, list[int]] = {c: [] for c in cases}
        sums = set()
        for _ in range(args.reps):
            for case in cases:
                before = moto.requests()
                seconds, total = run(case, spark, uri, local, work)
                requests[case].append(moto.requests() - before)
                times[case].append(seconds)
                sums.add(total)
        if len(sums) != 1:
            raise SystemExit(f"the cases disagree: sums {sorted(sums)}")
    finally:
        moto.stop()
    med = {c: statistics.median(times[c]) for c in cases}
    print(f"{args.files} files x {args.rows} rows, latency {args.latency_ms} ms, master {spark.sparkContext.master}")
    print(f"{'case':<12}{'median s':>10}{'requests':>10}{'vs delta-rs':>13}")
    for c in cases:
        print(f"{c:<12}{med[c]:>10.2f}{statistics.median(requests[c]):>10.0f}{med[c] / med['delta-rs']:>12.2f}x")
    if "spool" in med:
        print(f"datasource / spool: {med['datasource'] / med['spool']:.2f}x")
    print(
        json.dumps(
            {
                "files": args.files,
                "rows": args.rows,
                "latency_ms": args.latency_ms,
                "master": spark.sparkContext.master,
                "median_s": med,
                "requests": {c: statistics.median(requests[c]) for c in cases},
                "runs_s": times,
            }
        )
    )


if __name__ == "__main__":
    main()
