"""RESTORE of a 100,000-file table: deltaweb on Spark against delta-rs restore(), same run.

Usage: .venv/bin/python benchmarks/restore.py [--files N] [--reps N] [--workdir DIR] [--master M]

The table (generated once under the work directory, commit files written directly):
  version 0  protocol (1, 2), metadata partitioned by `date`, N adds with stats
  version 1  removes N/2 of them (random) and adds N/2 new files: half the files changed
RESTORE TO VERSION 0 then adds back N/2 files and removes N/2.

Every data file exists as an empty placeholder (made once, 1.5 N files), so both sides run
their default existence check of the files to restore (ignore_missing_files=False) and
neither is asked to skip work. Each repetition restores a fresh copy of the log (the data
directories are symlinked into the copy; a restore never writes data files), and the three
contenders take turns in a rotating order:
  deltaweb   spark_plan_restore() on a warm Spark session + commit_restore()
  delta-rs   DeltaTable(copy).restore(0)   (table load included: deltaweb loads it too)
  pure       plan_restore() + commit_restore(), the pyarrow planner, for reference
Every side checks the files once: commit_restore(recheck_files=False) after a plan made
(and checked) just now, as run_restore does; delta-rs checks while it restores.
One untimed run of each warms up first (Spark's JIT and Python workers, delta-rs, the page
cache). The results are checked once: both restored tables hold version 0's files, and the
metrics agree with delta-rs's. Prints a table and, last, one JSON line.
Target: deltaweb at most 1.5x delta-rs (median over the repetitions).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import random
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tables.delta.restore.commit import commit_restore  # noqa: E402
from tables.delta.restore.plan import plan_restore  # noqa: E402
from tables.delta.snapshot.state import load_snapshot  # noqa: E402

GEN_VERSION = 1
BASE = 1_700_000_000_000
SEED = 7
TARGET_RATIO = 1.5
LOG = "_delta_log"
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "value", "type": "string", "nullable": True, "metadata": {}},
            {"name": "date", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


# ---------------------------------------------------------------- generation


def _add(rng: random.Random, i: int, version: int) -> dict:
    day = f"2024-{1 + (i % 12):02d}-{1 + (i % 28):02d}"
    stats = {
        "numRecords": 1000 + i % 97,
        "minValues": {"id": i * 1000, "value": "aaa"},
        "maxValues": {"id": i * 1000 + 999, "value": "zzz"},
        "nullCount": {"id": 0, "value": 0},
    }
    return {
        "path": f"date={day}/part-{i:06d}-{uuid.UUID(int=rng.getrandbits(128))}.c000.snappy.parquet",
        "partitionValues": {"date": day},
        "size": 10_000 + rng.randrange(90_000),
        "modificationTime": BASE + version * 1000,
        "dataChange": True,
        "stats": json.dumps(stats),
    }


def _commit_info(version: int) -> dict:
    return {
        "commitInfo": {
            "timestamp": BASE + version * 1000,
            "operation": "WRITE",
            "operationParameters": {"mode": "Append" if version else "Overwrite", "partitionBy": '["date"]'},
            "isolationLevel": "Serializable",
            "isBlindAppend": version == 0,
            "engineInfo": "benchmarks/restore.py",
        }
    }


def generate(src: Path, n: int) -> dict:
    """The two-version table under `src` (log and placeholder data files)."""
    marker = src / "generated.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("gen") == GEN_VERSION and info.get("files") == n:
            return info
    shutil.rmtree(src, ignore_errors=True)
    t0 = time.perf_counter()
    rng = random.Random(SEED)
    log = src / LOG
    log.mkdir(parents=True)
    v0 = [_add(rng, i, 0) for i in range(n)]
    metadata = {
        "metaData": {
            "id": str(uuid.UUID(int=rng.getrandbits(128))),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA,
            "partitionColumns": ["date"],
            "configuration": {},
            "createdTime": BASE,
        }
    }
    lines = [_commit_info(0), {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, metadata]
    lines += [{"add": a} for a in v0]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    gone = sorted(rng.sample(range(n), n // 2))
    v1 = [_add(rng, n + i, 1) for i in range(n // 2)]
    removes = [
        {
            "remove": {
                "path": v0[i]["path"],
                "deletionTimestamp": BASE + 1000,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": v0[i]["partitionValues"],
                "size": v0[i]["size"],
            }
        }
        for i in gone
    ]
    lines = [_commit_info(1), *removes, *({"add": a} for a in v1)]
    (log / f"{1:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    for v in (0, 1):
        os.utime(log / f"{v:020d}.json", ((BASE + v * 1000) / 1000,) * 2)
    data = src / "data"
    for a in v0 + v1:
        p = data / a["path"]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.touch()
    info = {
        "gen": GEN_VERSION,
        "files": n,
        "changed": n // 2,
        "log_bytes": sum(f.stat().st_size for f in log.iterdir()),
        "placeholders": len(v0) + len(v1),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    marker.write_text(json.dumps(info))
    return info


def fresh_copy(src: Path, dst: Path) -> Path:
    """The table's log copied, its data directories symlinked (restores never write data)."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    shutil.copytree(src / LOG, dst / LOG)
    for part in (src / "data").iterdir():
        os.symlink(part, dst / part.name)
    return dst


