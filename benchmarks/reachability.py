"""Reachability map of a 10,000-version, 100,000-file table: deltaweb vs delta-rs.

Usage: .venv/bin/python benchmarks/reachability.py [--versions N] [--files-per-commit K] [--reps R]

The table (written directly, data files empty on disk): each commit adds K files and, from
version 1000 on, removes K/2 older ones; then 10% of the removed files are deleted as VACUUM
would. deltaweb computes every version's reachability in one call (fresh process per run).
delta-rs has no such call: the peer is what a user would do with it, load a version and check
that its files exist; it is timed on a sample of versions and scaled to all of them.

Prints a table and, last, one JSON line with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = Path("/tmp/deltaweb-bench/reachability")


def generate(root: Path, versions: int, per_commit: int, seed: int = 11) -> tuple[int, int]:
    """Write the table; returns (files written, files deleted as by VACUUM)."""
    rng = random.Random(seed)
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    active: list[str] = []
    removed: list[str] = []
    t0 = 1_700_000_000_000
    written = 0
    for v in range(versions):
        lines = [json.dumps({"commitInfo": {"timestamp": t0 + v * 1000, "operation": "WRITE"}})]
        if v == 0:
            lines.append(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}))
            meta = {
                "id": "bench",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": t0,
            }
            lines.append(json.dumps({"metaData": meta}))
        if v >= 1000 and len(active) > per_commit:
            for _ in range(per_commit // 2):
                path = active.pop(rng.randrange(len(active)))
                removed.append(path)
                lines.append(
                    json.dumps({"remove": {"path": path, "deletionTimestamp": t0 + v * 1000, "dataChange": True}})
                )
        for i in range(per_commit):
            path = f"part-{v:05d}-{i:03d}.parquet"
            (root / path).touch()
            written += 1
            active.append(path)
            add = {"path": path, "partitionValues": {}, "size": 100, "modificationTime": t0, "dataChange": True}
            lines.append(json.dumps({"add": add}))
        (log / f"{v:020}.json").write_text("\n".join(lines) + "\n")
    vacuumed = rng.sample(removed, len(removed) // 10)
    for path in vacuumed:
        os.unlink(root / path)
    return written, len(vacuumed)


def append_commits(root: Path, start: int, count: int, per_commit: int, seed: int = 12) -> None:
    """`count` more commits in the generator's pattern: each adds K files and removes K/2."""
    rng = random.Random(seed)
    t0 = 1_700_000_000_000
    active = sorted(p.name for p in root.glob("part-*.parquet"))
    for v in range(start, start + count):
        lines = [json.dumps({"commitInfo": {"timestamp": t0 + v * 1000, "operation": "WRITE"}})]
        for _ in range(per_commit // 2):
            path = active.pop(rng.randrange(len(active)))
            lines.append(json.dumps({"remove": {"path": path, "deletionTimestamp": t0 + v * 1000, "dataChange": True}}))
        for i in range(per_commit):
            path = f"part-{v:05d}-{i:03d}.parquet"
            (root / path).touch()
            add = {"path": path, "partitionValues": {}, "size": 100, "modificationTime": t0, "dataChange": True}
            lines.append(json.dumps({"add": add}))
        (root / "_delta_log" / f"{v:020}.json").write_text("\n".join(lines) + "\n")


# the incremental update: the state of the full map kept, 100 commits appended, then updated;
# the answer must equal a full computation on the grown table
INCREMENTAL = """
import shutil, sys, time
sys.path.insert(0, '.')
from pathlib import Path
from benchmarks.reachability import append_commits
from tables.delta.history.reachability import answer, reach_state, reachability, update_state
src, work, versions, per_commit, added = Path(sys.argv[1]), Path(sys.argv[2]), *map(int, sys.argv[3:6])
shutil.rmtree(work, ignore_errors=True)
shutil.copytree(src, work)
now = int(time.time() * 1000)
state = reach_state(str(work))
append_commits(work, versions, added, per_commit)
t, c = time.perf_counter(), time.process_time()
state = update_state(state, str(work))
got = answer(state, str(work), now)
ms, cpu = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
full = reachability(str(work), now)
assert state.updates == 1, "fell back to the full computation"
assert got.to_dict() == full.to_dict(), "the incremental answer differs from the full one"
print(ms, cpu)
"""

OURS = """
import sys, time
t = time.perf_counter()
from tables.delta.history.reachability import reachability
r = reachability(sys.argv[1], int(time.time() * 1000))
ms = (time.perf_counter() - t) * 1000
bad = sum(1 for v in r.versions if not v.readable)
print(ms, bad, len(r.versions))
"""

PEER = """
import os, sys, time
from urllib.parse import unquote, urlparse
from deltalake import DeltaTable
path, versions = sys.argv[1], [int(v) for v in sys.argv[2].split(",")]
t = time.perf_counter()
bad = 0
for v in versions:
    dt = DeltaTable(path, version=v)
    if not all(os.path.exists(unquote(urlparse(u).path)) for u in dt.file_uris()):
        bad += 1
print((time.perf_counter() - t) * 1000 / len(versions), bad)
"""


def run(code: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, check=True)
    return out.stdout.split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", type=int, default=10_000)
    ap.add_argument("--files-per-commit", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sample", type=int, default=10, help="versions delta-rs loads per run")
    args = ap.parse_args()
    table = WORK / f"t{args.versions}x{args.files_per_commit}"
    if not (table / "_delta_log" / f"{args.versions - 1:020}.json").exists():
        import shutil

        shutil.rmtree(table, ignore_errors=True)
        t = time.perf_counter()
        written, vacuumed = generate(table, args.versions, args.files_per_commit)
        print(
            f"generated {written:,} files over {args.versions:,} versions, {vacuumed:,} vacuumed, {time.perf_counter() - t:.1f} s"
        )
    ours, peer = [], []
    bad = total = 0
    for rep in range(args.reps):
        ms, bad_s, total_s = run(OURS, str(table))
        ours.append(float(ms))
        bad, total = int(bad_s), int(total_s)
        rng = random.Random(rep)
        sample = sorted(rng.sample(range(args.versions), args.sample))
        per_version_ms, _peer_bad = run(PEER, str(table), ",".join(map(str, sample)))
        peer.append(float(per_version_ms) * args.versions)
    incr, incr_cpu = [], []
    for _rep in range(args.reps):
        ms, cpu = run(
            INCREMENTAL, str(table), str(WORK / "incremental"), str(args.versions), str(args.files_per_commit), "100"
        )
        incr.append(float(ms))
        incr_cpu.append(float(cpu))
    o, p = statistics.median(ours), statistics.median(peer)
    i = statistics.median(incr)
    print(
        f"\nReachability of every version, {args.versions:,} versions, {args.versions * args.files_per_commit:,} files"
    )
    print(f"load average {os.getloadavg()[0]:.2f}; {bad:,} of {total:,} versions not readable")
    print(f"deltaweb   full map            {o / 1000:8.2f} s   (runs: {', '.join(f'{x / 1000:.2f}' for x in ours)})")
    print(f"delta-rs   load + check each   {p / 1000:8.2f} s   (scaled from {args.sample} versions per run)")
    print(f"ratio      {o / p:.4f}   target: full map < 10 s: {'met' if o < 10_000 else 'missed'}")
    print(
        f"deltaweb   update after 100 commits {i / 1000:8.2f} s   (runs: {', '.join(f'{x / 1000:.2f}' for x in incr)}; "
        f"CPU {statistics.median(incr_cpu) / 1000:.2f} s; same answer as the full map)   target < 1 s: {'met' if i < 1_000 else 'missed'}"
    )
    print(
        json.dumps(
            {
                "benchmark": "reachability",
                "versions": args.versions,
                "files": args.versions * args.files_per_commit,
                "deltaweb_ms": ours,
                "deltars_scaled_ms": peer,
                "ratio": o / p,
                "incremental_100_commits_ms": incr,
                "incremental_100_commits_cpu_ms": incr_cpu,
                "not_readable": bad,
            }
        )
    )


if __name__ == "__main__":
    main()
