"""Row-level jobs on local Spark: keyed diff of a big table, change data over many commits, preview.

Usage: .venv/bin/python benchmarks/spark_rows.py [--quick] [--rows N] [--commits N]
       [--many-commits N] [--workdir DIR] [--master URL] [--diff-only] [--diff-on-spark]

a) keyed diff: a table of `--rows` rows (default 10,000,000; id, region, amount, qty, note)
   written by delta-rs; version 1 overwrites it with 1% of the rows updated, 0.1% deleted and
   0.1% new ids. `tables.spark.jobs.rowdiff.keyed_diff(..., keys=["id"])` between 0 and 1; the
   counts are checked against what was generated. Rows/second = rows of both versions / time,
   the median of 3 runs (the first run is slower: the JVM compiles the job's code for this
   size of input while it runs).
   Peer, same run: both versions read by delta-rs and joined on the key by pyarrow (full
   outer join, then the changed rows found column by column), with the same counts.
   The diff takes pyarrow's route (tables.spark.jobs.rowdiff_arrow: local files, flat columns,
   up to its bounds); `--diff-on-spark` switches that route off to time Spark's two passes.
   `--diff-only` runs this part alone.
b) change data: a table with delta.enableChangeDataFeed=true written by delta-rs: 10,000 rows,
   then `--commits` commits (default 100) cycling append 1,000 rows / update 100 rows /
   delete 100 rows. `tables.spark.jobs.changes.change_data` over versions 0..commits, and
   delta-rs's `load_cdf(0, commits)` read to Arrow, for the same range; row counts must agree.
   The job runs 5 times (the median, with the first run beside it: the JVM compiles the
   job's code for this size of input during the first runs).
   `--many-commits` (default 0: skipped; the goal's size is 10,000) repeats this on a second
   table with that many commits of a tenth of the rows each, its commits written directly
   (write_changes_directly: delta-rs's update and delete reload the table every time).
c) preview: `tables.spark.jobs.preview.write_preview` (first 100 rows and the row count) of the
   change-data table's last version; "cold" is the first job of a fresh session (session
   start included), "warm" the median of 3 afterwards. Peer: delta-rs opening the version,
   reading the first 100 rows and counting them.

The Spark session (local[*], tables.spark.session) is started, and both jobs run once on tiny
tables, before timing: the numbers are for a warm, long-lived session as the worker keeps.
Prints a table and, last, one JSON line with every number (and the load average).
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

from tables.spark.jobs.changes import change_data  # noqa: E402
from tables.spark.jobs.preview import write_preview  # noqa: E402
from tables.spark.jobs.rowdiff import keyed_diff  # noqa: E402
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


def bench_diff(spark, workdir: Path, n: int, reps: int = 3) -> dict:
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
    expected = {"added": n_new, "removed": n_del, "changed": n_upd}
    times = []
    for rep in range(reps):
        t = time.perf_counter()
        result = keyed_diff(spark, str(path), 0, 1, ["id"], workdir / f"diff-out-{rep}")
        times.append(time.perf_counter() - t)
        assert result["counts"] == expected, (result["counts"], expected)
        shutil.rmtree(workdir / f"diff-out-{rep}", ignore_errors=True)
    secs = _median(times)
    t = time.perf_counter()
    peer = pyarrow_diff(str(path), 0, 1, "id")
    peer_secs = time.perf_counter() - t
    assert peer == expected, (peer, expected)
    rows = n + (n - n_del + n_new)
    return {
        "rows": n,
        "generate_s": gen,
        "keyed_diff_s": secs,
        "keyed_diff_runs_s": times,
        "rows_per_s": rows / secs,
        "counts": result["counts"],
        "peer_pyarrow_s": peer_secs,
        "peer_rows_per_s": rows / peer_secs,
    }


def pyarrow_diff(path: str, v_from: int, v_to: int, key: str) -> dict:
    """The peer: both versions read by delta-rs, a full outer join on the key by pyarrow, the
    changed rows found column by column (null-safe, NaN equal to NaN)."""
    import pyarrow.compute as pc

    a = DeltaTable(path, version=v_from).to_pyarrow_table()
    b = DeltaTable(path, version=v_to).to_pyarrow_table()
    others = [c for c in a.column_names if c != key and c in b.column_names]
    a = a.rename_columns([c if c == key else f"{c}__a" for c in a.column_names]).append_column(
        "__in_a", pa.repeat(True, a.num_rows)
    )
    b = b.rename_columns([c if c == key else f"{c}__b" for c in b.column_names]).append_column(
        "__in_b", pa.repeat(True, b.num_rows)
    )
    j = a.join(b, keys=key, join_type="full outer")
    in_a, in_b = pc.is_valid(j["__in_a"]), pc.is_valid(j["__in_b"])
    both = pc.and_(in_a, in_b)
    differs = pa.repeat(False, j.num_rows)
    for c in others:
        x, y = j[f"{c}__a"], j[f"{c}__b"]
        same = pc.fill_null(pc.equal(x, y), False)
        if pa.types.is_floating(x.type):
            same = pc.or_(same, pc.and_(pc.fill_null(pc.is_nan(x), False), pc.fill_null(pc.is_nan(y), False)))
        same = pc.or_(same, pc.and_(pc.is_null(x), pc.is_null(y)))
        differs = pc.or_(differs, pc.invert(same))
    count = lambda m: pc.sum(pc.cast(m, pa.int64())).as_py() or 0  # noqa: E731
    return {
        "added": count(pc.invert(in_a)),
        "removed": count(pc.invert(in_b)),
        "changed": count(pc.and_(both, differs)),
    }


def write_changes_directly(path: Path, commits: int, batch: int, rng: np.random.Generator) -> None:
    """`commits` commits after version 0 cycling append / update / delete, written as a Delta
    writer with change data leaves them (the data files, `_change_data/` files with the
    update pre/post images and the deleted rows, one JSON commit each), without a writer's
    per-commit cost: delta-rs's update and delete reload the table each time, tens of minutes for 10,000
    commits here. An update or delete rewrites one whole file. delta-rs's load_cdf, the peer,
    reads the same log and must count the same rows."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    dt = DeltaTable(str(path))
    rels = [Path(u.removeprefix("file://")).resolve().relative_to(path.resolve()).as_posix() for u in dt.file_uris()]
    live = {rel: pq.read_table(path / rel) for rel in rels}  # path -> its rows
    next_id, touched = int(max(pc.max(t["id"]).as_py() for t in live.values())) + 1, batch // 10
    now = int(time.time() * 1000)
    log = path / "_delta_log"
    (path / "_change_data").mkdir(exist_ok=True)

    def write(rel: str, table: pa.Table) -> dict:
        pq.write_table(table, path / rel)
        return {"path": rel, "partitionValues": {}, "size": (path / rel).stat().st_size}

    def remove(rel: str) -> dict:
        return {"remove": {"path": rel, "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
                           "partitionValues": {}, "size": (path / rel).stat().st_size}}  # fmt: skip

    def changes(table: pa.Table, kind: str) -> pa.Table:
        return table.append_column("_change_type", pa.array([kind] * table.num_rows, pa.string()))

    for i in range(commits):
        v, kind = dt.version() + 1 + i, i % 3
        if kind == 0:
            rel = f"part-{v:06d}-append.parquet"
            actions = [{"add": {**write(rel, big_table(batch, rng, np.arange(next_id, next_id + batch))),
                                "modificationTime": now, "dataChange": True}}]  # fmt: skip
            live[rel] = pq.read_table(path / rel)
            next_id, op = next_id + batch, "WRITE"
        else:
            old = sorted(live)[int(rng.integers(0, len(live)))]
            rows = live.pop(old)
            n = min(touched, rows.num_rows)
            hit, rest = rows.slice(0, n), rows.slice(n)
            if kind == 1:
                after = hit.set_column(3, "qty", pc.add(hit["qty"], pa.scalar(1, pa.int32())))
                new_rows = pa.concat_tables([after, rest])
                cdc = pa.concat_tables([changes(hit, "update_preimage"), changes(after, "update_postimage")])
                op = "UPDATE"
            else:
                new_rows, cdc, op = rest, changes(hit, "delete"), "DELETE"
            rel = f"part-{v:06d}-{op.lower()}.parquet"
            actions = [remove(old)]
            if new_rows.num_rows:
                actions.append({"add": {**write(rel, new_rows), "modificationTime": now, "dataChange": True}})
                live[rel] = new_rows
            actions.append({"cdc": {**write(f"_change_data/cdc-{v:06d}.parquet", cdc), "dataChange": False}})
        info = {"commitInfo": {"timestamp": now + v, "operation": op, "readVersion": v - 1}}
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(a) for a in [info, *actions]) + "\n")


