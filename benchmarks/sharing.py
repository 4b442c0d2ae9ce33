"""Time to first rows of a ~1 GB version through deltaweb's Delta Sharing server and the
official connector, against delta-rs reading the same files directly.

Usage: .venv/bin/python benchmarks/sharing.py [--workdir DIR] [--gib 1.0] [--reps 3] [--no-full]

A private deployment (everything under --workdir, default /tmp/deltaweb-bench/sharing: its own
SQLite database, allowed root and table): `migrate`, then gunicorn (2 workers x 4 threads, as a
deployment runs it) on a free loopback port. The table is written by delta-rs once (kept for
later runs): random int64 and float64 columns (incompressible) in one write (delta-rs cuts
the files at its target size), then one small append: version 0 is the ~1 GB version, read by
number. A share, a recipient and
its profile file are made through the ORM on the same database.

Measured, median of --reps, each from a new client (no connection reuse between repetitions):
- first rows: `load_as_pandas(url, version=0, limit=1000)` in the parquet format (the server's
  limitHint answers the first file; the connector reads 1000 rows of it over HTTP ranges) and
  in the delta format (the Delta kernel reads the file the answer names), against delta-rs's
  `DeltaTable(path, version=0).to_pyarrow_dataset().head(1000)`;
- the whole version (unless --no-full): the connector in the delta format (the kernel fetches
  every file through deltaweb's signed URLs) and in the parquet format (the connector's own
  choice for a table without reader features: fsspec and pyarrow fetch ranges), against
  delta-rs's `to_pyarrow_table()` and the same into pandas; for each connector read, the
  requests the server answered (from gunicorn's access log: HEADs, whole-file GETs, range GETs),
  the bytes they carried, the seconds the server spent on them, the client's and the server's
  CPU seconds (delta-rs's CPU seconds too: it reads on every core);
- the query alone: POST .../query at version 0 (the file list with signed URLs), after a few
  queries that take every worker past its first request.
Prints a table and, last, one JSON line; store it with
`benchmarks/report.py --add sharing OUT "benchmarks/sharing.py"`.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
FILE_ROWS = 4 << 20  # rows per 128 MiB: 4 columns of 8 bytes
READY_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_table(path: Path, gib: float) -> int:
    """Random columns in ~128 MiB files up to `gib`, then one small append: two versions."""
    import numpy as np
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    if (path / "_delta_log").is_dir():
        return sum(f.stat().st_size for f in path.rglob("*.parquet"))
    rng = np.random.default_rng(20261129)
    files = max(1, round(gib * (1 << 30) / (FILE_ROWS * 32)))
    schema = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("x", pa.float64()), ("y", pa.float64())])

    def batches():
        step = FILE_ROWS // 4
        for start in range(0, files * FILE_ROWS, step):
            yield pa.record_batch(
                [
                    pa.array(np.arange(start, start + step, dtype=np.int64)),
                    pa.array(rng.integers(0, 1 << 62, step, dtype=np.int64)),
                    pa.array(rng.random(step)),
                    pa.array(rng.random(step)),
                ],
                schema=schema,
            )

    # one write: version 0 holds every file (delta-rs cuts them at its target size)
    write_deltalake(str(path), pa.RecordBatchReader.from_batches(schema, batches()))
    DeltaTable(str(path))  # readable
    tail = pa.table({"id": pa.array([-1], pa.int64()), "a": [0], "x": [0.0], "y": [0.0]})
    write_deltalake(str(path), tail, mode="append")
    return sum(f.stat().st_size for f in path.rglob("*.parquet"))


# one line per request in gunicorn's access log: method, status, seconds, bytes, Range asked
ACCESS_FORMAT = "%(m)s %(s)s %(L)s %({content-length}o)s %({range}i)s"


def start_server(work: Path, env: dict[str, str]) -> tuple[str, subprocess.Popen]:
    subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True)
    port = free_port()
    (work / "access.log").write_bytes(b"")
    logged = ["--access-logfile", str(work / "access.log"), "--access-logformat", ACCESS_FORMAT]
    proc = subprocess.Popen(
        [PY, "-m", "gunicorn", "deltaweb.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2", "--threads", "4", *logged],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(work / "gunicorn.log", "wb"),
        start_new_session=True,
    )
    atexit.register(lambda: os.killpg(proc.pid, signal.SIGTERM) if proc.poll() is None else None)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=5).read()
            return url, proc
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"gunicorn did not answer within {READY_TIMEOUT:.0f} s (see {work / 'gunicorn.log'})")


def share(table_path: Path, base: str, work: Path) -> Path:
    """The table registered and shared with a recipient, through the ORM; its profile file."""
    import django

    django.setup()
    from tables.models import Recipient, Share, SharedTable, Table
    from tables.services.sharing.recipients import issue_token, profile

    Table.objects.filter(slug="bench").delete()
    Share.objects.filter(name="bench").delete()
    Recipient.objects.filter(name="bench").delete()
    table = Table.objects.create(name="bench", slug="bench", location=str(table_path))
    found = Share.objects.create(name="bench")
    SharedTable.objects.create(share=found, name="t", table=table)
    recipient = Recipient.objects.create(name="bench")
    recipient.shares.add(found)
    path = work / "bench.share"
    path.write_text(json.dumps(profile(recipient, issue_token(recipient), f"{base}/delta-sharing/")))
    return path


def timed(fn) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def served(log: Path, since: int, reps: int) -> dict[str, float]:
    """What the server answered after byte `since` of its access log, per repetition: file
    requests by kind, their bytes and the seconds the server spent on them."""
    time.sleep(1.5)  # gunicorn writes a request's line after its last byte
    # whole_bytes: what the whole-file GETs would carry (fsspec's existence checks close the
    # connection after the headers); range_bytes: what the ranges carried
    counts = {"head": 0, "get_whole": 0, "get_range": 0, "other": 0, "whole_bytes": 0, "range_bytes": 0}
    counts["server_s"] = 0.0
    with open(log, "rb") as fh:
        fh.seek(since)
        for line in fh.read().decode(errors="replace").splitlines():
            method, _status, seconds, length, asked = (line.split(" ", 4) + ["-"] * 5)[:5]
            kind = "head" if method == "HEAD" else "other" if method != "GET" else "get_whole"
            if kind == "get_whole" and asked.startswith("bytes="):
                kind = "get_range"
            counts[kind] += 1
            if kind.startswith("get_") and length.isdigit():
                counts[f"{kind[4:]}_bytes"] += int(length)
            counts["server_s"] += float(seconds)
    return {k: round(v / reps, 3) for k, v in counts.items()}


def group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) of the processes of a process group: the server's workers."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # after the name: state, ppid, pgrp, ..., utime, stime
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def cpu_timed(reps: int, fn, server: int = 0) -> tuple[float, float, Any, float]:
    """Median wall seconds, median CPU seconds of this process, the last result, and the median
    CPU seconds of the server's process group `server` (0: not measured)."""
    walls, cpus, served_cpus, out = [], [], [], None
    for _ in range(reps):
        c0, s0 = os.times(), group_cpu(server) if server else 0.0
        wall, out = timed(fn)
        c1, s1 = os.times(), group_cpu(server) if server else 0.0
        walls.append(wall)
        cpus.append(c1.user - c0.user + c1.system - c0.system)
        served_cpus.append(s1 - s0)
    return statistics.median(walls), statistics.median(cpus), out, statistics.median(served_cpus)


