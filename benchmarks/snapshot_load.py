"""Cold snapshot load: deltaweb vs delta-rs on a 300,000-file partitioned table.

Usage: .venv/bin/python benchmarks/snapshot_load.py [--quick] [--reps N] [--workdir DIR]

Three variants of the same table (3 commits of 100,000 adds each, written by gen_log):
  json             JSON commits only
  checkpoint       a copy with a classic checkpoint at the last version, written by delta-rs
  checkpoint_tail  the checkpointed copy and one more commit removing 1,000 of its files and
                   adding 1,000 new ones (replay then reconciles the tail with the checkpoint)

Every measured case runs in a fresh subprocess per repetition (no cache or allocator state
carried between runs or between the two libraries); deltaweb and delta-rs repetitions are
interleaved, alternating which goes first. The OS page cache stays warm (the data is read
once for the correctness check before timing), so this is "cold process, warm disk".

deltaweb:  tables.delta.snapshot.state.load_snapshot(path), then snap.file_paths()
delta-rs:  deltalake.DeltaTable(path), then dt.file_uris()
Besides wall times, each run's CPU time (user + system, every thread) of load+paths: on a
loaded machine the wall ratio drifts with the scheduler, the CPU ratio much less.

Prints a table and, last, one JSON line with every number.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import gen_log  # noqa: E402

COMMITS = 3
ADDS_PER_COMMIT = 100_000
SEED = 7
# issue 18: JSON-only in-process <= 0.3x, checkpointed <= 0.2x; whole process <= 0.5x
TARGETS = {"json": 0.3, "checkpoint": 0.2, "checkpoint_tail": 0.2}
PROCESS_TARGET = 0.5
TAIL_CHANGES = 1_000  # files removed, and files added, by the commit after the checkpoint
LIBS = ("deltaweb", "delta-rs")
VARIANTS = ("json", "checkpoint", "checkpoint_tail")


# ---------------------------------------------------------------- worker (one measured run)


def worker(lib: str, path: str) -> None:
    """Runs in a fresh interpreter: import, load, list paths; prints one JSON line."""
    t_import = time.perf_counter()
    if lib == "deltaweb":
        from tables.delta.snapshot.state import load_snapshot

        t0, c0 = time.perf_counter(), _cpu_s()
        snap = load_snapshot(path)
        t1 = time.perf_counter()
        paths = snap.file_paths()
        t2, c2 = time.perf_counter(), _cpu_s()
        version = snap.version
    else:
        import deltalake

        t0, c0 = time.perf_counter(), _cpu_s()
        dt = deltalake.DeltaTable(path)
        t1 = time.perf_counter()
        paths = dt.file_uris()
        t2, c2 = time.perf_counter(), _cpu_s()
        version = dt.version()
    rss_kb = _peak_rss_kb()
    print(
        json.dumps(
            {
                "import_s": t0 - t_import,
                "load_s": t1 - t0,
                "total_s": t2 - t0,
                "cpu_s": c2 - c0,
                "files": len(paths),
                "version": version,
                "max_rss_mb": rss_kb / 1024,
            }
        )
    )


def _cpu_s() -> float:
    """This process's CPU time so far, every thread, user and system."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _peak_rss_kb() -> int:
    """This process's peak RSS (VmHWM: unlike ru_maxrss it is not inherited across exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run_worker(lib: str, path: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", lib, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"worker {lib} on {path} failed (exit {proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_process(lib: str, path: Path) -> float:
    """Whole-process wall time of a command a user would run: the `delta` console script
    (`delta snapshot --no-files --json`, every file replayed, none printed) or a Python
    process opening the table with delta-rs (DeltaTable(path) and its version)."""
    if lib == "deltaweb":
        cmd = [str(Path(sys.executable).parent / "delta"), "snapshot", "--no-files", "--json", str(path)]
    else:
        cmd = [sys.executable, "-c", "import sys, deltalake; print(deltalake.DeltaTable(sys.argv[1]).version())",
               str(path)]  # fmt: skip
    # this checkout's code, wherever the console script's editable install points
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{lib} process on {path} failed (exit {proc.returncode}):\n{proc.stderr}")
    return wall


# ---------------------------------------------------------------- data


def prepare(workdir: Path) -> dict[str, Path]:
    """The table variants under workdir/snapshot_load, generated once and reused."""
    base = workdir / "snapshot_load"
    marker = base / ".complete"
    params = {"commits": COMMITS, "adds_per_commit": ADDS_PER_COMMIT, "seed": SEED, "gen": 1}
    paths = {"json": base / "json", "checkpoint": base / "checkpoint"}
    if marker.exists() and json.loads(marker.read_text()) == params:
        print(f"reusing generated tables in {base}")
        return paths | {"checkpoint_tail": prepare_tail(base, paths["checkpoint"])}
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    t = time.perf_counter()
    gen_log.write_many_adds(paths["json"], commits=COMMITS, adds_per_commit=ADDS_PER_COMMIT, seed=SEED)
    print(f"generated {COMMITS} x {ADDS_PER_COMMIT:,} adds in {time.perf_counter() - t:.1f}s -> {paths['json']}")
    shutil.copytree(paths["json"], paths["checkpoint"])
    t = time.perf_counter()
    import deltalake

    deltalake.DeltaTable(str(paths["checkpoint"])).create_checkpoint()
    cps = sorted(p.name for p in (paths["checkpoint"] / "_delta_log").glob("*.checkpoint*.parquet"))
    if not cps:
        raise SystemExit("delta-rs create_checkpoint() wrote no checkpoint file")
    print(f"delta-rs wrote checkpoint {', '.join(cps)} in {time.perf_counter() - t:.1f}s")
    marker.write_text(json.dumps(params))
    return paths | {"checkpoint_tail": prepare_tail(base, paths["checkpoint"])}


def prepare_tail(base: Path, checkpointed: Path) -> Path:
    """The checkpointed copy and one more commit: TAIL_CHANGES of the first commit's files
    removed (spread over it) and as many new files added in the same partitions."""
    tail = base / "checkpoint_tail"
    marker = tail / ".complete"
    if marker.exists() and json.loads(marker.read_text()) == {"changes": TAIL_CHANGES}:
        return tail
    shutil.rmtree(tail, ignore_errors=True)
    shutil.copytree(checkpointed, tail)
    log = tail / "_delta_log"
    with open(log / f"{0:020d}.json") as fh:
        adds = [a["add"] for a in map(json.loads, fh) if "add" in a]
    step = max(1, len(adds) // TAIL_CHANGES)
    gone = adds[::step][:TAIL_CHANGES]
    ts = 1_700_000_000_000 + (COMMITS + 1) * 1000
    lines = [{"commitInfo": {"timestamp": ts, "operation": "DELETE", "operationParameters": {}, "engineInfo": "bench"}}]
    for a in gone:
        lines.append({"remove": {"path": a["path"], "deletionTimestamp": ts, "dataChange": True,
                                 "partitionValues": a["partitionValues"], "size": a["size"]}})  # fmt: skip
    for i, a in enumerate(gone):
        folder = a["path"].rsplit("/", 1)[0] + "/" if "/" in a["path"] else ""
        lines.append({"add": {"path": f"{folder}tail-{i:05d}.snappy.parquet", "partitionValues": a["partitionValues"],
                              "size": a["size"], "modificationTime": ts, "dataChange": True}})  # fmt: skip
    (log / f"{COMMITS:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    marker.write_text(json.dumps({"changes": TAIL_CHANGES}))
    print(f"wrote {tail}: a commit after the checkpoint removing and adding {len(gone):,} files")
    return tail


def _relative(uri: str, root: Path) -> str:
    """delta-rs file URI (or path) -> URL-decoded path relative to the table root."""
    p = unquote(urlparse(uri).path) if uri.startswith("file:") else uri
    return os.path.relpath(p, root)


def verify(paths: dict[str, str]) -> dict[str, int]:
    """Both libraries must see the same files (same count, same set of decoded paths)."""
    import deltalake

    from tables.delta.snapshot.state import load_snapshot

    counts = {}
    for variant, p in paths.items():
        path = Path(p)
        snap = load_snapshot(path)
        ours = snap.file_paths()
        dt = deltalake.DeltaTable(str(path))
        theirs = dt.file_uris()
        root = path.resolve()
        theirs_rel = {_relative(u, root) for u in theirs}
        problems = []
        if snap.version != dt.version():
            problems.append(f"version {snap.version} (deltaweb) != {dt.version()} (delta-rs)")
        if len(ours) != len(theirs):
            problems.append(f"{len(ours):,} files (deltaweb) != {len(theirs):,} (delta-rs)")
        if len(set(ours)) != len(ours):
            problems.append("deltaweb returned duplicate paths")
        if set(ours) != theirs_rel:
            only_ours, only_theirs = sorted(set(ours) - theirs_rel), sorted(theirs_rel - set(ours))
            problems.append(
                f"path sets differ: {len(only_ours)} only in deltaweb (e.g. {only_ours[:2]}), "
                f"{len(only_theirs)} only in delta-rs (e.g. {only_theirs[:2]})"
            )
        if len(ours) != COMMITS * ADDS_PER_COMMIT:
            problems.append(f"expected {COMMITS * ADDS_PER_COMMIT:,} files, got {len(ours):,}")
        if problems:
            raise SystemExit(f"VERIFICATION FAILED for {variant} ({path}):\n  " + "\n  ".join(problems))
        counts[variant] = len(ours)
        print(f"verified {variant}: {len(ours):,} files, same decoded path set in deltaweb and delta-rs")
    return counts


# ---------------------------------------------------------------- main


def _ms(values: list[float]) -> dict:
    ms = [v * 1000 for v in values]
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms), "all": [round(v, 1) for v in ms]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 repetitions instead of 5")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per case (default 5, --quick 2)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/deltaweb-bench"))
    ap.add_argument("--worker", nargs=2, metavar=("LIB", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        if args.worker[0] == "verify":
            counts = verify(json.loads(args.worker[1]))
            print(json.dumps(counts))
        else:
            worker(*args.worker)
        return
    reps = args.reps or (2 if args.quick else 5)

    dl_version = importlib.metadata.version("deltalake")
    paths = prepare(args.workdir)
    # in a subprocess too, so this process stays small while it starts the measured ones
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "verify",
            json.dumps({k: str(v) for k, v in paths.items()}),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    out = proc.stdout.strip().splitlines()
    print("\n".join(out[:-1]))
    if proc.returncode != 0:
        raise SystemExit(f"verification failed (exit {proc.returncode})")
    counts = json.loads(out[-1])

    load0 = os.getloadavg()
    runs: dict[str, dict[str, list[dict]]] = {v: {lib: [] for lib in LIBS} for v in VARIANTS}
    print(f"\nmeasuring: {reps} repetitions x {len(VARIANTS)} variants x {len(LIBS)} libraries, fresh process each")
    for rep in range(reps):
        for variant in VARIANTS:
            order = LIBS if rep % 2 == 0 else LIBS[::-1]
            for lib in order:
                r = run_worker(lib, paths[variant])
                if r["files"] != counts[variant]:
                    raise SystemExit(f"{lib} on {variant} returned {r['files']} files, expected {counts[variant]}")
                runs[variant][lib].append(r)
                print(
                    f"  rep {rep + 1}/{reps} {variant:<15} {lib:<8} load {r['load_s'] * 1000:8.1f} ms"
                    f"  load+paths {r['total_s'] * 1000:8.1f} ms",
                    flush=True,
                )

    procs: dict[str, dict[str, list[float]]] = {v: {lib: [] for lib in LIBS} for v in VARIANTS}
    for rep in range(reps):
        for variant in VARIANTS:
            for lib in LIBS if rep % 2 == 0 else LIBS[::-1]:
                procs[variant][lib].append(run_process(lib, paths[variant]))
                print(
                    f"  rep {rep + 1}/{reps} {variant:<15} {lib:<8} whole process {procs[variant][lib][-1] * 1000:8.1f} ms"
                )

    load1 = os.getloadavg()
    results: dict = {}
    for variant in VARIANTS:
        res: dict = {}
        for lib in LIBS:
            rs = runs[variant][lib]
            res[lib] = {
                "load_ms": _ms([r["load_s"] for r in rs]),
                "load_paths_ms": _ms([r["total_s"] for r in rs]),
                "cpu_ms": _ms([r["cpu_s"] for r in rs]),
                "import_ms": _ms([r["import_s"] for r in rs]),
                "max_rss_mb": statistics.median(r["max_rss_mb"] for r in rs),
                "files": rs[0]["files"],
            }
        res["ratio_load_paths"] = (
            res["deltaweb"]["load_paths_ms"]["median"] / res["delta-rs"]["load_paths_ms"]["median"]
        )
        res["ratio_load"] = res["deltaweb"]["load_ms"]["median"] / res["delta-rs"]["load_ms"]["median"]
        res["ratio_cpu"] = res["deltaweb"]["cpu_ms"]["median"] / res["delta-rs"]["cpu_ms"]["median"]
        res["target"] = TARGETS[variant]
        res["process_ms"] = {lib: _ms(procs[variant][lib]) for lib in LIBS}
        res["ratio_process"] = res["process_ms"]["deltaweb"]["median"] / res["process_ms"]["delta-rs"]["median"]
        results[variant] = res

    w = max(len(v) for v in VARIANTS) + 2
    print()
    print(
        f"Cold snapshot load, {COMMITS * ADDS_PER_COMMIT:,} add actions ({COMMITS} commits x {ADDS_PER_COMMIT:,}),"
        f" median of {reps} fresh-process runs (page cache warm)"
    )
    print(
        f"deltalake {dl_version}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end"
    )
    hdr = (
        f"{'variant':<{w}}{'library':<10}{'load ms':>10}{'load+paths ms':>15}{'min..max (load+paths)':>24}"
        f"{'CPU ms':>9}{'import ms':>11}{'max RSS MB':>12}{'files':>10}"
    )
    print(hdr)
    print("-" * len(hdr))
    for variant in VARIANTS:
        for lib in LIBS:
            r = results[variant][lib]
            lp = r["load_paths_ms"]
            spread = f"{lp['min']:.0f}..{lp['max']:.0f}"
            print(
                f"{variant:<{w}}{lib:<10}{r['load_ms']['median']:>10.1f}{lp['median']:>15.1f}"
                f"{spread:>24}{r['cpu_ms']['median']:>9.1f}{r['import_ms']['median']:>11.1f}"
                f"{r['max_rss_mb']:>12.0f}{r['files']:>10,}"
            )
    print()
    print(f"{'variant':<{w}}{'ratio load+paths':>18}{'ratio load':>12}{'ratio CPU':>11}   target (load+paths)")
    for variant in VARIANTS:
        res = results[variant]
        ok = "MET" if res["ratio_load_paths"] <= res["target"] else "MISSED"
        print(
            f"{variant:<{w}}{res['ratio_load_paths']:>18.2f}{res['ratio_load']:>12.2f}{res['ratio_cpu']:>11.2f}"
            f"   <= {res['target']}: {ok}"
        )
    print("ratio = deltaweb median / delta-rs median; import time is not part of load.")
    print()
    print(
        f"{'variant':<{w}}{'delta CLI ms':>14}{'delta-rs process ms':>21}{'ratio':>8}"
        f"   whole process, target <= {PROCESS_TARGET}"
    )
    for variant in VARIANTS:
        pm = results[variant]["process_ms"]
        ok = "MET" if results[variant]["ratio_process"] <= PROCESS_TARGET else "MISSED"
        print(
            f"{variant:<{w}}{pm['deltaweb']['median']:>14.1f}{pm['delta-rs']['median']:>21.1f}"
            f"{results[variant]['ratio_process']:>8.2f}   {ok}"
        )
    print(
        json.dumps(
            {
                "benchmark": "snapshot_load",
                "adds": COMMITS * ADDS_PER_COMMIT,
                "commits": COMMITS,
                "reps": reps,
                "deltalake": dl_version,
                "cpus": os.cpu_count(),
                "loadavg": [load0[0], load1[0]],
                "targets": TARGETS,
                "process_target": PROCESS_TARGET,
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
