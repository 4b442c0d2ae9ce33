"""A version's summary from its verified checksum file against a replay of the log, on a
100,000-file table.

Usage: .venv/bin/python benchmarks/checksum_fast_path.py [--files N] [--reps N] [--all-files] [--workdir DIR]

The table: one commit of N adds with statistics (gen_log.write_many_adds), and the checksum
file Delta Spark writes beside it (`_delta_log/00000000000000000000.crc`: counts, size,
metadata, protocol, empty set transactions and domain metadata, the file-size histogram;
no `allFiles`, which Delta Spark leaves out of large tables; `--all-files` lists them anyway,
the worst case of the fast path), made here from the core's replay.
The checksum is verified once (`verify_checksums`, timed too), then, in this process, each
repetition times

  replay     load_snapshot(path, 0).summary(files=False): what a version's summary costs without it
  checksum   the fast path of tables.services.sync.checksums.verified_summary without the
             database (summary_if_unchanged: the checksum file read, its SHA-256 compared with
             the verified one, its summary), and the replay when the file is beyond
             FAST_PATH_MAX_BYTES (with --all-files)

and checks that both answers are the same. Prints the medians, the ratio, and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
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

import gen_log  # noqa: E402
import numpy as np  # noqa: E402

from tables.delta.log.listing import LogFile  # noqa: E402
from tables.delta.snapshot.checksum import (  # noqa: E402
    checksum_path,
    read_checksum,
    summary_if_unchanged,
    verify_checksums,
)
from tables.delta.snapshot.state import load_snapshot  # noqa: E402
from tables.delta.storage.opening import as_storage  # noqa: E402

# Delta Spark's bins, the first of them (its histogram goes on to 256 GiB in coarser steps)
BOUNDARIES = [0, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152, 4194304, 8388608]


def write_checksum(table: Path, all_files: bool) -> None:
    """Version 0's checksum file, as Delta Spark writes it for a large table."""
    snap = load_snapshot(table, 0)
    sizes = snap.files.column("size").to_numpy()
    idx = np.searchsorted(np.asarray(BOUNDARIES), sizes, side="right") - 1
    body = {
        "txnId": "bench",
        "tableSizeBytes": snap.size_bytes,
        "numFiles": snap.num_files,
        "numMetadata": 1,
        "numProtocol": 1,
        "setTransactions": [],
        "domainMetadata": [],
        "metadata": snap.metadata.to_dict(),
        "protocol": snap.protocol.to_dict(),
        "histogramOpt": {
            "sortedBinBoundaries": BOUNDARIES,
            "fileCounts": np.bincount(idx, minlength=len(BOUNDARIES)).tolist(),
            "totalBytes": np.bincount(idx, weights=sizes, minlength=len(BOUNDARIES)).astype(np.int64).tolist(),
        },
    }
    if all_files:
        cols = ["path", "partitionValues", "size", "modificationTime"]
        body["allFiles"] = [{**f, "dataChange": False} for f in snap.files.select(cols).to_pylist()]
    (table / checksum_path(0)).write_text(json.dumps(body))


def fast_path(table: Path, sha: str) -> dict:
    out = summary_if_unchanged(as_storage(table), 0, sha)
    return out if out is not None else replay(table)  # what the service does without it


def replay(table: Path) -> dict:
    return load_snapshot(table, 0).summary(files=False)


def timed(fn, *args) -> tuple[float, dict]:
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--all-files", action="store_true", help="the checksum lists every live file")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="crc-bench-"))
    table = work / "table"
    shutil.rmtree(table, ignore_errors=True)
    gen_log.write_many_adds(table, commits=1, adds_per_commit=args.files)
    write_checksum(table, args.all_files)
    verify_s, verified = timed(verify_checksums, table)
    assert verified["ok"] and verified["checked"] == 1, verified
    storage = as_storage(table)
    sha = read_checksum(storage, LogFile("crc", 0, checksum_path(0), fmt="json", storage=storage)).sha256
    replays, fasts = [], []
    for _ in range(args.reps):
        t_replay, a = timed(replay, table)
        t_fast, b = timed(fast_path, table, sha)
        assert a == b, "the checksum's summary differs from the replay's"
        replays.append(t_replay)
        fasts.append(t_fast)
    r, f = statistics.median(replays), statistics.median(fasts)
    crc_bytes = (table / checksum_path(0)).stat().st_size
    print(f"table: {args.files:,} files in one commit; checksum file {crc_bytes:,} bytes")
    print(f"verify once (replay + compare)   {verify_s:8.4f} s")
    print(f"summary by replay (median of {args.reps})  {r:8.4f} s")
    print(f"summary from the checksum        {f:8.4f} s")
    print(f"ratio (replay / checksum)        {r / f:8.0f}x")
    print(
        json.dumps(
            {
                "files": args.files,
                "allFiles": args.all_files,
                "checksumBytes": crc_bytes,
                "verifySeconds": round(verify_s, 4),
                "replaySeconds": round(r, 4),
                "checksumSeconds": round(f, 5),
                "ratio": round(r / f, 1),
                "replayRuns": [round(x, 4) for x in replays],
                "checksumRuns": [round(x, 5) for x in fasts],
            }
        )
    )
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