def bench_changes(
    spark, workdir: Path, commits: int, name: str = "cdf", batch: int = 1000, direct: bool = False, reps: int = 1
) -> dict:
    rng = np.random.default_rng(SEED)
    path = workdir / name
    t0 = time.perf_counter()
    write_deltalake(str(path), big_table(10 * batch, rng), configuration={"delta.enableChangeDataFeed": "true"})
    if direct:
        write_changes_directly(path, commits, batch, rng)
    next_id, touched = 10 * batch, batch // 10
    for i in range(0 if direct else commits):
        kind = i % 3
        if kind == 0:
            write_deltalake(str(path), big_table(batch, rng, np.arange(next_id, next_id + batch)), mode="append")
            next_id += batch
        elif kind == 1:
            lo = int(rng.integers(0, next_id - touched))
            DeltaTable(str(path)).update(updates={"qty": "qty + 1"}, predicate=f"id >= {lo} AND id < {lo + touched}")
        else:
            lo = int(rng.integers(0, next_id - touched))
            DeltaTable(str(path)).delete(f"id >= {lo} AND id < {lo + touched}")
    gen = time.perf_counter() - t0
    end = DeltaTable(str(path)).version()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        result = change_data(spark, str(path), 0, end, workdir / f"{name}-out")
        times.append(time.perf_counter() - t)
    ours = _median(times)
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
        "change_data_runs_s": times,
        "rows_per_s": result["total"] / ours,
        "delta_rs_load_cdf_s": theirs,
        "delta_rs_rows_per_s": theirs_rows / theirs,
    }


