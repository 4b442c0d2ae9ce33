"""Reachability map of a 10,000-version, 100,000-file table: deltaweb vs delta-rs.

Usage: .venv/bin/python benchmarks/reachability.py [--versions N] [--files-per-commit K] [--reps R]
       .venv/bin/python benchmarks/reachability.py --window [--versions N] [--all-missing]

The table (written directly, data files empty on disk): each commit adds K files and, from
version 1000 on, removes K/2 older ones; then 10% of the removed files are deleted as VACUUM
would. deltaweb computes every version's reachability in one call (fresh process per run).
delta-rs has no such call: the peer is what a user would do with it, load a version and check
that its files exist; it is timed on a sample of versions and scaled to all of them.

With `--window`: the next window's answer as pages get it, derived from the stored one
(`ReachRuns.at`, a day later) against computing it again from the kept state (`answer`, what a
worker did every 5 minutes), checked equal; and a web worker's memory with the stored answer
loaded (RSS, fresh process): the compact answer it now reads, against the same plus every
missing file's name (what it held before the names were stored apart). `--all-missing`
deletes every data file first, as in the million-commit benchmark (every file missing).

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
from tables.delta.history.reachability.compute import answer, reach_state, reachability, update_state
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

# the window: the answer a day later, derived from the stored one vs computed again from the
# kept state; then a fresh process's memory with the stored answer loaded, with and without names
WINDOW = """
import sys, time
sys.path.insert(0, '.')
from tables.delta.history.reachability.runs import MissingNames, ReachRuns
from tables.delta.history.reachability.compute import DAY_MS, answer, reach_state
path, reps = sys.argv[1], int(sys.argv[2])
state = reach_state(path)
now = int(time.time() * 1000)
first = answer(state, path, now)
stored = ReachRuns.of(first)
index, blocks = MissingNames.blocks_of(first.gone)
full_s, derive_s = [], []
for rep in range(reps):
    later = now + (rep + 1) * DAY_MS
    t = time.process_time()
    expected = ReachRuns.of(answer(state, path, later))
    full_s.append(time.process_time() - t)
    kept = ReachRuns.from_bytes(stored.to_bytes())
    t = time.process_time()
    got = kept.at(later)
    derive_s.append(time.process_time() - t)
    assert list(got.starts) == list(expected.starts) and got.states == expected.states, "the derived window differs"
    assert (got.stamps == expected.stamps).all() and (got.counts == expected.counts).all()
open(sys.argv[3], 'wb').write(stored.to_bytes())
open(sys.argv[3] + '.names', 'wb').write(len(index).to_bytes(8, 'little') + index + b''.join(len(b).to_bytes(8, 'little') + b for b in blocks))
print(json.dumps({"full_cpu_s": full_s, "derive_cpu_s": derive_s, "runs": len(got.starts), "missing_files": len(first.gone), "stored_bytes": len(stored.to_bytes()), "names_bytes": sum(map(len, blocks)) + len(index)}))
""".replace("import sys, time", "import json, sys, time")

# a web worker's memory: RSS before and after loading the stored answer (and deriving a window),
# then with every missing name decoded as the answer held them before (names in one buffer)
MEMORY = """
import sys, resource, time
sys.path.insert(0, '.')
import numpy, orjson, zlib
from tables.delta.history.reachability.runs import ReachRuns, _block
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20
base = rss()
runs = ReachRuns.from_bytes(open(sys.argv[1], 'rb').read()).at(int(time.time() * 1000))
compact = rss()
data, at, held = open(sys.argv[1] + '.names', 'rb').read(), 0, []
n = int.from_bytes(data[:8], 'little'); at = 8 + n
while at < len(data):
    k = int.from_bytes(data[at:at + 8], 'little'); held.append(_block(data[at + 8:at + 8 + k])); at += 8 + k
names = rss()
print(compact - base, names - base)
"""

OURS = """
import sys, time
t = time.perf_counter()
from tables.delta.history.reachability.compute import reachability
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


def window(args: argparse.Namespace) -> None:
    """The next window's answer derived vs computed again, and a worker's memory with it."""
    import shutil

    table = WORK / f"w{args.versions}x{args.files_per_commit}{'-gone' if args.all_missing else ''}"
    if not (table / "_delta_log" / f"{args.versions - 1:020}.json").exists():
        shutil.rmtree(table, ignore_errors=True)
        generate(table, args.versions, args.files_per_commit)
        if args.all_missing:
            for f in table.glob("part-*.parquet"):
                f.unlink()
    stored = str(WORK / "window.answer")
    load = os.getloadavg()[0]
    found = json.loads(" ".join(run(WINDOW, str(table), str(args.reps), stored)))
    compact_mb, names_mb = map(float, run(MEMORY, stored))
    f, d = statistics.median(found["full_cpu_s"]), statistics.median(found["derive_cpu_s"])
    print(f"\nThe next window, {args.versions:,} versions, {found['missing_files']:,} missing files (load {load:.1f})")
    print(
        f"computed again from the kept state  {f:8.3f} s CPU   derived from the stored answer  {d * 1000:8.1f} ms CPU"
    )
    print(f"stored answer {found['stored_bytes'] / 2**20:.1f} MB, names apart {found['names_bytes'] / 2**20:.1f} MB")
    print(f"a worker's RSS with the answer {compact_mb:.0f} MB; with every name too (as before) {names_mb:.0f} MB")
    print(json.dumps({"benchmark": "reachability_window", "versions": args.versions, **found, "load": load,
                      "worker_answer_mb": compact_mb, "worker_answer_and_names_mb": names_mb}))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", type=int, default=10_000)
    ap.add_argument("--files-per-commit", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sample", type=int, default=10, help="versions delta-rs loads per run")
    ap.add_argument("--window", action="store_true", help="the next window: derived vs computed again, and memory")
    ap.add_argument("--all-missing", action="store_true", help="with --window: every data file deleted first")
    args = ap.parse_args()
    if args.window:
        return window(args)
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
