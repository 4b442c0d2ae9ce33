"""Row-level jobs on local Spark: keyed diff of a big table, change data over many commits.

Usage: .venv/bin/python benchmarks/spark_rows.py [--quick] [--rows N] [--commits N] [--workdir DIR]

a) keyed diff: a table of `--rows` rows (default 10,000,000; id, region, amount, qty, note)
   written by delta-rs; version 1 overwrites it with 1% of the rows updated, 0.1% deleted and
   0.1% new ids. `tables.spark.rowdiff.keyed_diff(..., keys=["id"])` between 0 and 1; the
   counts are checked against what was generated. Rows/second = rows of both versions / time.
b) change data: a table with delta.enableChangeDataFeed=true written by delta-rs: 10,000 rows,
   then `--commits` commits (default 100) cycling append 1,000 rows / update 100 rows /
   delete 100 rows. `tables.spark.changes.change_data` over versions 0..commits, and
   delta-rs's `load_cdf(0, commits)` read to Arrow, for the same range; row counts must agree.

The Spark session (local[*], tables.spark.session) is started, and both jobs run once on tiny
tables, before timing: the numbers are for a warm, long-lived session as the worker keeps.
Prints a table and, last, one JSON line with every number.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.changes import change_data  # noqa: E402
from tables.spark.rowdiff import keyed_diff  # noqa: E402
from tables.spark.session import get_spark  # noqa: E402

SEED = 7
REGIONS = np.array(["eu", "us", "apac", "latam", "mea", "nordics", "dach", "uk", "fr", "jp"])


def big_table(n: int, rng: np.random.Generator, ids: np.ndarray | None = None) -> pa.Table:
    ids = np.arange(n, dtype=np.int64) if ids is None else ids
    return pa.table(
        {
            "id": ids,
            "region": pa.array(REGIONS[ids % len(REGIONS)]),
            "amount": rng.random(len(ids)) * 1000,
            "qty": (ids % 97).astype(np.int32),
            "note": pa.array(np.char.add("n", (ids % 1000).astype(str))),
        }
    )


def bench_diff(spark, workdir: Path, n: int) -> dict:
    rng = np.random.default_rng(SEED)
    path = workdir / "diff"
    t0 = time.perf_counter()
    v0 = big_table(n, rng)
    write_deltalake(str(path), v0)
    n_upd, n_del, n_new = n // 100, n // 1000, n // 1000
    keep = np.ones(n, dtype=bool)
    deleted = rng.choice(n, n_del, replace=False)
    keep[deleted] = False
    amount = v0.column("amount").to_numpy().copy()
    candidates = np.flatnonzero(keep)
    updated = rng.choice(candidates, n_upd, replace=False)
    amount[updated] += 1.0
    v1 = v0.set_column(2, "amount", pa.array(amount)).filter(pa.array(keep))
    v1 = pa.concat_tables([v1, big_table(n_new, rng, np.arange(n, n + n_new, dtype=np.int64))])
    write_deltalake(str(path), v1, mode="overwrite")
    gen = time.perf_counter() - t0
    del v0, v1
    t = time.perf_counter()
    result = keyed_diff(spark, str(path), 0, 1, ["id"], workdir / "diff-out")
    secs = time.perf_counter() - t
    expected = {"added": n_new, "removed": n_del, "changed": n_upd}
    assert result["counts"] == expected, (result["counts"], expected)
    rows = n + (n - n_del + n_new)
    return {"rows": n, "generate_s": gen, "keyed_diff_s": secs, "rows_per_s": rows / secs, "counts": result["counts"]}


def bench_changes(spark, workdir: Path, commits: int) -> dict:
    rng = np.random.default_rng(SEED)
    path = workdir / "cdf"
    t0 = time.perf_counter()
    write_deltalake(str(path), big_table(10_000, rng), configuration={"delta.enableChangeDataFeed": "true"})
    next_id = 10_000
    for i in range(commits):
        kind = i % 3
        if kind == 0:
            write_deltalake(str(path), big_table(1000, rng, np.arange(next_id, next_id + 1000)), mode="append")
            next_id += 1000
        elif kind == 1:
            lo = int(rng.integers(0, next_id - 100))
            DeltaTable(str(path)).update(updates={"qty": "qty + 1"}, predicate=f"id >= {lo} AND id < {lo + 100}")
        else:
            lo = int(rng.integers(0, next_id - 100))
            DeltaTable(str(path)).delete(f"id >= {lo} AND id < {lo + 100}")
    gen = time.perf_counter() - t0
    end = DeltaTable(str(path)).version()
    t = time.perf_counter()
    result = change_data(spark, str(path), 0, end, workdir / "cdf-out")
    ours = time.perf_counter() - t
    t = time.perf_counter()
    reader = DeltaTable(str(path)).load_cdf(starting_version=0, ending_version=end)
    theirs_rows = pa.RecordBatchReader.from_stream(reader).read_all().num_rows
    theirs = time.perf_counter() - t
    assert result["total"] == theirs_rows, (result["total"], theirs_rows)
    return {
        "commits": end,
        "change_rows": result["total"],
        "generate_s": gen,
        "change_data_s": ours,
        "rows_per_s": result["total"] / ours,
        "delta_rs_load_cdf_s": theirs,
        "delta_rs_rows_per_s": theirs_rows / theirs,
    }


def warm_up(spark, workdir: Path) -> None:
    """Run both jobs once on tiny tables: the JVM compiles their code paths before timing."""
    rng = np.random.default_rng(SEED)
    path = workdir / "warm"
    write_deltalake(str(path), big_table(1000, rng), configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(str(path)).update(updates={"qty": "qty + 1"}, predicate="id < 10")
    keyed_diff(spark, str(path), 0, 1, ["id"], workdir / "warm-diff")
    change_data(spark, str(path), 0, 1, workdir / "warm-cdf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000,000 rows and 20 commits")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--master", default=None, help="Spark master (default: SPARK_MASTER or local[*])")
    args = ap.parse_args()
    rows, commits = (1_000_000, 20) if args.quick else (args.rows, args.commits)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="deltaweb-spark-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        spark = get_spark(args.master)
        spark.range(1000).selectExpr("sum(id)").collect()  # warm up the JVM
        startup = time.perf_counter() - t
        warm_up(spark, workdir)
        diff = bench_diff(spark, workdir, rows)
        changes = bench_changes(spark, workdir, commits)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"Spark {spark.version}, master {spark.sparkContext.master}, session start {startup:.1f} s")
    print("| job | input | deltaweb on Spark | rows/s | delta-rs |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| keyed diff, 2 versions | {diff['rows']:,} rows, {sum(diff['counts'].values()):,} differences | "
        f"{diff['keyed_diff_s']:.1f} s | {diff['rows_per_s']:,.0f} | — (no keyed diff) |"
    )
    print(
        f"| change data, versions 0..{changes['commits']} | {changes['change_rows']:,} change rows | "
        f"{changes['change_data_s']:.1f} s | {changes['rows_per_s']:,.0f} | load_cdf {changes['delta_rs_load_cdf_s']:.2f} s "
        f"({changes['delta_rs_rows_per_s']:,.0f} rows/s) |"
    )
    print(json.dumps({"startup_s": startup, "diff": diff, "changes": changes}))


if __name__ == "__main__":
    main()