def bench_preview(spark, path: Path, workdir: Path, reps: int = 3) -> dict:
    """write_preview of the table's last version, `reps` times (the median), and delta-rs
    reading the first 100 rows of that version and counting its rows."""
    version = DeltaTable(str(path)).version()
    ours = []
    for i in range(reps):
        t = time.perf_counter()
        result = write_preview(spark, str(path), version, workdir / f"preview-{i}")
        ours.append(time.perf_counter() - t)
    t = time.perf_counter()
    ds = DeltaTable(str(path), version=version).to_pyarrow_dataset()
    head, total = ds.head(100), ds.count_rows()
    theirs = time.perf_counter() - t
    assert result["total"] == total and result["rows"] == head.num_rows, (result, total)
    return {"preview_s": _median(ours), "total": total, "delta_rs_s": theirs}


def _median(times: list[float]) -> float:
    """The middle run (the upper one of an even count)."""
    return sorted(times)[len(times) // 2]


def _runs(times: list[float]) -> str:
    """How a median of several runs came about: the first run and the range."""
    if len(times) < 2:
        return ""
    return f" (median of {len(times)}; first {times[0]:.2f} s, {min(times):.2f}-{max(times):.2f} s)"


def warm_up(spark, workdir: Path) -> None:
    """Run both jobs once on tiny tables: the JVM compiles their code paths before timing."""
    rng = np.random.default_rng(SEED)
    path = workdir / "warm"
    write_deltalake(str(path), big_table(1000, rng), configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(str(path)).update(updates={"qty": "qty + 1"}, predicate="id < 10")
    keyed_diff(spark, str(path), 0, 1, ["id"], workdir / "warm-diff")
    change_data(spark, str(path), 0, 1, workdir / "warm-cdf")
    write_preview(spark, str(path), 1, workdir / "warm-preview")


def main() -> None:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000,000 rows and 20 commits")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--many-commits", type=int, default=0, help="a second change-data range (goal: 10,000)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--master", default=None, help="Spark master (default: SPARK_MASTER or local[*])")
    ap.add_argument("--diff-only", action="store_true", help="the keyed diff alone")
    ap.add_argument("--diff-on-spark", action="store_true", help="the keyed diff by Spark's two passes")
    args = ap.parse_args()
    rows, commits = (1_000_000, 20) if args.quick else (args.rows, args.commits)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="deltaweb-spark-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.diff_on_spark:
        from tables.spark.jobs import rowdiff_arrow

        rowdiff_arrow.ARROW_BYTES = -1
    many = changes = preview = None
    try:
        # the table the cold preview reads (10 files of 10,000 rows), written before the session starts
        rng = np.random.default_rng(SEED)
        for i in range(10):
            ids = np.arange(i * 10_000, (i + 1) * 10_000, dtype=np.int64)
            write_deltalake(str(workdir / "cold"), big_table(10_000, rng, ids), mode="append")
        t = time.perf_counter()
        spark = get_spark(args.master)
        startup = time.perf_counter() - t
        write_preview(spark, str(workdir / "cold"), 9, workdir / "cold-preview")
        cold_preview = time.perf_counter() - t
        warm_up(spark, workdir)
        diff = bench_diff(spark, workdir, rows)
        if not args.diff_only:
            changes = bench_changes(spark, workdir, commits, reps=5)
            preview = bench_preview(spark, workdir / "cdf", workdir)
        if args.many_commits and not args.diff_only:
            many = bench_changes(spark, workdir, args.many_commits, name="cdf-many", batch=100, direct=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    load = os.getloadavg()
    print(f"Spark {spark.version}, master {spark.sparkContext.master}, session start {startup:.1f} s, ", end="")
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("| job | input | deltaweb on Spark | rows/s | peer (same run) |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| keyed diff, 2 versions{' (Spark)' if args.diff_on_spark else ''} | {diff['rows']:,} rows, {sum(diff['counts'].values()):,} differences | "
        f"{diff['keyed_diff_s']:.1f} s{_runs(diff['keyed_diff_runs_s'])} | {diff['rows_per_s']:,.0f} | delta-rs read + pyarrow join "
        f"{diff['peer_pyarrow_s']:.1f} s ({diff['peer_rows_per_s']:,.0f} rows/s) |"
    )
    for c in (changes, many):
        if c is None:
            continue
        print(
            f"| change data, versions 0..{c['commits']} | {c['change_rows']:,} change rows | "
            f"{c['change_data_s']:.2f} s{_runs(c['change_data_runs_s'])} | {c['rows_per_s']:,.0f} | "
            f"load_cdf {c['delta_rs_load_cdf_s']:.2f} s "
            f"({c['delta_rs_rows_per_s']:,.0f} rows/s) |"
        )
    if preview is None:
        print(json.dumps({"startup_s": startup, "load": load, "diff": diff, "diff_on_spark": args.diff_on_spark}))
        return
    print(
        f"| preview, first 100 rows + count | {preview['total']:,} rows | warm {preview['preview_s']:.2f} s; "
        f"first job of a fresh session {cold_preview - startup:.1f} s (+ session start {startup:.1f} s) | — | delta-rs head + count "
        f"{preview['delta_rs_s']:.2f} s |"
    )
    print(
        json.dumps(
            {
                "startup_s": startup,
                "cold_preview_s": cold_preview,
                "load": load,
                "diff": diff,
                "changes": changes,
                "many_commits": many,
                "preview": preview,
            }
        )
    )


if __name__ == "__main__":
    main()