# ---------------------------------------------------------------- contenders


def run_deltaweb(spark, table: Path, stages: dict[str, list[float]]) -> dict:
    from tables.spark.jobs.restore import spark_plan_restore

    marks: dict[str, list[float]] = {}

    def progress(stage: str, done: int, total: int | None) -> None:
        marks.setdefault(stage, []).append(time.perf_counter())

    t0 = time.perf_counter()
    plan = spark_plan_restore(spark, table, version=0, progress=progress)
    t1 = time.perf_counter()
    result = commit_restore(table, plan, recheck_files=False)  # checked by the plan just now
    t2 = time.perf_counter()
    for stage, ts in marks.items():
        stages.setdefault(stage, []).append(ts[-1] - ts[0])
    stages.setdefault("the plan after the stages (core)", []).append(t1 - max(ts[-1] for ts in marks.values()))
    stages.setdefault("commit_restore (core)", []).append(t2 - t1)
    return {"seconds": t2 - t0, "plan": t1 - t0, "commit": t2 - t1, "result": result}


def run_pure(table: Path) -> dict:
    t0 = time.perf_counter()
    plan = plan_restore(table, version=0)
    t1 = time.perf_counter()
    result = commit_restore(table, plan, recheck_files=False)
    t2 = time.perf_counter()
    return {"seconds": t2 - t0, "plan": t1 - t0, "commit": t2 - t1, "result": result}


def run_delta_rs(table: Path) -> dict:
    from deltalake import DeltaTable

    t0 = time.perf_counter()
    metrics = DeltaTable(str(table)).restore(0, ignore_missing_files=False)
    return {"seconds": time.perf_counter() - t0, "metrics": metrics}


def stats(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "all": [round(v, 3) for v in values],
    }