def median_of(reps: int, fn) -> tuple[float, Any]:
    runs = [timed(fn) for _ in range(reps)]
    return statistics.median(r[0] for r in runs), runs[-1][1]


def measure(profile_path: Path, table_path: Path, reps: int, full: bool, server: int = 0) -> dict[str, Any]:
    import delta_sharing
    import requests
    from deltalake import DeltaTable

    url = f"{profile_path}#bench.default.t"
    token = json.loads(profile_path.read_text())
    out: dict[str, Any] = {}
    log = profile_path.parent / "access.log"

    def query() -> None:
        requests.post(
            f"{token['endpoint']}shares/bench/schemas/default/tables/t/query",
            json={"version": 0},
            headers={"Authorization": f"Bearer {token['bearerToken']}"},
            timeout=120,
        ).raise_for_status()

    for _ in range(8):  # every gunicorn worker past its first request (imports, the first snapshot)
        query()
    out["query_s"], _ = median_of(reps, query)
    out["first_rows_parquet_s"], df = median_of(
        reps, lambda: delta_sharing.load_as_pandas(url, version=0, limit=1000, use_delta_format=False)
    )
    assert len(df) == 1000
    out["first_rows_delta_s"], df = median_of(
        reps, lambda: delta_sharing.load_as_pandas(url, version=0, limit=1000, use_delta_format=True)
    )
    assert len(df) == 1000
    out["first_rows_deltars_s"], head = median_of(
        reps, lambda: DeltaTable(str(table_path), version=0).to_pyarrow_dataset().head(1000)
    )
    assert head.num_rows == 1000
    if full:
        for fmt, delta in (("delta", True), ("parquet", False)):
            since = log.stat().st_size
            out[f"full_{fmt}_s"], out[f"full_{fmt}_cpu_s"], df, out[f"full_{fmt}_server_cpu_s"] = cpu_timed(
                reps, lambda delta=delta: delta_sharing.load_as_pandas(url, version=0, use_delta_format=delta), server
            )
            out[f"full_{fmt}_served"] = served(log, since, reps)
            rows = len(df)
            del df
        out["full_deltars_s"], out["full_deltars_cpu_s"], table, _ = cpu_timed(
            reps, lambda: DeltaTable(str(table_path), version=0).to_pyarrow_table()
        )
        assert table.num_rows == rows
        del table
        out["full_deltars_pandas_s"], out["full_deltars_pandas_cpu_s"], df, _ = cpu_timed(
            reps, lambda: DeltaTable(str(table_path), version=0).to_pyarrow_table().to_pandas(self_destruct=True)
        )
        assert len(df) == rows
        del df
        out["rows"] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default="/tmp/deltaweb-bench/sharing")
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-full", action="store_true")
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    (work / "root").mkdir(parents=True, exist_ok=True)
    table_path = work / "root" / f"table-{args.gib:g}gib"
    load0 = os.getloadavg()
    t_write, size = timed(lambda: write_table(table_path, args.gib))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
        "DELTAWEB_ALLOWED_ROOTS": str(work / "root"),
        "DELTAWEB_SECRET_KEY": "bench-" + "x" * 40,
    }
    os.environ.update(
        {k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "DELTAWEB_ALLOWED_ROOTS", "DELTAWEB_SECRET_KEY")}
    )
    base, _proc = start_server(work, env)
    profile_path = share(table_path, base, work)
    found = measure(profile_path, table_path, args.reps, not args.no_full, _proc.pid)
    found.update(bytes=size, write_s=round(t_write, 1))
    record = {**found, "loadavg_before": list(load0), "loadavg": list(os.getloadavg()), "at": time.time()}
    print(f"version 0: {size / (1 << 30):.2f} GiB, median of {args.reps}")
    for key, value in found.items():
        if isinstance(value, dict):
            print(f"  {key:24} " + ", ".join(f"{k} {v:,}" for k, v in value.items()))
        else:
            print(f"  {key:24} {value:,.3f}" if isinstance(value, float) else f"  {key:24} {value:,}")
    print(json.dumps(record), flush=True)
    # the connector's Delta kernel aborts the interpreter's exit (its runtime's threads): the
    # numbers are printed, leave without running the exit handlers but the server's stop
    os.killpg(_proc.pid, signal.SIGTERM)
    os._exit(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
