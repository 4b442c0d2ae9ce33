"""A shared table of many small files read by the official Delta Sharing connector, served by
`make run`'s development server and by the image's gunicorn: seconds per file.

Usage: .venv/bin/python benchmarks/sharing_files.py [--files 82] [--server runserver|devserver|gunicorn|all] [--reps 3]

Everything under --workdir (default /tmp/deltaweb-bench/sharing-files): its own SQLite
database, allowed root and a table of --files appends by delta-rs (one small file each). The
servers: `python -m deltaweb.devserver --noreload --nostatic` as scripts/run.sh starts it
(DELTAWEB_DEBUG=1, the collected static files), Django's own `manage.py runserver` (what
scripts/run.sh started before: Nagle's algorithm on) with the same environment, and gunicorn as the image runs it (3 workers x
4 threads). Measured, median of --reps: `load_as_pandas(url)` of the latest version in the
parquet format (the connector fetches every file through deltaweb's signed URLs) and in the
delta format (the Delta kernel does), each compared with delta-rs's rows. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sharing import PY, READY_TIMEOUT, ROOT, free_port, share, timed  # noqa: E402


def write_table(path: Path, files: int) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    if path.exists() and len(DeltaTable(str(path)).file_uris()) == files:
        return
    for i in range(files):
        write_deltalake(
            str(path), pa.table({"id": list(range(i * 100, i * 100 + 100)), "v": [float(i)] * 100}), mode="append"
        )


def start(kind: str, work: Path, env: dict[str, str]) -> tuple[str, subprocess.Popen]:
    port = free_port()
    if kind == "devserver":  # what scripts/run.sh starts
        command = [PY, "-m", "deltaweb.devserver", f"127.0.0.1:{port}", "--noreload", "--nostatic"]
    elif kind == "runserver":  # Django's own, as scripts/run.sh started it before
        command = [PY, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--nostatic"]
    else:
        command = [PY, "-m", "gunicorn", "deltaweb.wsgi", "-b", f"127.0.0.1:{port}", "-w", "3", "--threads", "4"]
    log = open(work / f"{kind}.log", "wb")
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=5).read()
            return url, proc
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{kind} did not answer within {READY_TIMEOUT:.0f} s (see {work / kind}.log)")


def measure(profile: Path, table: Path, reps: int) -> dict[str, float]:
    import delta_sharing
    from deltalake import DeltaTable

    url = f"{profile}#bench.default.t"
    want = DeltaTable(str(table)).to_pandas().sort_values("id").reset_index(drop=True)
    out = {}
    for fmt, delta in (("parquet", False), ("delta", True)):
        runs = []
        for _ in range(reps):
            seconds, df = timed(lambda delta=delta: delta_sharing.load_as_pandas(url, use_delta_format=delta))
            assert df.sort_values("id").reset_index(drop=True)[["id", "v"]].equals(want[["id", "v"]])
            runs.append(seconds)
        out[f"{fmt}_s"] = round(statistics.median(runs), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default="/tmp/deltaweb-bench/sharing-files")
    parser.add_argument("--files", type=int, default=82)
    parser.add_argument("--server", choices=["runserver", "devserver", "gunicorn", "all"], default="all")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    (work / "root").mkdir(parents=True, exist_ok=True)
    table = work / "root" / f"many-{args.files}"
    write_table(table, args.files)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
        "DELTAWEB_ALLOWED_ROOTS": str(work / "root"),
        "DELTAWEB_SECRET_KEY": "bench-" + "x" * 40,
        "DELTAWEB_SHARING_URL_KEY": "bench-url-key-" + "y" * 32,
    }
    os.environ.update({k: env[k] for k in env if k.startswith(("DJANGO", "DATABASE", "DELTAWEB"))})
    subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True)
    dev = {**env, "DELTAWEB_DEBUG": "1", "DELTAWEB_STATIC_AUTOREFRESH": "0", "DELTAWEB_STATIC_FINDERS": "0"}
    record: dict[str, object] = {"files": args.files, "loadavg_before": list(os.getloadavg())}
    for kind in ("runserver", "devserver", "gunicorn") if args.server == "all" else (args.server,):
        base, proc = start(kind, work, dev if kind != "gunicorn" else env)
        try:
            profile = share(table, base, work)
            found = measure(profile, table, args.reps)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
        record[kind] = found
        print(
            f"{kind:10} " + "  ".join(f"{k} {v:.2f} ({v / args.files:.3f} s/file)" for k, v in found.items()),
            flush=True,
        )
    record["loadavg"] = list(os.getloadavg())
    print(json.dumps(record), flush=True)
    os._exit(0)  # the connector's Delta kernel aborts the interpreter's exit (sharing.py)


if __name__ == "__main__":
    raise SystemExit(main())