# ---------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench-restore")
    ap.add_argument("--master", default=None, help="Spark master (default: SPARK_MASTER or local[*])")
    args = ap.parse_args()

    from deltalake import DeltaTable

    from tables.spark.engine.conf import resolve_master
    from tables.spark.session import get_spark

    work = args.workdir
    src = work / f"table-{args.files}"
    gen = generate(src, args.files)
    load0 = os.getloadavg()

    t0 = time.perf_counter()
    spark = get_spark(args.master)
    session_s = time.perf_counter() - t0

    # warm-up (untimed): Spark's JIT and Python workers, delta-rs, the page cache
    stages: dict[str, list[float]] = {}
    run_deltaweb(spark, fresh_copy(src, work / "copy-dw"), {})
    run_delta_rs(fresh_copy(src, work / "copy-rs"))
    run_pure(fresh_copy(src, work / "copy-pure"))

    # the one check: same resulting files, version 0's, and the same counts as delta-rs
    v0 = load_snapshot(src, 0)
    want = set(v0.file_paths())
    dw_files = set(load_snapshot(work / "copy-dw").file_paths())
    pure_files = set(load_snapshot(work / "copy-pure").file_paths())
    rs_table = DeltaTable(str(work / "copy-rs"))
    rs_files = set(rs_table.get_add_actions(flatten=True).column("path").to_pylist())
    check = {
        "deltaweb_equals_version_0": dw_files == want,
        "delta_rs_equals_version_0": rs_files == want,
        "pure_equals_version_0": pure_files == want,
        "same_files_deltaweb_delta_rs": dw_files == rs_files,
        "files_after_restore": len(dw_files),
    }

    times: dict[str, list[float]] = {"deltaweb": [], "delta-rs": [], "pure": []}
    parts: dict[str, list[float]] = {"deltaweb plan": [], "deltaweb commit": [], "pure plan": [], "pure commit": []}
    order = ["deltaweb", "delta-rs", "pure"]
    last: dict[str, dict] = {}
    for rep in range(args.reps):
        for name in order[rep % 3 :] + order[: rep % 3]:
            table = fresh_copy(src, work / f"copy-{name}")
            if name == "deltaweb":
                r = run_deltaweb(spark, table, stages)
            elif name == "pure":
                r = run_pure(table)
            else:
                r = run_delta_rs(table)
            times[name].append(r["seconds"])
            if name != "delta-rs":
                parts[f"{name} plan"].append(r["plan"])
                parts[f"{name} commit"].append(r["commit"])
            last[name] = r
    load1 = os.getloadavg()
    for name in order:
        shutil.rmtree(work / f"copy-{name}", ignore_errors=True)

    dw_metrics = last["deltaweb"]["result"]["metrics"]
    rs_metrics = last["delta-rs"]["metrics"]
    check["same_counts_as_delta_rs"] = int(dw_metrics["numRestoredFiles"]) == rs_metrics.get("numRestoredFile") and int(
        dw_metrics["numRemovedFiles"]
    ) == rs_metrics.get("numRemovedFile")
    check["verified"] = bool(last["deltaweb"]["result"]["verified"])

    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["deltaweb"] / med["delta-rs"]
    pure_ratio = med["pure"] / med["delta-rs"]

    # ---------------------------------------------------------------- report
    dl_version = importlib.metadata.version("deltalake")
    ps_version = importlib.metadata.version("pyspark")
    master = resolve_master(args.master)
    print()
    print(
        f"RESTORE TO VERSION 0 of a {args.files:,}-file table ({gen['changed']:,} files changed since); "
        f"{args.reps} repetitions, fresh copy each; deltalake {dl_version}, pyspark {ps_version} ({master}); "
        f"{os.cpu_count()} CPUs; load average {load0[0]:.2f} at start, {load1[0]:.2f} at end"
    )
    print(f"Spark session start (excluded, once per process): {session_s:.1f} s")
    print()
    w = 12

    def row(label: str, vals: list[str], note: str = "") -> None:
        print(f"{label:<36}" + "".join(f"{v:>{w}}" for v in vals) + (f"   {note}" if note else ""))

    row("seconds", ["median", "min", "max"])
    print("-" * (36 + 3 * w + 30))
    for name in order:
        s = stats(times[name])
        row(f"{name}", [f"{s['median']:.2f}", f"{s['min']:.2f}", f"{s['max']:.2f}"])
    for name, values in parts.items():
        s = stats(values)
        row(f"  {name}", [f"{s['median']:.2f}", f"{s['min']:.2f}", f"{s['max']:.2f}"])
    print(
        "deltaweb stages (first to last report of each; the check overlaps the core reading the actions from the log):"
    )
    for name, values in stages.items():
        s = stats(values)
        row(f"  {name}", [f"{s['median']:.2f}", f"{s['min']:.2f}", f"{s['max']:.2f}"])
    print()
    verdict = "MET" if ratio <= TARGET_RATIO else "MISSED"
    print(
        f"deltaweb / delta-rs = {ratio:.2f}x (target <= {TARGET_RATIO}x: {verdict}); pure / delta-rs = {pure_ratio:.2f}x"
    )
    print("checks: " + ", ".join(f"{k}={v}" for k, v in check.items()))
    print(
        json.dumps(
            {
                "benchmark": "restore",
                "files": args.files,
                "changed": gen["changed"],
                "reps": args.reps,
                "deltalake": dl_version,
                "pyspark": ps_version,
                "master": master,
                "cpus": os.cpu_count(),
                "loadavg": [load0[0], load1[0]],
                "spark_session_start_s": round(session_s, 2),
                "seconds": {k: stats(v) for k, v in times.items()},
                "parts": {k: stats(v) for k, v in parts.items()},
                "deltaweb_stages": {k: stats(v) for k, v in stages.items()},
                "ratio": round(ratio, 3),
                "pure_ratio": round(pure_ratio, 3),
                "target_ratio": TARGET_RATIO,
                "met": ratio <= TARGET_RATIO,
                "check": check,
                "generated": gen,
            }
        )
    )


if __name__ == "__main__":
    main()
